"""Row softmax and LayerNorm for Hopper in Gluon (``triton.experimental.gluon``): the row resident in shared
memory, filled by TMA; the ``gluon_smem`` variants of ``kernels/softmax.py`` and ``kernels/layernorm.py``, not a
kernel of its own.

Why: on the widest rows every ``triton.language`` design falls short of copy bandwidth (the measurements:
docs/kernel-notes.md): ``triton_online`` reads each row twice (the second time from L2 or, for the widest rows,
HBM), and the register-resident team kernels wait at their barriers. Here a
persistent program holds one row, or one of ``PARTS`` equal parts of it, in shared memory:

    TMA: the part arrives in CHUNKS slots of [CHUNK_ROWS, W] (the row viewed as [N / W, W]), one mbarrier each
    pass 1, as each slot lands: every box row's online max and sum of exp2 (warp-level reductions only)
    the part's max and sum from its box rows'; with PARTS > 1, the team's exchanged through global memory
    pass 2: each slot to registers, its refill with the program's next row issued at once, y = e / sum stored

so x is read from HBM once, two exponentials an element, and the next row's loads stream in while this row's
stores go out. LayerNorm is the same machine with each box row's mean and sum of squared deviations in pass 1
(exact two-pass over the box row's 256 values in registers, merged across slots and parts by Chan's formula, so
offset rows keep their precision) and ``(x - mean) * rstd * weight + bias`` in pass 2, weight and bias read from L2
slot by slot, the first slot's on their way while the team exchanges (``WB_AHEAD``). A row too large for one
program is split over a team of ``PARTS`` programs that exchange their partials with ``kernelscope.teams``'
protocol (publish, atomic arrival, bounded spin, poison on release); the grid is whole teams, all resident at once.
Rows must be contiguous with N a multiple of W (the TMA box is at most 256 elements a side), and a part must fit
``MAX_ROW_BYTES``.

No second pass over shared memory: each box row's statistics are kept online as its slot lands, so the program
has loads of its own in flight for all but the normalising pass (docs/kernel-notes.md, "Session 22" and "Session
23", has what the two-pass first version measured, and the designs tried and not kept).

Gluon kernels do not run on Triton's interpreter: on the CPU this module is built offline for sm_90a by the tests
(tests/test_rows_gluon.py); it runs on a GPU of compute capability 9.x, checked by feature.
"""

from __future__ import annotations

import math

import torch

from kernelscope.gluon import hopper_reason
from kernelscope.spec import Shape, element_size
from kernelscope.teams import MAX_BLOCKS_PER_SM, SplitWorkspace, launch_resident, split_grid

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
#: shared memory one program's part of a row may take: the 227 KB a block may opt into, less room for scratch
MAX_ROW_BYTES = 192 * 1024
#: the most programs a row may be split over (powers of two; a team waits for all of its programs, so they must be
#: resident at once, which ``kernelscope.teams`` sizes the grid for)
MAX_PARTS = 32
#: the least shared memory a part of a program of 8 or more warps should fill: below it a program moves too little
#: between its team's barriers (``min_part_bytes`` has it for smaller programs)
MIN_PART_BYTES = 32 * 1024
#: the slots and warps of a program (rows of the [CHUNK_ROWS, W] slots, warps), crossed with every PARTS a shape
#: allows (``parts_options``). Each builds offline for sm_90a with the lock's triton 3.7.1 without spills at every
#: split of N = 65536 in 16 bits and of 262144 and 8192 in fp32 (tests/test_rows_gluon.py). The second of each has
#: 16-row slots: two slots a part from N = 8192 on, which the negative controls need (``default_for``).
CONFIGS = {
    "softmax": [dict(CHUNK_ROWS=cr, num_warps=w) for cr, w in [(32, 16), (16, 16), (32, 8)]],
    "layernorm": [dict(CHUNK_ROWS=cr, num_warps=w) for cr, w in [(32, 16), (16, 16), (32, 8), (16, 8)]],
}
#: small programs (1 to 4 warps), each at one part size only, in bytes: a CTA barrier spans fewer warps (one warp:
#: none to wait for) and more programs share an SM, at the price of larger teams. Swept beside ``CONFIGS``; each
#: builds offline for sm_90a without spills on both stacks (tests/test_rows_gluon.py).
SMALL_CONFIGS = {
    "softmax": [(16, 4, 32768), (16, 4, 16384), (8, 2, 16384), (8, 1, 8192)],
    "layernorm": [(16, 4, 32768), (16, 4, 16384), (8, 2, 16384), (4, 1, 8192)],
}
#: the default (``default_for``): at least this many programs a row, each holding at most this many bytes (and at
#: most ``DEFAULT_BYTES_PER_WARP`` a warp), and the slots by element size; the fastest in session 23's sweeps on the
#: H100 and the H200, and for 16-bit layernorm in session 25's on the H100 (docs/kernel-notes.md, "Session 23" and
#: "Session 25"). Weight and bias are read from L2: staged in shared memory beside x they left fewer bytes of x in
#: flight, which was slower.
DEFAULT = {"softmax": (4, 64 * 1024), "layernorm": (4, 64 * 1024)}
DEFAULT_BYTES_PER_WARP = 8 * 1024
DEFAULT_SLOTS = {
    "softmax": {2: dict(CHUNK_ROWS=32, num_warps=8), 4: dict(CHUNK_ROWS=16, num_warps=16)},
    "layernorm": {2: dict(CHUNK_ROWS=16, num_warps=4), 4: dict(CHUNK_ROWS=16, num_warps=8)},
}
#: spin bound of the team barrier (``kernelscope.teams`` says why it is bounded: a program that gives up reads the
#: NaN that poisons unpublished partials, so a wrong result is recorded instead of a job hanging)
MAX_SPINS = gl.constexpr(1 << 16) if HAS_GLUON_HOPPER else 1 << 16
#: layernorm's pass-2 loads of weight and bias, where a config does not name ``WB_AHEAD``: 0 slot by slot after the
#: team exchange; 1 the first slot's issued before the exchange, so their L2 latency overlaps its spin (the same
#: registers); 2 also every next slot's one slot ahead (more registers). On two H100s, 1 was 1.2-3.5 % faster than 0 in
#: every dtype and 2 slower than both (docs/kernel-notes.md, "Session 27")
WB_AHEAD_DEFAULT = 1


