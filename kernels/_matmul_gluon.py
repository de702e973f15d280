"""Persistent, warp-specialised matmul for Hopper in Gluon (``triton.experimental.gluon``): the ``gluon_persistent``
variant of ``kernels/matmul.py``, not a kernel of its own.

Why Gluon: cuBLAS's kernels on this card are warp-specialised and cooperative (a producer that only issues TMA loads,
two consumer warpgroups that only issue MMAs on one tile), where ``triton_persistent``'s warp specialisation is the
compiler's, which splits the tile as it chooses and keeps its own schedule (docs/kernel-notes.md, "Session 18" and
"Session 27"). Here the partitions are written out, as in CUTLASS's cooperative kernel:

    producer (one warp): for every tile of this program, for every K step, wait until the step's ring slot is
        empty, then TMA A's two [64, BLOCK_K] halves and B's [BLOCK_K, BLOCK_N] block into it (one mbarrier each)
    consumer warpgroup w (two of them, 4 warps each): rows w*64 .. w*64+63 of the [128, BLOCK_N] tile; for every K
        step, wait for the slot, issue the MMA asynchronously, wait until only it is in flight, and release the
        previous step's slot; after the last step, the tile in 16 bits to shared memory and out by TMA, whose
        completion is waited for only before that buffer is written again (the next tile's MMAs run meanwhile)

Programs walk the tiles ``pid, pid + programs, ...`` in ``GROUP_M`` order, like ``triton_persistent``. The producer
runs ahead into the next tile while the consumers finish this one, so the next tile's first slots are loaded during
this tile's epilogue. Edges need no masks: TMA zero-fills loads past M, N and K and clips stores.

Gluon kernels do not run on Triton's interpreter: on the CPU this module is built offline for sm_90a by the tests
(tests/test_matmul_gluon.py); it runs on a GPU of compute capability 9.x, checked by feature.
"""

from __future__ import annotations

import torch

from kernelscope.gluon import hopper_reason

try:  # Gluon and its Hopper ops, by feature (not by Triton's version string)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    HAS_GLUON_HOPPER = True
except ImportError:  # pragma: no cover - a Triton without Gluon's Hopper module
    HAS_GLUON_HOPPER = False

#: rows of a tile: two consumer warpgroups of 64 (a wgmma instruction is 64 rows a warpgroup)
BLOCK_M = 128
#: rows of A a consumer warpgroup multiplies
HALF_M = BLOCK_M // 2
#: the config space: tile width, K step, ring slots. Shared memory a program (16-bit): slots x (128 x BLOCK_K +
#: BLOCK_K x BLOCK_N) x 2 B plus the two consumers' [64, BLOCK_N] output buffers: 128 x 256 x 64 with 3 slots
#: 144 + 64 KB; 128 x 128 x 64 with 4 and 5 slots 128 + 32 and 160 + 32 KB. Each builds offline for sm_90a without
#: spills on both stacks (tests/test_matmul_gluon.py). The default, 128 x 256 with 3 slots, was the fastest of the
#: three in every sweep from 4096 up on an H100, the 128 x 128 ones 4-32 % slower; 128 x 128 with 4 slots at 256^3
#: (docs/kernel-notes.md, "Session 27").
CONFIGS = [
    dict(BLOCK_N=bn, BLOCK_K=bk, STAGES=st, GROUP_M=8)
    for bn, bk, st in [
        (256, 64, 3),
        (128, 64, 4),
        (128, 64, 5),
    ]
]
DEFAULT = 0
#: registers a consumer thread takes (``setmaxnreg``): its [64, 256] fp32 accumulator is 128 a thread; the producer
#: gives back all but 24 (12 warps x 168 registers fill the register file: FlashAttention-3's split)
CONSUMER_REGS = 232


def _gluon_jit(fn):
    return gluon.jit(fn) if HAS_GLUON_HOPPER else fn


