"""Flash-attention forward for Hopper in Gluon (``triton.experimental.gluon``), after FlashAttention-3's
intra-warpgroup pipelining; a part of ``kernels/attention.py`` (``gluon_flash``), not a kernel of its own.

Why Gluon: ``triton.language`` keeps a Hopper MMA (``wgmma``) in flight only where its result is the next dot's
accumulator, so the softmax of one key block never runs beside an MMA (docs/kernel-notes.md, session 21, measured
offline). Gluon exposes the MMA as an asynchronous op with an explicit wait, so the loop can be ordered as FA3's:

    S_j  = Q K_jᵀ          issued, not waited for
    O   += P_{j-1} V_{j-1}  issued behind it
    wait until one MMA group is left in flight  -> S_j is ready, the PV MMA still runs
    softmax(S_j) -> P_j, alpha_j   (beside the PV MMA)
    wait for the PV MMA; O *= alpha_j

K and V tiles come through TMA into rings of ``STAGES`` shared-memory slots, each slot with its own mbarrier;
a K slot is refilled as soon as its QKᵀ MMA is waited for, a V slot as soon as its PV MMA is. Descriptors are
three-dimensional, [B·H, S, D] with [1, BLOCK, D] boxes, so a tile never reads another head: rows past S are
zero-filled by the TMA unit and their scores masked to -inf.

Gluon kernels do not run on Triton's interpreter: on the CPU this module is built offline for sm_90a by the tests
(tests/test_attention_gluon.py), and run only on a GPU of compute capability 9.x, checked by feature.
"""

from __future__ import annotations

import math

import torch

try:  # Gluon and its Hopper ops, by feature (not by Triton's version string)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    HAS_GLUON_HOPPER = True
except ImportError:  # pragma: no cover - a Triton without Gluon's Hopper module
    HAS_GLUON_HOPPER = False

LOG2E = math.log2(math.e)

#: the GPU config space. 128-row tiles run two warpgroups (8 warps) of 64 rows, 64-row tiles one; K and V rings of
#: 2 or 3 slots. Shared memory a program (D = 128, 16-bit): 128 x 128 x 2 slots 164 KB and x 3 slots 229 KB,
#: 64 x 128 x 2 slots 147 KB, 128 x 64 x 3 slots 131 KB, 64 x 64 x 3 slots 115 KB (one program an SM each);
#: 128 x 64 x 2 slots 98 KB and 64 x 64 x 2 slots 49 KB (two and up to three programs an SM). Built offline for
#: each (docs/experiments/attention_gluon_build.py): no config spills.
CONFIGS = [
    dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, STAGES=st)
    for bm, bn, w, st in [
        (128, 128, 8, 2),
        (128, 128, 8, 3),
        (128, 64, 8, 3),
        (64, 128, 4, 2),
        (64, 64, 4, 3),
        (128, 64, 8, 2),
        (64, 64, 4, 2),
    ]
] + [
    # the warp-specialised kernel: a one-warp producer and two consumer warpgroups of 64 rows (num_warps is the
    # default partition's: one consumer); 128 x 128 with 3 slots needs 246 KB, past the 227 KB a block may have
    dict(BLOCK_M=128, BLOCK_N=bn, num_warps=4, STAGES=st, WARP_SPECIALIZE=1)
    for bn, st in [(128, 2), (64, 2), (64, 3)]
]


def _gluon_jit(fn):
    return gluon.jit(fn) if HAS_GLUON_HOPPER else fn


if HAS_GLUON_HOPPER:
    _constexpr = gl.constexpr
else:  # pragma: no cover
    _constexpr = object


