"""Offline sm_90 build of layernorm's ``triton_online`` at the configs its wide-row sweep offers: ptxas's
registers and spills a thread, and the 16-byte loads and stores in the PTX (x, weight and bias in pass 2, x in
pass 1). The configs' bound of 32 fp32 values a thread (``ONLINE_VALUES_A_THREAD``) is meant to keep pass 2's
x, weight and bias in registers with two programs an SM; this checks it before any GPU time is spent.

Output: docs/experiments/results/layernorm_online_ptx.txt (the lock's triton 3.7.1 compiler and ptxas, sm_90a).

    cd docs/experiments && TRITON_INTERPRET= python layernorm_online_ptx.py > results/layernorm_online_ptx.txt
"""

import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from sm90_build import build_sm90  # noqa: E402

from kernels import layernorm as ln  # noqa: E402

SIG = {f"{p}_ptr": "*{dt}" for p in ("out", "x", "w", "b")}
SIG |= dict.fromkeys(("n_rows", "N", "stride_xm", "stride_om"), "i32") | {"eps": "fp32"}
SIG |= dict.fromkeys(("BLOCK_N", "BETWEEN", "L2_HINTS", "NUM_STAGES"), "constexpr")
# pointers, N = 65536 and both row strides are multiples of 16, as a launch on the H200 specialises them
DIVISIBLE = (0, 1, 2, 3, 5, 6, 7)

configs = ln._online_configs({"M": 1024, "N": 65536}, None)
for dt in ("fp16", "fp32"):
    for c in configs:
        sig = {k: v.format(dt=dt) for k, v in SIG.items()}
        const = {"BLOCK_N": c["BLOCK_N"], "BETWEEN": True, "L2_HINTS": bool(c["l2_hints"])}
        const["NUM_STAGES"] = c.get("num_stages", 1)
        _, ptx, regs, spills = build_sm90(ln._layernorm_online_kernel, sig, const, c["num_warps"], DIVISIBLE)
        loads = len(re.findall(r"ld\.global\S*\.v4", ptx))
        stores = len(re.findall(r"st\.global\S*\.v4", ptx))
        cp_async = len(re.findall(r"cp\.async", ptx))
        where = f"{c['num_warps']} warps ({c['programs_per_sm']} an SM) stages {const['NUM_STAGES']}"
        print(
            f"{dt} BLOCK_N {c['BLOCK_N']} {where} hints {c['l2_hints']}: registers {regs} spills {spills}; "
            f"16-byte loads {loads} stores {stores} cp.async {cp_async}"
        )