_constexpr = gl.constexpr if HAS_GLUON_HOPPER else object


def feature_reason() -> str | None:
    """Why gluon_persistent cannot run on this Triton and device, or None (by feature, not version)."""
    return hopper_reason("gluon_persistent", HAS_GLUON_HOPPER, "warpgroup MMA, TMA, mbarriers, warp specialisation")


@_gluon_jit
def _tile(tile_id, num_pid_m, num_pid_n, GROUP_M: _constexpr):
    """(pid_m, pid_n) of a linear tile id in GROUP_M order (``kernels/matmul.py``'s ``_tile_coordinates``)."""
    group = GROUP_M * num_pid_n
    first_m = (tile_id // group) * GROUP_M
    size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % group) % size_m, (tile_id % group) // size_m


@_gluon_jit
def _producer(descs, bufs, M, N, K, STEPS_SHORT: _constexpr, GROUP_M: _constexpr, B_T: _constexpr):
    """The load partition (one warp): each K step of each of this program's tiles into ring slot ``step % STAGES``
    once both consumers have released it (its ``empty`` barrier, two arrivals); the step's three TMA copies complete
    its ``full`` barrier."""
    a_desc, b_desc, c_desc = descs
    a_bufs, b_bufs, c_bufs, full, empty = bufs
    STAGES: gl.constexpr = full.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    step_bytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    num_pid_m = gl.cdiv(M, 2 * a_desc.block_type.shape[0])
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K) - STEPS_SHORT
    it = 0
    for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * (2 * a_desc.block_type.shape[0])
        off_n = pid_n * BLOCK_N
        for ks in range(k_steps):
            slot = it % STAGES
            # a fresh mbarrier counts as having completed the phase before phase 0: the first pass does not wait
            mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(full.index(slot), step_bytes)
            k = ks * BLOCK_K
            tma.async_copy_global_to_shared(a_desc, [off_m, k], full.index(slot), a_bufs.index(2 * slot))
            tma.async_copy_global_to_shared(
                a_desc, [off_m + a_desc.block_type.shape[0], k], full.index(slot), a_bufs.index(2 * slot + 1)
            )
            if B_T:
                tma.async_copy_global_to_shared(b_desc, [off_n, k], full.index(slot), b_bufs.index(slot))
            else:
                tma.async_copy_global_to_shared(b_desc, [k, off_n], full.index(slot), b_bufs.index(slot))
            it += 1