def _gluon_jit(fn):
    return gluon.jit(fn) if HAS_GLUON_HOPPER else fn


_constexpr = gl.constexpr if HAS_GLUON_HOPPER else object


if HAS_GLUON_HOPPER and hasattr(gl, "barrier"):  # the CTA barrier's name, by feature: gl.barrier from triton 3.7

    @gluon.jit
    def _cta_barrier():
        gl.barrier()

else:  # triton 3.6's Gluon (the H200 host's stack)

    @_gluon_jit
    def _cta_barrier():
        gl.thread_barrier()


@_gluon_jit
def _start(x_desc, layout: _constexpr, CHUNK_ROWS: _constexpr, CHUNKS: _constexpr, PARTS: _constexpr):
    """What both kernels begin with: this program's part of the row and its team (``teams`` of them, each taking rows
    ``team, team + teams, ...``), the part's slots and their mbarriers with its first unit (row x PARTS + part) on
    its way in, and a slot's element offsets in ``layout``."""
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    pid = gl.program_id(0)
    part = pid % PARTS
    team = pid // PARTS
    teams = gl.num_programs(0) // PARTS
    slots = gl.allocate_shared_memory(x_desc.dtype, [CHUNKS, CHUNK_ROWS, BOX_W], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [CHUNKS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CHUNKS):
        mbarrier.init(bars.index(c), count=1)
    for c in gl.static_range(CHUNKS):
        _refill(x_desc, slots, bars, c, team * PARTS + part, True, CHUNK_ROWS, CHUNKS)
    offs = gl.expand_dims(gl.arange(0, CHUNK_ROWS, layout=gl.SliceLayout(1, layout)), 1) * BOX_W + gl.expand_dims(
        gl.arange(0, BOX_W, layout=gl.SliceLayout(0, layout)), 0
    )
    return part, team, teams, slots, bars, offs


@_gluon_jit
def _refill(x_desc, slots, bars, c, unit, pred, CHUNK_ROWS: _constexpr, CHUNKS: _constexpr):
    """Slot ``c`` of ``unit`` into shared memory by TMA (where ``pred``), its arrival completing the slot's barrier."""
    fence_async_shared()  # any generic-proxy read of the slot before this async-proxy write
    mbarrier.expect(bars.index(c), x_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(
        x_desc, [(unit * CHUNKS + c) * CHUNK_ROWS, 0], bars.index(c), slots.index(c), pred=pred
    )


@_gluon_jit
def _team_partials(stats_ptr, arrived_ptr, row, part, a, b, PARTS: _constexpr, num_warps: _constexpr):
    """Publish this program's partials ``(a, b)`` of ``row``, wait until the team's ``PARTS`` programs have, and
    return all of them as two [PARTS] vectors; then count this program as a reader (the last reader poisons the
    partials with NaN and zeroes the count, so the next launch starts from the same state without a fill kernel).
    The protocol of ``kernelscope.teams``, in Gluon."""
    row_stats = stats_ptr + row * (2 * PARTS)
    gl.store(row_stats + part, a)
    gl.store(row_stats + PARTS + part, b)
    _cta_barrier()  # every thread's stores before the one thread's releasing atomic
    arrived = gl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
    spins = 0
    while (arrived < PARTS) & (spins < MAX_SPINS):
        arrived = gl.atomic_add(arrived_ptr + row, 0, sem="acquire", scope="gpu")
        spins += 1
    _cta_barrier()
    parts = gl.arange(0, PARTS, layout=gl.BlockedLayout([1], [32], [num_warps], [0]))
    pa = gl.load(row_stats + parts, volatile=True)  # straight from L2, never a stale L1 line
    pb = gl.load(row_stats + PARTS + parts, volatile=True)
    _cta_barrier()  # every read of the partials before this program counts itself a reader
    readers = gl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
    if readers == 2 * PARTS:
        gl.store(row_stats + parts, gl.full([PARTS], float("nan"), gl.float32, parts.type.layout))
        gl.store(row_stats + PARTS + parts, gl.full([PARTS], float("nan"), gl.float32, parts.type.layout))
        gl.atomic_xchg(arrived_ptr + row, 0, sem="release", scope="gpu")
    return pa, pb


@_gluon_jit
def _softmax_smem_kernel(
    x_desc,
    y_ptr,
    stats_ptr,
    arrived_ptr,
    M,
    CHUNK_ROWS: _constexpr,
    CHUNKS: _constexpr,
    PARTS: _constexpr,
    VEC: _constexpr,
    SKIP_LAST_CHUNK_IN_SUM: _constexpr,
    num_warps: _constexpr,
):
    dtype: gl.constexpr = x_desc.dtype
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    PART: gl.constexpr = CHUNKS * CHUNK_ROWS * BOX_W
    # 16-byte vectors, a warp along a box row: conflict-free reads of the unswizzled slots, coalesced stores, and
    # each box row's max and sum a warp-level reduction
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [num_warps, 1], [1, 0])
    box_rows: gl.constexpr = gl.SliceLayout(1, layout)
    part, team, teams, slots, bars, offs = _start(x_desc, layout, CHUNK_ROWS, CHUNKS, PARTS)
    phase = 0
    for row in range(team, M, teams):
        # pass 1, as the slots land: each box row's running max and sum of exponentials (online, in log2 units)
        m_run = gl.full([CHUNK_ROWS], -float("inf"), gl.float32, box_rows)
        s_run = gl.zeros([CHUNK_ROWS], gl.float32, box_rows)
        for c in gl.static_range(CHUNKS):
            mbarrier.wait(bars.index(c), phase)
            x = slots.index(c).load(layout).to(gl.float32) * LOG2E
            m_new = gl.maximum(m_run, gl.max(x, axis=1))
            m_sub = gl.where(m_new == -float("inf"), 0.0, m_new)  # a box row of -inf so far: nothing to rescale
            s_run = s_run * gl.exp2(m_run - m_sub)
            if not (SKIP_LAST_CHUNK_IN_SUM and c == CHUNKS - 1):
                s_run += gl.sum(gl.exp2(x - gl.expand_dims(m_sub, 1)), axis=1)
            m_run = m_new
        # the part's max and sum from its box rows', then (split rows) the row's from its team's parts
        m_part = gl.max(m_run, axis=0)
        s_part = gl.sum(s_run * gl.exp2(m_run - gl.where(m_part == -float("inf"), 0.0, m_part)), axis=0)
        if PARTS > 1:
            pm, ps = _team_partials(stats_ptr, arrived_ptr, row, part, m_part, s_part, PARTS, num_warps)
            m_row = gl.max(pm, axis=0)
            s_row = gl.sum(ps * gl.exp2(pm - gl.where(m_row == -float("inf"), 0.0, m_row)), axis=0)
        else:
            m_row = m_part
            s_row = s_part
        inv_sum = 1.0 / s_row
        # pass 2: each slot to registers, refilled with this program's next unit at once, normalised and stored
        nxt = row + teams
        base = y_ptr + row.to(gl.int64) * (PARTS * PART) + part * PART
        for c in gl.static_range(CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            _refill(x_desc, slots, bars, c, nxt * PARTS + part, nxt < M, CHUNK_ROWS, CHUNKS)
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
    stats_ptr,
    arrived_ptr,
    M,
    eps,
    CHUNK_ROWS: _constexpr,
    CHUNKS: _constexpr,
    PARTS: _constexpr,
    VEC: _constexpr,
    SKIP_LAST_CHUNK_IN_SUM: _constexpr,
    WB_AHEAD: _constexpr,
    num_warps: _constexpr,
):
    dtype: gl.constexpr = x_desc.dtype
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    PART: gl.constexpr = CHUNKS * CHUNK_ROWS * BOX_W
    SLOT: gl.constexpr = CHUNK_ROWS * BOX_W
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [num_warps, 1], [1, 0])
    box_rows: gl.constexpr = gl.SliceLayout(1, layout)
    part, team, teams, slots, bars, offs = _start(x_desc, layout, CHUNK_ROWS, CHUNKS, PARTS)
    cols0 = part * PART + offs  # this program's columns of its first slot
    phase = 0
    for row in range(team, M, teams):
        # pass 1, as the slots land: each box row's mean and sum of squared deviations, exact two-pass over the
        # box row in registers, merged slot by slot (Chan et al.: equal counts, so the weights are constants)
        mean_run = gl.zeros([CHUNK_ROWS], gl.float32, box_rows)
        m2_run = gl.zeros([CHUNK_ROWS], gl.float32, box_rows)
        for c in gl.static_range(CHUNKS):
            mbarrier.wait(bars.index(c), phase)
            x = slots.index(c).load(layout).to(gl.float32)
            if SKIP_LAST_CHUNK_IN_SUM and c == CHUNKS - 1:  # the negative control: zeros in the last slot's place
                x = x * 0.0
            box_mean = gl.sum(x, axis=1) / BOX_W
            d = x - gl.expand_dims(box_mean, 1)
            delta = box_mean - mean_run
            mean_run = mean_run + delta * (1.0 / (c + 1))
            m2_run = m2_run + gl.sum(d * d, axis=1) + delta * delta * (c * BOX_W / (c + 1))
        # the part's from its box rows' (CHUNKS x BOX_W values each), then the row's from its team's parts
        mean_part = gl.sum(mean_run, axis=0) / CHUNK_ROWS
        dm = mean_run - mean_part
        m2_part = gl.sum(m2_run, axis=0) + (CHUNKS * BOX_W) * gl.sum(dm * dm, axis=0)
        if WB_AHEAD > 0:  # the first slot's weight and bias on their way from L2 while the team exchanges
            w = gl.load(w_ptr + cols0)
            b = gl.load(b_ptr + cols0)
        if PARTS > 1:
            pmean, pm2 = _team_partials(stats_ptr, arrived_ptr, row, part, mean_part, m2_part, PARTS, num_warps)
            mean = gl.sum(pmean, axis=0) / PARTS
            dp = pmean - mean
            m2 = gl.sum(pm2, axis=0) + PART * gl.sum(dp * dp, axis=0)
        else:
            mean = mean_part
            m2 = m2_part
        rstd = gl.rsqrt(m2 / (PARTS * PART) + eps)
        # pass 2: each slot to registers, refilled at once, then the affine step with weight and bias from L2
        nxt = row + teams
        base = y_ptr + row.to(gl.int64) * (PARTS * PART)
        for c in gl.static_range(CHUNKS):
            if WB_AHEAD == 0 or (WB_AHEAD == 1 and c > 0):
                w = gl.load(w_ptr + cols0 + c * SLOT)
                b = gl.load(b_ptr + cols0 + c * SLOT)
            if WB_AHEAD == 2 and c + 1 < CHUNKS:  # the next slot's, one slot ahead
                w_next = gl.load(w_ptr + cols0 + (c + 1) * SLOT)
                b_next = gl.load(b_ptr + cols0 + (c + 1) * SLOT)
            x = slots.index(c).load(layout).to(gl.float32)
            _refill(x_desc, slots, bars, c, nxt * PARTS + part, nxt < M, CHUNK_ROWS, CHUNKS)
            y = (x - mean) * rstd * w.to(gl.float32) + b.to(gl.float32)
            gl.store(base + cols0 + c * SLOT, y.to(dtype))
            if WB_AHEAD == 2 and c + 1 < CHUNKS:
                w = w_next
                b = b_next
        phase ^= 1

    for c in gl.static_range(CHUNKS):
        mbarrier.invalidate(bars.index(c))


