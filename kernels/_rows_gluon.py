"""Row softmax and LayerNorm for Hopper in Gluon (``triton.experimental.gluon``): the whole row resident in shared
memory, filled by TMA; the ``gluon_smem`` variants of ``kernels/softmax.py`` and ``kernels/layernorm.py``, not a
kernel of its own.

Why: on the H200 the wide rows (1024 x 65536) stay at 71-73 % of copy bandwidth with every ``triton.language``
design measured (docs/kernel-notes.md): ``triton_online`` reads each row twice (the second time from L2), and the
register-resident team kernels wait at their barriers. Here a persistent program holds one row in shared memory:

    TMA: row r arrives in CHUNKS slots of [CHUNK_ROWS, W] (the row viewed as [N / W, W]), one mbarrier each
    pass 1: as each slot lands, an elementwise running max in registers (no exponentials, no reductions)
    one CTA reduction -> the row max; pass 2: elementwise sum of exp2 from shared memory; one reduction -> sum
    pass 3: each slot to registers, its refill with row r + programs issued at once, then y = e / sum stored

so the row is read from HBM once, two exponentials an element and two CTA reductions a row, and the next row's
loads stream in while this row's stores go out. LayerNorm is the same machine with a running sum in pass 1 (the
mean), the sum of squared deviations from shared memory in pass 2 (two-pass variance, exact for offset rows), and
``(x - mean) * rstd * weight + bias`` in pass 3, weight and bias read from L2 slot by slot. Rows must fit shared
memory (``row_bytes <= MAX_ROW_BYTES``), be contiguous and have N a multiple of W (the TMA box is at most 256
elements a side).

Gluon kernels do not run on Triton's interpreter: on the CPU this module is built offline for sm_90a by the tests
(tests/test_rows_gluon.py); it runs on a GPU of compute capability 9.x, checked by feature.
"""

from __future__ import annotations

import math

import torch

from kernelscope import runtime
from kernelscope.spec import Shape, element_size

try:  # Gluon and its Hopper ops, by feature
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    HAS_GLUON_HOPPER = True
except ImportError:  # pragma: no cover - a Triton without Gluon's Hopper module
    HAS_GLUON_HOPPER = False

#: log2(e), a constexpr so the kernel can read it
LOG2E = gl.constexpr(math.log2(math.e)) if HAS_GLUON_HOPPER else math.log2(math.e)
#: the row viewed as [N / W, W]: W elements a box row (a TMA box is at most 256 elements a side)
W = 256
#: shared memory a row may take: the 227 KB a block may opt into, less room for the reductions' scratch
MAX_ROW_BYTES = 192 * 1024
#: the config spaces: rows of the [CHUNK_ROWS, W] slots, warps. Each config builds offline for sm_90a without spills
#: at N = 65536 in 16 bits and 8192 in fp32 (tests/test_rows_gluon.py); those that spilled are left out: softmax on
#: 8 warps (4-8 B) and on 64-row slots in bf16 (20 B), layernorm on 16-row slots with 16 warps in bf16 (16 B). The
#: second config of each has 16-row slots: two slots a row from N = 8192 on, which the negative controls need.
CONFIGS = {
    "softmax": [dict(CHUNK_ROWS=cr, num_warps=w) for cr, w in [(32, 16), (16, 16)]],
    "layernorm": [dict(CHUNK_ROWS=cr, num_warps=w) for cr, w in [(32, 16), (16, 8), (32, 8), (64, 16)]],
}


def _gluon_jit(fn):
    return gluon.jit(fn) if HAS_GLUON_HOPPER else fn


_constexpr = gl.constexpr if HAS_GLUON_HOPPER else object