@_gluon_jit
def _softmax_block(
    s,
    m_i,
    l_i,
    qk_scale,
    offs_m,
    start_m,
    n0,
    seq_len,
    s_layout: _constexpr,
    BLOCK_N: _constexpr,
    CAUSAL: _constexpr,
):
    """One key block's online-softmax update from its raw scores ``s``: (p, alpha, m, l), in scaled log2 units."""
    # masking costs a compare and a select per score, so only the blocks that need it pay: the key tail, and
    # under CAUSAL the blocks that reach past the program's first query row
    needs_mask = n0 + BLOCK_N > seq_len
    if CAUSAL:
        needs_mask = needs_mask | (n0 + BLOCK_N > start_m + 1)
    if needs_mask:
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        visible = gl.expand_dims(offs_n < seq_len, 0)
        if CAUSAL:
            visible = visible & (gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0))
        s = gl.where(visible, s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    # scale folded into one FMA per score: s * qk_scale - m
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_new


@_gluon_jit
def _gluon_attention_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_ptr,
    qk_scale,
    seq_len,
    HEAD_DIM: _constexpr,
    BLOCK_M: _constexpr,
    BLOCK_N: _constexpr,
    STAGES: _constexpr,
    CAUSAL: _constexpr,
    RESCALE_ACC: _constexpr,
    num_warps: _constexpr,
):
    dtype: gl.constexpr = q_desc.dtype
    # query blocks of one head are neighbours in launch order, so the programs on the SMs at once share a few heads'
    # K and V in L2 (with the heads on the fast axis, a wave of programs streams ~64 heads' K and V from DRAM:
    # 76 % DRAM throughput, measured); under CAUSAL each head's heaviest blocks go first
    bh = gl.program_id(1)
    pid_m = gl.num_programs(0) - 1 - gl.program_id(0) if CAUSAL else gl.program_id(0)
    start_m = pid_m * BLOCK_M

    # one warpgroup MMA per 64 rows: [num_warps, 1] warps down the rows, the instruction as wide as the tile
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    # P goes to the PV MMA from registers, in the accumulator's own distribution (no shared-memory round trip)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    tile_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    if CAUSAL:
        hi = gl.minimum(seq_len, start_m + BLOCK_M)
    else:
        hi = seq_len
    n_blocks = gl.cdiv(hi, BLOCK_N)
    tile_bytes: gl.constexpr = BLOCK_N * HEAD_DIM * 2

    mbarrier.expect(q_bar, BLOCK_M * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(q_desc, [bh, start_m, 0], q_bar, q_smem.reshape([1, BLOCK_M, HEAD_DIM]))
    for i in gl.static_range(STAGES):
        mbarrier.expect(k_bars.index(i), tile_bytes, pred=i < n_blocks)
        tma.async_copy_global_to_shared(
            k_desc,
            [bh, i * BLOCK_N, 0],
            k_bars.index(i),
            k_smem.index(i).reshape([1, BLOCK_N, HEAD_DIM]),
            pred=i < n_blocks,
        )
        mbarrier.expect(v_bars.index(i), tile_bytes, pred=i < n_blocks)
        tma.async_copy_global_to_shared(
            v_desc,
            [bh, i * BLOCK_N, 0],
            v_bars.index(i),
            v_smem.index(i).reshape([1, BLOCK_N, HEAD_DIM]),
            pred=i < n_blocks,
        )

    offs_m = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([BLOCK_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)

    # block 0: its scores alone (nothing to overlap yet)
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s_tok = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s, _, _ = warpgroup_mma_wait(0, deps=(s_tok, q_smem, k_smem.index(0)))
    if n_blocks > STAGES:  # the K slot is free once its MMA is done
        mbarrier.expect(k_bars.index(0), tile_bytes)
        tma.async_copy_global_to_shared(
            k_desc, [bh, STAGES * BLOCK_N, 0], k_bars.index(0), k_smem.index(0).reshape([1, BLOCK_N, HEAD_DIM])
        )
    p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, qk_scale, offs_m, start_m, 0, seq_len, s_layout, BLOCK_N, CAUSAL)
    p_prev = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n_blocks):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, v_smem.index(prev), acc, is_async=True)
        # one group left in flight: this block's scores are done, the previous block's PV MMA still runs
        s, _, _ = warpgroup_mma_wait(1, deps=(s_tok, q_smem, k_smem.index(slot)))
        if j + STAGES < n_blocks:
            mbarrier.expect(k_bars.index(slot), tile_bytes)
            tma.async_copy_global_to_shared(
                k_desc,
                [bh, (j + STAGES) * BLOCK_N, 0],
                k_bars.index(slot),
                k_smem.index(slot).reshape([1, BLOCK_N, HEAD_DIM]),
            )
        p, alpha, m_i, l_i = _softmax_block(
            s, m_i, l_i, qk_scale, offs_m, start_m, j * BLOCK_N, seq_len, s_layout, BLOCK_N, CAUSAL
        )
        p_cur = gl.convert_layout(p.to(dtype), p_layout)
        acc, _ = warpgroup_mma_wait(0, deps=(acc_tok, v_smem.index(prev)))
        if j - 1 + STAGES < n_blocks:  # the V slot is free once its PV MMA is done
            mbarrier.expect(v_bars.index(prev), tile_bytes)
            tma.async_copy_global_to_shared(
                v_desc,
                [bh, (j - 1 + STAGES) * BLOCK_N, 0],
                v_bars.index(prev),
                v_smem.index(prev).reshape([1, BLOCK_N, HEAD_DIM]),
            )
        if RESCALE_ACC:
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p_prev = p_cur

    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_bars.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_prev, v_smem.index(last), acc, is_async=True)
    acc, _ = warpgroup_mma_wait(0, deps=(acc_tok, v_smem.index(last)))

    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))

    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    out = (acc / gl.expand_dims(l_o, 1)).to(dtype)
    # 16-byte stores, rows past S dropped (the tile may hang over the head's end)
    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    out = gl.convert_layout(out, store_layout)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, store_layout))
    offsets = (bh * seq_len + gl.expand_dims(rows, 1)).to(gl.int64) * HEAD_DIM + gl.expand_dims(cols, 0)
    gl.store(o_ptr + offsets, out, mask=gl.expand_dims(rows < seq_len, 1))


