"""Offline sm_90 build of softmax ``triton_split`` with segments of several blocks (``BLOCKS > 1``: two passes
over the segment, the second from L2; ``OVERLAP``: the next row published before the wait) beside the register
path (``BLOCKS = 1``): ptxas's registers and spills a
thread, and the eviction hints of the 16-byte loads and stores (pass 1 ``evict_last``, pass 2 ``evict_first``),
before any GPU time is spent on the configs. Output: docs/experiments/results/split_segments_ptx.txt (triton
3.7.1's compiler and ptxas, sm_90a).

    TRITON_INTERPRET= python docs/experiments/split_segments_ptx.py > docs/experiments/results/split_segments_ptx.txt
"""

import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from sm90_build import build_sm90  # noqa: E402

from kernels import softmax as sm  # noqa: E402

SIG = {
    "out_ptr": "*{dt}",
    "in_ptr": "*{dt}",
    "stats_ptr": "*fp32",
    "arrived_ptr": "*i32",
    "n_rows": "i32",
    "n_cols": "i32",
    "split": "i32",
    "in_row_stride": "i32",
    "out_row_stride": "i32",
}
SIG |= dict.fromkeys(("CHUNK", "SPLIT_BLOCK", "PHASE", "MAX_SPINS", "BLOCKS", "OVERLAP", "LOCAL_STATS"), "constexpr")

for dt in ("fp16", "fp32"):
    for chunk, warps, blocks, overlap in (
        (8192, 8, 1, 0),
        (8192, 8, 2, 0),
        (8192, 8, 2, 1),
        (16384, 8, 2, 1),
        (4096, 4, 4, 1),
        (8192, 8, 4, 1),
    ):
        sig = {k: v.format(dt=dt) for k, v in SIG.items()}
        const = {
            "CHUNK": chunk,
            "SPLIT_BLOCK": 16,
            "PHASE": 0,
            "MAX_SPINS": 1 << 16,
            "BLOCKS": blocks,
            "OVERLAP": bool(overlap),
            "LOCAL_STATS": False,
        }
        # pointers, N = 262144 and the row strides are multiples of 16
        _, ptx, regs, spills = build_sm90(sm._split_softmax_kernel, sig, const, warps, (0, 1, 2, 3, 5, 7, 8))
        hints = {
            kind: len(re.findall(rf"{op}\.global(\.\w+)*\.L1::{hint}\S*\.v4", ptx))
            for kind, op, hint in (
                ("ld evict_last", "ld", "evict_last"),
                ("ld evict_first", "ld", "evict_first"),
                ("st evict_first", "st", "evict_first"),
            )
        }
        wide = len(re.findall(r"ld\.global\S*\.v4", ptx))
        print(
            f"softmax {dt} CHUNK {chunk} {warps} warps BLOCKS {blocks} overlap {overlap}: "
            f"registers {regs} spills {spills}; "
            f"16-byte loads {wide}, {hints}"
        )