@_gluon_jit
def _load_first_rows(x_desc, CHUNK_ROWS: _constexpr, CHUNKS: _constexpr):
    """The row's slots and their mbarriers, with this program's first row on its way into them."""
    slots = gl.allocate_shared_memory(x_desc.dtype, [CHUNKS, CHUNK_ROWS, x_desc.block_type.shape[1]], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [CHUNKS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CHUNKS):
        mbarrier.init(bars.index(c), count=1)
    for c in gl.static_range(CHUNKS):
        _refill(x_desc, slots, bars, c, gl.program_id(0), True, CHUNK_ROWS, CHUNKS)
    return slots, bars


@_gluon_jit
def _refill(x_desc, slots, bars, c, row, pred, CHUNK_ROWS: _constexpr, CHUNKS: _constexpr):
    """Slot ``c`` of ``row`` into shared memory by TMA (where ``pred``), its arrival completing the slot's barrier."""
    fence_async_shared()  # any generic-proxy read of the slot before this async-proxy write
    mbarrier.expect(bars.index(c), x_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(
        x_desc, [(row * CHUNKS + c) * CHUNK_ROWS, 0], bars.index(c), slots.index(c), pred=pred
    )


@_gluon_jit
def _softmax_smem_kernel(
    x_desc,
    y_ptr,
    M,
    CHUNK_ROWS: _constexpr,
    CHUNKS: _constexpr,
    VEC: _constexpr,
    SKIP_LAST_CHUNK_IN_SUM: _constexpr,
    num_warps: _constexpr,
):
    dtype: gl.constexpr = x_desc.dtype
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    ROW: gl.constexpr = CHUNKS * CHUNK_ROWS * BOX_W
    # 16-byte vectors, a warp along a box row: conflict-free reads of the unswizzled slots, coalesced stores
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [num_warps, 1], [1, 0])
    slots, bars = _load_first_rows(x_desc, CHUNK_ROWS, CHUNKS)
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    offs = gl.expand_dims(gl.arange(0, CHUNK_ROWS, layout=gl.SliceLayout(1, layout)), 1) * BOX_W + gl.expand_dims(
        gl.arange(0, BOX_W, layout=gl.SliceLayout(0, layout)), 0
    )
    phase = 0
    for row in range(pid, M, programs):
        # pass 1, as the slots land: an elementwise running max, reduced once
        m_acc = gl.full([CHUNK_ROWS, BOX_W], -float("inf"), gl.float32, layout)
        for c in gl.static_range(CHUNKS):
            mbarrier.wait(bars.index(c), phase)
            m_acc = gl.maximum(m_acc, slots.index(c).load(layout).to(gl.float32))
        m_row = gl.max(gl.max(m_acc, axis=1), axis=0) * LOG2E
        # pass 2, from shared memory: an elementwise sum of exp2, reduced once
        s_acc = gl.zeros([CHUNK_ROWS, BOX_W], gl.float32, layout)
        for c in gl.static_range(CHUNKS - 1 if SKIP_LAST_CHUNK_IN_SUM else CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            s_acc += gl.exp2(x * LOG2E - m_row)
        inv_sum = 1.0 / gl.sum(gl.sum(s_acc, axis=1), axis=0)
        # pass 3: each slot to registers, refilled with this program's next row at once, then normalised and stored
        nxt = row + programs
        base = y_ptr + row.to(gl.int64) * ROW
        for c in gl.static_range(CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            _refill(x_desc, slots, bars, c, nxt, nxt < M, CHUNK_ROWS, CHUNKS)
            y = gl.exp2(x * LOG2E - m_row) * inv_sum
            gl.store(base + c * CHUNK_ROWS * BOX_W + offs, y.to(dtype))
        phase ^= 1

    for c in gl.static_range(CHUNKS):
        mbarrier.invalidate(bars.index(c))


@_gluon_jit
def _layernorm_smem_kernel(
    x_desc,
    y_ptr,
    w_ptr,
    b_ptr,
    M,
    eps,
    CHUNK_ROWS: _constexpr,
    CHUNKS: _constexpr,
    VEC: _constexpr,
    SKIP_LAST_CHUNK_IN_SUM: _constexpr,
    num_warps: _constexpr,
):
    dtype: gl.constexpr = x_desc.dtype
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    ROW: gl.constexpr = CHUNKS * CHUNK_ROWS * BOX_W
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [num_warps, 1], [1, 0])
    slots, bars = _load_first_rows(x_desc, CHUNK_ROWS, CHUNKS)
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    offs = gl.expand_dims(gl.arange(0, CHUNK_ROWS, layout=gl.SliceLayout(1, layout)), 1) * BOX_W + gl.expand_dims(
        gl.arange(0, BOX_W, layout=gl.SliceLayout(0, layout)), 0
    )
    phase = 0
    for row in range(pid, M, programs):
        # pass 1, as the slots land: an elementwise running sum, reduced once -> the mean
        s_acc = gl.zeros([CHUNK_ROWS, BOX_W], gl.float32, layout)
        for c in gl.static_range(CHUNKS - 1 if SKIP_LAST_CHUNK_IN_SUM else CHUNKS):
            mbarrier.wait(bars.index(c), phase)
            s_acc += slots.index(c).load(layout).to(gl.float32)
        if SKIP_LAST_CHUNK_IN_SUM:  # the negative control still waits for the slot it leaves out
            mbarrier.wait(bars.index(CHUNKS - 1), phase)
        mean = gl.sum(gl.sum(s_acc, axis=1), axis=0) / ROW
        # pass 2, from shared memory: the squared deviations from the mean (two-pass variance), reduced once
        q_acc = gl.zeros([CHUNK_ROWS, BOX_W], gl.float32, layout)
        for c in gl.static_range(CHUNKS):
            d = slots.index(c).load(layout).to(gl.float32) - mean
            q_acc += d * d
        rstd = gl.rsqrt(gl.sum(gl.sum(q_acc, axis=1), axis=0) / ROW + eps)
        # pass 3: each slot to registers, refilled at once, then the affine step with weight and bias from L2
        nxt = row + programs
        base = y_ptr + row.to(gl.int64) * ROW
        for c in gl.static_range(CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            _refill(x_desc, slots, bars, c, nxt, nxt < M, CHUNK_ROWS, CHUNKS)
            cols = c * CHUNK_ROWS * BOX_W + offs
            w = gl.load(w_ptr + cols).to(gl.float32)
            b = gl.load(b_ptr + cols).to(gl.float32)
            gl.store(base + cols, ((x - mean) * rstd * w + b).to(dtype))
        phase ^= 1

    for c in gl.static_range(CHUNKS):
        mbarrier.invalidate(bars.index(c))


#: narrower rows move too little for one persistent program a row (the row kernels hold them in registers)
MIN_N = 8192


def feature_reason() -> str | None:
    """Why gluon_smem cannot run on this Triton and device, or None (by feature, not version)."""
    if not HAS_GLUON_HOPPER:
        return "this Triton has no triton.experimental.gluon Hopper module (tma, mbarrier)"
    limits = runtime.device_limits()
    if limits["interpreter"]:
        return "Gluon kernels do not run on Triton's interpreter (on the CPU the tests build gluon_smem offline)"
    if tuple(limits["capability"])[0] != 9:
        return f"built and checked for sm_90 (TMA from Gluon's Hopper module); the device has {limits['capability']}"
    return None


def supports(shape: Shape, dtype: torch.dtype) -> str | None:
    """The variant's ``supports`` (softmax and layernorm alike): why it sits out on this case, or None."""
    if shape.params.get("stride", shape["N"]) != shape["N"]:
        return "strided rows: the TMA view is of a contiguous [M, N] tensor"
    if shape["N"] < MIN_N:
        return f"N = {shape['N']} < {MIN_N}: a row moves too little for a program of its own"
    return shape_reason(shape["N"], element_size(dtype)) or feature_reason()


def configs_for(kernel: str):
    """The variant's ``configs`` for ``kernel`` ("softmax" or "layernorm")."""
    return lambda shape, dtype: [dict(c) for c in CONFIGS[kernel]]


def default_for(kernel: str, index: int = 0):
    """The variant's ``default_config``; ``index=1``: the negative controls' (16-row slots, two a row at 8192)."""
    return lambda shape, dtype: dict(CONFIGS[kernel][index])


def prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    """The variant's ``prune``: slots that do not divide the row, or leave warps idle."""
    return config_reason(config, shape["N"])


def checked_config(x: torch.Tensor, out: torch.Tensor, config, kernel: str) -> dict:
    """``config`` (or the kernel's default) after the checks a launch needs, each failing with a ValueError that
    names what is wrong: the device and Triton, the row's size, contiguity, the slots."""
    reason = feature_reason() or shape_reason(x.shape[1], x.element_size())
    if reason:
        raise ValueError(f"gluon_smem cannot run here: {reason}")
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"gluon_smem needs contiguous rows; x has strides {x.stride()}, out {out.stride()}")
    config = dict(config or CONFIGS[kernel][0])
    bad = config_reason(config, x.shape[1])
    if bad:
        raise ValueError(f"gluon_smem config {config}: {bad}")
    return config


def shape_reason(n_cols: int, element_size: int) -> str | None:
    """Why rows of ``n_cols`` elements cannot be resident in shared memory here, or None."""
    if n_cols % W:
        return f"N = {n_cols} is not a multiple of {W} (the row is viewed as [N / {W}, {W}] TMA boxes)"
    if n_cols * element_size > MAX_ROW_BYTES:
        return f"a row of {n_cols * element_size} B does not fit the {MAX_ROW_BYTES} B of shared memory a row may take"
    return None


def config_reason(config, n_cols: int) -> str | None:
    """Why this config cannot split rows of ``n_cols`` elements into slots, or None."""
    box_rows = n_cols // W
    if box_rows % config["CHUNK_ROWS"]:
        return f"{box_rows} box rows a row do not split into slots of {config['CHUNK_ROWS']}"
    if config["CHUNK_ROWS"] < config["num_warps"]:
        return f"{config['CHUNK_ROWS']} box rows a slot for {config['num_warps']} warps: idle warps"
    return None


def descriptor(x: torch.Tensor, chunk_rows: int) -> TensorDescriptor:
    """[M * N / W, W] view of a contiguous [M, N] tensor, [chunk_rows, W] boxes, unswizzled."""
    gdtype = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}[x.dtype]
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=gdtype.primitive_bitwidth, rank=2)
    return TensorDescriptor.from_tensor(x.view(-1, W), [chunk_rows, W], layout)


