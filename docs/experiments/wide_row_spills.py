"""Registers and spills of wide softmax rows in one program, from offline sm_90 builds (no GPU needed).

Compiles softmax ``triton_row``'s kernel (the whole row in one block, converted to fp32) and a variant that keeps
x in its 16-bit dtype and recomputes the exponent for the output (``exp(x - (m + log s))``, an expression the
compiler cannot merge with the sum's ``exp(x - m)``), and prints ptxas's registers and spill bytes a thread.

    python docs/experiments/wide_row_spills.py [fp16|bf16]

Session 13 (triton 3.6's interpreter-free compiler with its own ptxas, sm_90a), fp16, as (registers,
spill stores/loads bytes): N=65536 on 32 warps triton_row (64, 184/208), recompute (64, 112/152); on 16 warps
(128, 320/344) and (128, 44/76); N=32768 on 16 warps (117, 0/0) and (127, 0/0). docs/kernel-notes.md, session 13.
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kernels import softmax as sm  # noqa: E402

ptxas = next(pathlib.Path(triton.__file__).parent.glob("backends/nvidia/bin/ptxas"))


@triton.jit
def recompute_row(out_ptr, in_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))  # kept in the input dtype
    m = tl.max(x, axis=0).to(tl.float32)
    s = tl.sum(tl.exp(x.to(tl.float32) - m), axis=0)
    shift = m + tl.log(s)
    y = tl.exp(x.to(tl.float32) - shift)
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def stats(fn, sig, const, warps, attrs=()):
    a = {(i,): [["tt.divisibility", 16]] for i in attrs}
    k = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=const, attrs=a),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": warps},
    )
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(k.asm["ptx"])
    r = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"], capture_output=True, text=True)
    txt = r.stderr + r.stdout
    regs = re.findall(r"Used (\d+) registers", txt)
    sp = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", txt)
    return regs, sp


dt = sys.argv[1] if len(sys.argv) > 1 else "fp16"
for N, warps in [(65536, 32), (65536, 16), (32768, 16)]:
    sig = {
        "out_ptr": f"*{dt}",
        "in_ptr": f"*{dt}",
        "n_rows": "i32",
        "n_cols": "i32",
        "in_row_stride": "i32",
        "out_row_stride": "i32",
    }
    sig |= dict.fromkeys(("BLOCK_SIZE", "ALIGNED", "VEC", "KEEP_TAIL", "ROWS", "REDUCE_AXIS"), "constexpr")
    const = {"BLOCK_SIZE": N, "ALIGNED": False, "VEC": 8, "KEEP_TAIL": True, "ROWS": 1, "REDUCE_AXIS": 1}
    print(dt, N, warps, "triton_row", stats(sm._row_softmax_kernel, sig, const, warps, attrs=(0, 1, 3, 4, 5)))
    sig2 = {"out_ptr": f"*{dt}", "in_ptr": f"*{dt}", "n_cols": "i32", "stride": "i32", "BLOCK": "constexpr"}
    print(dt, N, warps, "recompute", stats(recompute_row, sig2, {"BLOCK": N}, warps, attrs=(0, 1, 2, 3)))
