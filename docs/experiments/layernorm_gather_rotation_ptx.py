"""Offline sm_90 build of an in-register alternative to triton_staged's staging launch: each row program would load
weight (and bias) at 16-byte-aligned addresses as ``[BLOCK_N / VEC, VEC]`` tiles, the tile and the next one, and
rotate each thread's ``VEC`` values by the row's head (a runtime 0..VEC-1) with ``tl.gather`` along the last axis,
so that no second launch and no lane-by-lane load is needed. Is the gather cheap (selects among a thread's own
registers), or does it go through shared memory? Counts of global and shared memory instructions, shuffles and
selects in the PTX, and ptxas's registers, for the 4096-wide body of N = 4097 in 16 bits at 4 warps.

Output: docs/experiments/results/layernorm_gather_rotation_ptx.txt (triton 3.7.1's compiler and ptxas, sm_90a).

    cd docs/experiments && TRITON_INTERPRET= python layernorm_gather_rotation_ptx.py \
        > results/layernorm_gather_rotation_ptx.txt
"""

import collections
import os
import re

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from sm90_build import build_sm90  # noqa: E402

OPS = re.compile(r"\b((?:ld|st)\.(?:global|shared)(?:\.\w+)*|shfl(?:\.\w+)*|selp(?:\.\w+)*|bar\.sync)")


@triton.jit
def rotate_kernel(out_ptr, w_ptr, head, NV: tl.constexpr, VEC: tl.constexpr):
    i = tl.arange(0, NV)[:, None]
    j = tl.arange(0, VEC)[None, :]
    tile = tl.load(w_ptr + i * VEC + j)
    following = tl.load(w_ptr + VEC + i * VEC + j)
    source = tl.broadcast_to((j + head) % VEC, (NV, VEC))
    rotated = tl.where(j + head < VEC, tl.gather(tile, source, axis=1), tl.gather(following, source, axis=1))
    tl.store(out_ptr + i * VEC + j, rotated)


if __name__ == "__main__":
    sig = {"out_ptr": "*fp16", "w_ptr": "*fp16", "head": "i32", "NV": "constexpr", "VEC": "constexpr"}
    _, ptx, regs, spills = build_sm90(rotate_kernel, sig, {"NV": 512, "VEC": 8}, 4, [0, 1])
    print(f"triton {triton.__version__}, sm_90a, 4 warps, [512, 8] fp16 tiles (N = 4097's body)")
    print(f"registers {regs[0]}, spill stores/loads {spills[0][0]}/{spills[0][1]} bytes")
    for op, n in sorted(collections.Counter(OPS.findall(ptx)).items()):
        print(f"{op:24s} {n}")