@_gluon_jit
def _ws_producer(
    descs,
    bufs,
    bh,
    start_m,
    n_blocks,
    BLOCK_M: _constexpr,
    BLOCK_N: _constexpr,
    HEAD_DIM: _constexpr,
    STAGES: _constexpr,
):
    """The load partition (one warp): Q once, then K_j and V_j into slot j % STAGES as soon as both consumers have
    released the slot (its ``empty`` barrier, two arrivals); each tile's arrival completes its ``full`` barrier."""
    q_desc, k_desc, v_desc = descs
    q_smem, k_smem, v_smem, q_bar, k_full, v_full, k_empty, v_empty = bufs
    half: gl.constexpr = BLOCK_M // 2
    mbarrier.expect(q_bar, BLOCK_M * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(q_desc, [bh, start_m, 0], q_bar, q_smem.index(0).reshape([1, half, HEAD_DIM]))
    tma.async_copy_global_to_shared(
        q_desc, [bh, start_m + half, 0], q_bar, q_smem.index(1).reshape([1, half, HEAD_DIM])
    )
    tile_bytes: gl.constexpr = BLOCK_N * HEAD_DIM * 2
    for j in range(n_blocks):
        slot = j % STAGES
        # a fresh mbarrier counts as having completed the phase before phase 0: the first pass does not wait
        empty_phase = ((j // STAGES) & 1) ^ 1
        mbarrier.wait(k_empty.index(slot), empty_phase)
        mbarrier.expect(k_full.index(slot), tile_bytes)
        tma.async_copy_global_to_shared(
            k_desc, [bh, j * BLOCK_N, 0], k_full.index(slot), k_smem.index(slot).reshape([1, BLOCK_N, HEAD_DIM])
        )
        mbarrier.wait(v_empty.index(slot), empty_phase)
        mbarrier.expect(v_full.index(slot), tile_bytes)
        tma.async_copy_global_to_shared(
            v_desc, [bh, j * BLOCK_N, 0], v_full.index(slot), v_smem.index(slot).reshape([1, BLOCK_N, HEAD_DIM])
        )


@_gluon_jit
def _ws_consumer(
    bufs,
    work,
    WG: _constexpr,
    BLOCK_M: _constexpr,
    BLOCK_N: _constexpr,
    HEAD_DIM: _constexpr,
    STAGES: _constexpr,
    CAUSAL: _constexpr,
    RESCALE_ACC: _constexpr,
):
    """One consumer warpgroup: 64 query rows (half ``WG`` of the tile) through every key block the producer loads,
    in the order of the unspecialised kernel (block j's softmax beside block j-1's PV MMA), releasing each K and V
    slot as soon as its MMA is waited for. ``bufs``: the shared buffers and barriers; ``work``: the output, the scale
    and this program's coordinates (one tuple each, as the kernel passes them to both consumers)."""
    q_smem, k_smem, v_smem, q_bar, k_full, v_full, k_empty, v_empty = bufs
    o_ptr, qk_scale, seq_len, bh, start_m, n_blocks = work
    half: gl.constexpr = BLOCK_M // 2
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row0 = start_m + WG * half
    q = q_smem.index(WG)
    offs_m = row0 + gl.arange(0, half, layout=gl.SliceLayout(1, s_layout))
    s_zero = gl.zeros([half, BLOCK_N], gl.float32, s_layout)
    m_i = gl.full([half], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([half], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([half, HEAD_DIM], gl.float32, o_layout)

    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_full.index(0), 0)
    s_tok = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s, _, _ = warpgroup_mma_wait(0, deps=(s_tok, q, k_smem.index(0)))
    mbarrier.arrive(k_empty.index(0), count=1)
    p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, qk_scale, offs_m, row0, 0, seq_len, s_layout, BLOCK_N, CAUSAL)
    p_prev = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n_blocks):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_full.index(slot), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_full.index(prev), ((j - 1) // STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, v_smem.index(prev), acc, is_async=True)
        s, _, _ = warpgroup_mma_wait(1, deps=(s_tok, q, k_smem.index(slot)))
        mbarrier.arrive(k_empty.index(slot), count=1)
        p, alpha, m_i, l_i = _softmax_block(
            s, m_i, l_i, qk_scale, offs_m, row0, j * BLOCK_N, seq_len, s_layout, BLOCK_N, CAUSAL
        )
        p_cur = gl.convert_layout(p.to(dtype), p_layout)
        acc, _ = warpgroup_mma_wait(0, deps=(acc_tok, v_smem.index(prev)))
        mbarrier.arrive(v_empty.index(prev), count=1)
        if RESCALE_ACC:
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p_prev = p_cur

    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_full.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_prev, v_smem.index(last), acc, is_async=True)
    acc, _ = warpgroup_mma_wait(0, deps=(acc_tok, v_smem.index(last)))
    mbarrier.arrive(v_empty.index(last), count=1)

    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    out = (acc / gl.expand_dims(l_o, 1)).to(dtype)
    store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    out = gl.convert_layout(out, store_layout)
    rows = row0 + gl.arange(0, half, layout=gl.SliceLayout(1, store_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, store_layout))
    offsets = (bh * seq_len + gl.expand_dims(rows, 1)).to(gl.int64) * HEAD_DIM + gl.expand_dims(cols, 0)
    gl.store(o_ptr + offsets, out, mask=gl.expand_dims(rows < seq_len, 1))


@_gluon_jit
def _gluon_attention_ws_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_ptr,
    qk_scale,
    seq_len,
    HEAD_DIM: _constexpr,
    BLOCK_M: _constexpr,
    BLOCK_N: _constexpr,
    STAGES: _constexpr,
    CAUSAL: _constexpr,
    RESCALE_ACC: _constexpr,
    CONSUMER_REGS: _constexpr,
    num_warps: _constexpr,
):
    """FlashAttention-3's partitions: a one-warp TMA producer and two consumer warpgroups of 64 query rows each
    (the default partition and a worker), which share the K and V slots; no CTA-wide barrier in the key loop, so
    the two warpgroups' MMAs and softmaxes interleave freely (no explicit ping-pong)."""
    gl.static_assert(num_warps == 4, "the default partition is one consumer warpgroup")
    bh = gl.program_id(1)
    pid_m = gl.num_programs(0) - 1 - gl.program_id(0) if CAUSAL else gl.program_id(0)
    start_m = pid_m * BLOCK_M
    dtype: gl.constexpr = q_desc.dtype
    half: gl.constexpr = BLOCK_M // 2
    tile_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([half, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [2, half, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_full.index(i), count=1)
        mbarrier.init(v_full.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # one arrival from each consumer warpgroup
        mbarrier.init(v_empty.index(i), count=2)
    if CAUSAL:
        hi = gl.minimum(seq_len, start_m + BLOCK_M)
    else:
        hi = seq_len
    n_blocks = gl.cdiv(hi, BLOCK_N)
    bufs = (q_smem, k_smem, v_smem, q_bar, k_full, v_full, k_empty, v_empty)
    work = (o_ptr, qk_scale, seq_len, bh, start_m, n_blocks)
    gl.warp_specialize(
        [
            (_ws_consumer, (bufs, work, 0, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, RESCALE_ACC)),
            (_ws_consumer, (bufs, work, 1, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, RESCALE_ACC)),
            (_ws_producer, ((q_desc, k_desc, v_desc), bufs, bh, start_m, n_blocks, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES)),
        ],
        [4, 1],
        [CONSUMER_REGS, 24],
    )


def descriptor(t: torch.Tensor, block: int) -> TensorDescriptor:
    """A [B·H, S, D] TMA descriptor of a contiguous [B, H, S, D] tensor, [1, block, D] boxes."""
    batch, heads, seq_len, head_dim = t.shape
    view = t.view(batch * heads, seq_len, head_dim)
    dtype = gl.float16 if t.dtype == torch.float16 else gl.bfloat16
    layout = gl.NVMMASharedLayout.get_default_for([1, block, head_dim], dtype)
    return TensorDescriptor.from_tensor(view, [1, block, head_dim], layout)


def launch(q, k, v, out, config, *, causal: bool, log2e: float = LOG2E, rescale_acc: bool = True, k_source=None):
    """The closure that runs the kernel on contiguous [B, H, S, D] fp16/bf16 Q, K, V into ``out``. Descriptors are
    built here, once (they hold the tensors' addresses), so the timed call launches and nothing else.
    ``k_source`` (negative controls only) builds K's descriptor over another tensor."""
    batch, heads, seq_len, head_dim = q.shape
    block_m, block_n = int(config["BLOCK_M"]), int(config["BLOCK_N"])
    warp_specialize = bool(config.get("WARP_SPECIALIZE", 0))
    q_desc = descriptor(q, block_m // 2 if warp_specialize else block_m)
    k_desc = descriptor(k if k_source is None else k_source, block_n)
    v_desc = descriptor(v, block_n)
    grid = (math.ceil(seq_len / block_m), batch * heads)
    qk_scale = log2e / math.sqrt(head_dim)
    params = dict(
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        STAGES=int(config["STAGES"]),
        CAUSAL=causal,
        RESCALE_ACC=rescale_acc,
        num_warps=int(config["num_warps"]),
    )

    kernel = _gluon_attention_kernel
    if warp_specialize:
        # 12 warps (the producer's warp rounds up to a warpgroup) x 168 registers fill the register file; the
        # producer gives back all but 24 and each consumer warpgroup takes CONSUMER_REGS (FA3: 240)
        kernel = _gluon_attention_ws_kernel
        params.update(num_warps=4, CONSUMER_REGS=int(config.get("CONSUMER_REGS", 240)), maxnreg=168)

    def run() -> torch.Tensor:
        kernel[grid](q_desc, k_desc, v_desc, out, qk_scale, seq_len, **params)
        return out

    return run