@_gluon_jit
def _consumer(descs, bufs, M, N, K, WG: _constexpr, STEPS_SHORT: _constexpr, GROUP_M: _constexpr, B_T: _constexpr):
    """One consumer warpgroup: rows ``WG * 64 ..`` of every tile, one asynchronous MMA in flight at a time beside the
    next step's wait, each slot released as soon as its MMA has completed; the tile out through shared memory and
    TMA."""
    a_desc, b_desc, c_desc = descs
    a_bufs, b_bufs, c_bufs, full, empty = bufs
    STAGES: gl.constexpr = full.shape[0]
    HALF: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
    dtype: gl.constexpr = c_desc.dtype
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    zero = gl.zeros([HALF, BLOCK_N], gl.float32, acc_layout)
    c_smem = c_bufs.index(WG)
    num_pid_m = gl.cdiv(M, 2 * HALF)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K) - STEPS_SHORT
    it = 0
    for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = zero
        prev = 0
        for ks in range(k_steps):
            slot = it % STAGES
            mbarrier.wait(full.index(slot), (it // STAGES) & 1)
            a = a_bufs.index(2 * slot + WG)
            b = b_bufs.index(slot)
            if B_T:
                b = b.permute((1, 0))
            tok = warpgroup_mma(a, b, acc, use_acc=ks > 0, is_async=True)
            acc, _, _ = warpgroup_mma_wait(1, deps=(tok, a, b))
            # the previous step's MMA has completed: both warpgroups' arrivals free its slot
            mbarrier.arrive(empty.index(prev), count=1, pred=ks > 0)
            prev = slot
            it += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(prev), count=1)
        tma.store_wait(0)  # this warpgroup's previous tile has left c_smem
        c_smem.store(acc.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [pid_m * 2 * HALF + WG * HALF, pid_n * BLOCK_N], c_smem)
    tma.store_wait(0)


@_gluon_jit
def _gluon_matmul_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    STAGES: _constexpr,
    GROUP_M: _constexpr,
    B_T: _constexpr,
    STEPS_SHORT: _constexpr,
    CONSUMER_REGS: _constexpr,
    num_warps: _constexpr,
):
    """C = A @ B: the ring, its barriers and the output buffers, then the three partitions (consumer warpgroup 0 is
    the default partition). ``B_T``: B is given as its [N, K] transpose (column-major B, nn.Linear's weight).
    ``STEPS_SHORT`` (negative control only): that many K steps of every tile left out."""
    gl.static_assert(num_warps == 4, "the default partition is one consumer warpgroup")
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [2 * STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival from each consumer warpgroup
    descs = (a_desc, b_desc, c_desc)
    bufs = (a_bufs, b_bufs, c_bufs, full, empty)
    gl.warp_specialize(
        [
            (_consumer, (descs, bufs, M, N, K, 0, STEPS_SHORT, GROUP_M, B_T)),
            (_consumer, (descs, bufs, M, N, K, 1, STEPS_SHORT, GROUP_M, B_T)),
            (_producer, (descs, bufs, M, N, K, STEPS_SHORT, GROUP_M, B_T)),
        ],
        [4, 1],
        [CONSUMER_REGS, 24],
    )


def _gl_dtype(dtype: torch.dtype):
    return {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}[dtype]


def descriptors(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config) -> tuple:
    """TMA descriptors of A ([64, BLOCK_K] boxes, one a consumer warpgroup), B ([BLOCK_K, BLOCK_N] boxes, or
    [BLOCK_N, BLOCK_K] of its transpose where B is column-major) and C ([64, BLOCK_N] boxes); and whether B is
    read through its transpose."""
    bn, bk, gdtype = int(config["BLOCK_N"]), int(config["BLOCK_K"]), _gl_dtype(a.dtype)

    def desc(t: torch.Tensor, box: list[int]) -> TensorDescriptor:
        return TensorDescriptor.from_tensor(t, box, gl.NVMMASharedLayout.get_default_for(box, gdtype))

    b_t = b.stride(0) == 1 and b.stride(1) != 1
    b_desc = desc(b.T, [bn, bk]) if b_t else desc(b, [bk, bn])
    return desc(a, [HALF_M, bk]), b_desc, desc(out, [HALF_M, bn]), b_t


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config, grid: tuple[int], *, steps_short: int = 0):
    """The closure that runs the kernel on ``grid`` programs (at most one an SM: a program takes up to 213 KB of
    shared memory) on 16-bit A [M, K] (row-major) and B [K, N] (row- or column-major) into row-major ``out``.
    Descriptors are built here, once, so the timed call launches and nothing else. ``steps_short`` (negative control
    only): K steps of every tile left out."""
    M, K = a.shape
    N = b.shape[1]
    a_desc, b_desc, c_desc, b_t = descriptors(a, b, out, config)
    params = dict(
        STAGES=int(config["STAGES"]),
        GROUP_M=int(config["GROUP_M"]),
        B_T=b_t,
        STEPS_SHORT=steps_short,
        CONSUMER_REGS=int(config.get("CONSUMER_REGS", CONSUMER_REGS)),
        # 12 warps (the producer's warp rounds up to a warpgroup) x 168 registers fill the register file
        num_warps=4,
        maxnreg=168,
    )

    def run() -> torch.Tensor:
        _gluon_matmul_kernel[grid](a_desc, b_desc, c_desc, M, N, K, **params)
        return out

    return run
