"""Offline sm_90 build of the team-split kernels (softmax and layernorm ``triton_split``) with and without
``PREFETCH``: ptxas's registers and spills a thread, and whether the next row's loads are issued before the
team's spin wait (the first acquire poll) in the PTX, which is what the prefetch is for.

Ran at commit 2ccee80, whose kernels had the ``PREFETCH`` switch (removed after the H200 timed it slower in
every wide-row case: docs/kernel-notes.md, session 14); check that commit out to run it again (there the
build step is in this file; here it is ``sm90_build.build_sm90``, shared with layernorm_classes_ptx.py). Output:
docs/experiments/results/split_prefetch_ptx.txt (triton 3.7.1's compiler and ptxas, sm_90a).

    TRITON_INTERPRET= python docs/experiments/split_prefetch_ptx.py > docs/experiments/results/split_prefetch_ptx.txt
"""

import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from sm90_build import build_sm90  # noqa: E402

from kernels import layernorm as ln  # noqa: E402
from kernels import softmax as sm  # noqa: E402


def build(fn, sig, const, warps, divisible):
    # the arguments a launch specialises as multiples of 16: pointers, N = 65536 and the row strides
    _, ptx, regs, spills = build_sm90(fn, sig, const, warps, divisible)
    lines = ptx.splitlines()
    # the poll: an atomic add of 0 with acquire semantics, which the compiler emits as an acquire load
    poll = next(i for i, line in enumerate(lines) if re.search(r"\.acquire\.", line))
    wide = [i for i, line in enumerate(lines) if re.search(r"ld\.global(\.\w+)*\.v4", line)]
    before = sum(i < poll for i in wide)
    return regs, spills, before, len(wide)


for dt in ("fp16", "fp32"):
    for chunk, warps in ((8192, 8), (4096, 4), (16384, 16)):
        for prefetch in (False, True):
            sig = {
                "out_ptr": f"*{dt}",
                "in_ptr": f"*{dt}",
                "stats_ptr": "*fp32",
                "arrived_ptr": "*i32",
                "n_rows": "i32",
                "n_cols": "i32",
                "split": "i32",
                "in_row_stride": "i32",
                "out_row_stride": "i32",
            }
            sig |= dict.fromkeys(("CHUNK", "SPLIT_BLOCK", "PHASE", "MAX_SPINS", "PREFETCH"), "constexpr")
            const = {"CHUNK": chunk, "SPLIT_BLOCK": 32, "PHASE": 0, "MAX_SPINS": 1 << 16, "PREFETCH": prefetch}
            regs, spills, before, wide = build(sm._split_softmax_kernel, sig, const, warps, (0, 1, 2, 3, 5, 7, 8))
            print(
                f"softmax {dt} CHUNK {chunk} {warps} warps prefetch={int(prefetch)}: registers {regs} spills "
                f"{spills}; 16-byte loads before the first poll {before} of {wide}"
            )
            if not hasattr(ln, "_layernorm_split_kernel"):
                continue
            sig = {
                "out_ptr": f"*{dt}",
                "x_ptr": f"*{dt}",
                "w_ptr": f"*{dt}",
                "b_ptr": f"*{dt}",
                "stats_ptr": "*fp32",
                "arrived_ptr": "*i32",
                "n_rows": "i32",
                "N": "i32",
                "split": "i32",
                "stride_xm": "i32",
                "stride_om": "i32",
                "eps": "fp32",
            }
            sig |= dict.fromkeys(("CHUNK", "SPLIT_BLOCK", "PHASE", "MAX_SPINS", "PREFETCH", "LOCAL_STATS"), "constexpr")
            const = {
                "CHUNK": chunk,
                "SPLIT_BLOCK": 32,
                "PHASE": 0,
                "MAX_SPINS": 1 << 16,
                "PREFETCH": prefetch,
                "LOCAL_STATS": False,
            }
            regs, spills, before, wide = build(
                ln._layernorm_split_kernel, sig, const, warps, (0, 1, 2, 3, 4, 5, 7, 9, 10)
            )
            print(
                f"layernorm {dt} CHUNK {chunk} {warps} warps prefetch={int(prefetch)}: registers {regs} spills "
                f"{spills}; 16-byte loads before the first poll {before} of {wide}"
            )