#: narrower rows move too little for one persistent program a row (the row kernels hold them in registers)
MIN_N = 8192


def feature_reason() -> str | None:
    """Why gluon_smem cannot run on this Triton and device, or None (by feature, not version)."""
    return hopper_reason("gluon_smem", HAS_GLUON_HOPPER, "TMA, mbarriers")


def supports(shape: Shape, dtype: torch.dtype) -> str | None:
    """The variant's ``supports`` (softmax and layernorm alike): why it sits out on this case, or None."""
    if shape.params.get("stride", shape["N"]) != shape["N"]:
        return "strided rows: the TMA view is of a contiguous [M, N] tensor"
    if shape["N"] < MIN_N:
        return f"N = {shape['N']} < {MIN_N}: a row moves too little for a program of its own"
    return shape_reason(shape["N"], element_size(dtype)) or feature_reason()


def min_part_bytes(num_warps: int) -> int:
    """The least shared memory a part of a program of ``num_warps`` warps should fill: ``MIN_PART_BYTES`` from 8
    warps, 8 KB a pair of warps below (8 KB for one or two warps, 16 KB for four)."""
    return MIN_PART_BYTES if num_warps >= 8 else 8192 * max(1, num_warps // 2)


def parts_options(n_cols: int, element_size: int, num_warps: int = 8) -> list[int]:
    """The programs a row may be split over by programs of ``num_warps`` warps: powers of two up to ``MAX_PARTS``
    that divide its box rows, with a part that fits ``MAX_ROW_BYTES``; parts under ``min_part_bytes`` only where
    nothing larger fits."""
    fits = [
        p
        for p in (1 << i for i in range(MAX_PARTS.bit_length()))
        if (n_cols // W) % p == 0 and n_cols * element_size // p <= MAX_ROW_BYTES
    ]
    return [p for p in fits if n_cols * element_size // p >= min_part_bytes(num_warps)] or fits[:1]


def configs_for(kernel: str):
    """The variant's ``configs`` for ``kernel`` ("softmax" or "layernorm"): ``CONFIGS``' slots and warps at every
    split, and ``SMALL_CONFIGS``' at the split that gives their part size, where the row has it."""

    def configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
        n, size = shape["N"], element_size(dtype)
        parts = parts_options(n, size) or [1]
        out = [dict(c, PARTS=p) for p in parts for c in CONFIGS[kernel]]
        for chunk_rows, warps, part_bytes in SMALL_CONFIGS[kernel]:
            parts, rest = divmod(n * size, part_bytes)
            config = dict(CHUNK_ROWS=chunk_rows, num_warps=warps, PARTS=parts)
            if parts and not rest and not config_reason(config, n, size):
                out.append(config)
        return out

    return configs


def default_for(kernel: str, control: bool = False):
    """The variant's ``default_config``: ``DEFAULT``'s split and ``DEFAULT_SLOTS``' slots, as measured fastest.
    ``control=True``: the negative controls' (16-row slots, two or more a part from N = 8192 on, so there is a last
    slot to leave out)."""

    def default(shape: Shape, dtype: torch.dtype) -> dict:
        size = element_size(dtype)
        slots = CONFIGS[kernel][1] if control else DEFAULT_SLOTS[kernel][size]
        parts = parts_options(shape["N"], size, slots["num_warps"]) or [1]
        at_least, most_bytes = DEFAULT[kernel]
        most_bytes = min(most_bytes, DEFAULT_BYTES_PER_WARP * slots["num_warps"])
        fit = [p for p in parts if p >= at_least and shape["N"] * size // p <= most_bytes]
        return dict(slots, PARTS=(fit or parts)[0])

    return default


def prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    """The variant's ``prune``: parts that do not fit, slots that do not divide the part, or idle warps."""
    return config_reason(config, shape["N"], element_size(dtype))


def checked_config(x: torch.Tensor, out: torch.Tensor, config, kernel: str) -> dict:
    """``config`` (or the kernel's default) after the checks a launch needs, each failing with a ValueError that
    names what is wrong: the device and Triton, the row's size, contiguity, the split and the slots."""
    reason = feature_reason() or shape_reason(x.shape[1], x.element_size())
    if reason:
        raise ValueError(f"gluon_smem cannot run here: {reason}")
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"gluon_smem needs contiguous rows; x has strides {x.stride()}, out {out.stride()}")
    if config is None:
        config = default_for(kernel)(Shape({"M": x.shape[0], "N": x.shape[1]}, "launch"), x.dtype)
    config = {"PARTS": 1, **config}
    bad = config_reason(config, x.shape[1], x.element_size())
    if bad:
        raise ValueError(f"gluon_smem config {config}: {bad}")
    return config


def shape_reason(n_cols: int, element_size: int) -> str | None:
    """Why rows of ``n_cols`` elements cannot be held in shared memory by a team of programs here, or None."""
    if n_cols % W:
        return f"N = {n_cols} is not a multiple of {W} (the row is viewed as [N / {W}, {W}] TMA boxes)"
    if not parts_options(n_cols, element_size):
        return (
            f"a row of {n_cols * element_size} B does not split into at most {MAX_PARTS} parts of whole box rows "
            f"that fit the {MAX_ROW_BYTES} B of shared memory a part may take"
        )
    return None


def config_reason(config, n_cols: int, element_size: int) -> str | None:
    """Why this config cannot split rows of ``n_cols`` elements into parts and slots, or None."""
    parts, warps = int(config.get("PARTS", 1)), int(config["num_warps"])
    options = parts_options(n_cols, element_size, warps)
    if parts not in options:
        return f"PARTS={parts} is not one of {options} for a row of {n_cols} elements on {warps} warps a program"
    box_rows = n_cols // W // parts
    if box_rows % config["CHUNK_ROWS"]:
        return f"{box_rows} box rows a part do not split into slots of {config['CHUNK_ROWS']}"
    if config["CHUNK_ROWS"] < config["num_warps"]:
        return f"{config['CHUNK_ROWS']} box rows a slot for {config['num_warps']} warps: idle warps"
    return None


def descriptor(x: torch.Tensor, chunk_rows: int) -> TensorDescriptor:
    """[M * N / W, W] view of a contiguous [M, N] tensor, [chunk_rows, W] boxes, unswizzled."""
    gdtype = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}[x.dtype]
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=gdtype.primitive_bitwidth, rank=2)
    return TensorDescriptor.from_tensor(x.view(-1, W), [chunk_rows, W], layout)


def launch(
    x: torch.Tensor,
    out: torch.Tensor,
    config,
    limits,
    *,
    skip_last_chunk_in_sum: bool = False,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
):
    """The closure that runs the softmax kernel (or, given ``weight`` and ``bias``, the LayerNorm kernel) on a
    contiguous [M, N] ``x`` into contiguous ``out``. The descriptor and the team workspace are built here, once; the
    grid (whole teams, all resident at once) is sized on the first call from the compiled kernel."""
    n_rows, n_cols = x.shape
    chunk_rows, warps, parts = int(config["CHUNK_ROWS"]), int(config["num_warps"]), int(config.get("PARTS", 1))
    desc = descriptor(x, chunk_rows)
    work = SplitWorkspace(n_rows, parts, x.device)
    params = dict(
        CHUNK_ROWS=chunk_rows,
        CHUNKS=n_cols // W // parts // chunk_rows,
        PARTS=parts,
        VEC=16 // x.element_size(),
        SKIP_LAST_CHUNK_IN_SUM=skip_last_chunk_in_sum,
        num_warps=warps,
    )
    if weight is not None:
        params["WB_AHEAD"] = int(config.get("WB_AHEAD", WB_AHEAD_DEFAULT))
        kernel, args = _layernorm_smem_kernel, (desc, out, weight, bias, work.stats, work.arrived, n_rows, eps)
    else:
        kernel, args = _softmax_smem_kernel, (desc, out, work.stats, work.arrived, n_rows)
    run = launch_resident(
        kernel,
        args,
        params,
        limits,
        # as many whole teams as are resident at once (registers, threads and the SM's shared memory)
        lambda resident: (split_grid(n_rows, parts, MAX_BLOCKS_PER_SM, resident, limits["num_sms"]),),
        out,
    )
    run.workspace = work
    return run
