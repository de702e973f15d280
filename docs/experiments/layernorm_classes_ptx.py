"""Offline sm_90 build of layernorm's ``triton_persistent`` (``_layernorm_classes_kernel``) at every num_warps of its
sweep, for N = 4097 and N = 2049 in 16 bits and fp32, beside ``triton_row`` at aligned=1 (N = 4097): ptxas's
registers and spills a thread, the programs an SM that leaves resident (as ``kernelscope.teams.resident_programs``
counts them), and the global-memory instructions in the PTX (16-byte ``v4`` loads and stores of the body,
lane-by-lane ``b16``/``b32`` ones).

Output: docs/experiments/results/layernorm_classes_ptx.txt (triton 3.7.1's compiler and ptxas, sm_90a). At commit
f2d60bc the sweep also had ``num_stages`` (a ``tl.range`` prefetch of the next row through ``cp.async`` copies),
removed after the H200 timed it slower in every odd-N case; that commit's version of this script and its output
are in git history and results/layernorm_classes_ptx-f2d60bc.txt.

    cd docs/experiments && TRITON_INTERPRET= python layernorm_classes_ptx.py > results/layernorm_classes_ptx.txt
"""

import collections
import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
from sm90_build import build_sm90  # noqa: E402

from kernels import layernorm as ln  # noqa: E402
from kernelscope import teams  # noqa: E402

OPS = re.compile(r"\b(ld\.global(?:\.\w+)*|st\.global(?:\.\w+)*|cp\.async(?:\.\w+)*)")


def build(fn, sig, const, warps, divisible):
    k, ptx, regs, spills = build_sm90(fn, sig, const, warps, divisible)
    ops = collections.Counter(m.group(1).replace(".L1::evict_last", "") for m in OPS.finditer(ptx))
    return regs, spills, dict(sorted(ops.items())), k.metadata.shared


print(f"triton {triton.__version__}, sm_90a")
for dt, vec in (("fp16", 8), ("bf16", 8), ("fp32", 4)):
    sig = {f"{p}_ptr": f"*{dt}" for p in ("out", "x", "w", "b")}
    sig |= dict.fromkeys(("n_rows", "N", "period", "stride_xm", "stride_om"), "i32") | {"eps": "fp32"}
    sig |= dict.fromkeys(("BLOCK_N", "VEC", "CLASS_ZERO_AFFINE"), "constexpr")
    for n in (4097, 2049):
        block = ln.body_block(n, vec)
        for cfg in ln.CLASSES_SPACE:
            const = {"BLOCK_N": block, "VEC": vec, "CLASS_ZERO_AFFINE": False}
            regs, spills, ops, shared = build(ln._layernorm_classes_kernel, sig, const, cfg["num_warps"], (0, 1, 2, 3))
            limits = {
                "num_sms": 1,
                "max_threads_per_sm": 2048,
                "regs_per_sm": 65536,
                "max_shared_mem_per_block": 232448,
            }
            per_sm = teams.resident_programs(int(regs[0]), cfg["num_warps"], shared, limits)
            print(
                f"{dt} N={n} triton_persistent {cfg['num_warps']} warps: registers {regs} spills {spills} "
                f"shared {shared} B, {per_sm} programs an SM; {ops}"
            )
    sig = {f"{p}_ptr": f"*{dt}" for p in ("out", "x", "w", "b")}
    sig |= {"N": "i32", "stride_xm": "i32", "stride_om": "i32", "eps": "fp32"}
    sig |= dict.fromkeys(("BLOCK_N", "ALIGNED", "VEC", "KEEP_TAIL"), "constexpr")
    for warps in (4, 8, 16):
        const = {"BLOCK_N": ln.body_block(4097, vec), "ALIGNED": True, "VEC": vec, "KEEP_TAIL": True}
        regs, spills, ops, shared = build(ln._layernorm_row_kernel, sig, const, warps, (0, 1, 2, 3))
        print(
            f"{dt} N=4097 triton_row aligned=1 {warps} warps: registers {regs} spills {spills} shared {shared} B; {ops}"
        )