def programs_per_sm(row_bytes: int, num_warps: int, shared_per_sm: int = 228 * 1024) -> int:
    """Programs an SM holds at once: by shared memory (one row each, and 1 KB the block reserves) and threads."""
    return max(1, min(shared_per_sm // (row_bytes + 1024), 2048 // (32 * num_warps)))


def launch(
    x: torch.Tensor,
    out: torch.Tensor,
    config,
    num_sms: int,
    *,
    skip_last_chunk_in_sum: bool = False,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
):
    """The closure that runs the softmax kernel (or, given ``weight`` and ``bias``, the LayerNorm kernel) on a
    contiguous [M, N] ``x`` into contiguous ``out``; the descriptor is built here, once."""
    n_rows, n_cols = x.shape
    chunk_rows, warps = int(config["CHUNK_ROWS"]), int(config["num_warps"])
    desc = descriptor(x, chunk_rows)
    chunks = n_cols // W // chunk_rows
    grid = (min(n_rows, num_sms * programs_per_sm(n_cols * x.element_size(), warps)),)
    params = dict(
        CHUNK_ROWS=chunk_rows,
        CHUNKS=chunks,
        VEC=16 // x.element_size(),
        SKIP_LAST_CHUNK_IN_SUM=skip_last_chunk_in_sum,
        num_warps=warps,
    )

    if weight is not None:

        def run() -> torch.Tensor:
            _layernorm_smem_kernel[grid](desc, out, weight, bias, n_rows, eps, **params)
            return out

        return run

    def run() -> torch.Tensor:
        _softmax_smem_kernel[grid](desc, out, n_rows, **params)
        return out

    return run
