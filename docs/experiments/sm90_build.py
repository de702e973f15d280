"""Offline sm_90 build of a ``@triton.jit`` kernel, shared by the experiment scripts beside it: the PTX from
Triton's compiler and ptxas's registers and spills a thread (``ptxas`` ships with Triton's NVIDIA backend, so no GPU
is needed). Import it from a script run in this folder, with ``TRITON_INTERPRET`` unset."""

import pathlib
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

PTXAS = next(pathlib.Path(triton.__file__).parent.glob("backends/nvidia/bin/ptxas"))


def build_sm90(fn, sig, const, warps, divisible, stages=None):
    """``(compiled kernel, ptx, registers, spills)``; ``divisible``: the indices of the arguments a launch would
    specialise as multiples of 16 (pointers from the allocator, widths and strides that are); ``stages``: the
    launch's ``num_stages`` (None: Triton's default)."""
    options = {"num_warps": warps} if stages is None else {"num_warps": warps, "num_stages": stages}
    k = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=const, attrs={(i,): [["tt.divisibility", 16]] for i in divisible}),
        target=GPUTarget("cuda", 90, 32),
        options=options,
    )
    ptx = k.asm["ptx"]
    regs, spills = ptxas_usage(ptx)
    return k, ptx, regs, spills


def ptxas_usage(ptx: str) -> tuple[list[str], list[tuple[str, str]]]:
    """ptxas's registers a thread and (spill-store, spill-load) bytes, per kernel in the PTX, for sm_90a."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    r = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"], capture_output=True, text=True)
    txt = r.stderr + r.stdout
    regs = re.findall(r"Used (\d+) registers", txt)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", txt)
    return regs, spills
