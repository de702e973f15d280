"""Row-wise stable softmax over the last dimension of a 2-D tensor (seed 000's experiment).

``y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))``

All variants take a row stride for the input and the output (rows may be views into a wider buffer;
columns must be contiguous), reduce in fp32 and store in the input dtype. Masked lanes load as -inf,
so they change neither the max nor the sum.

Variants:

* ``triton_row`` — the teaching kernel: one program per row, ``BLOCK_SIZE = next_power_of_2(N)`` (with
  ``aligned=1`` the body's block, ``heuristics.body_block``: 2048 for N = 2049, not 4096).
  The tuning choices are the number of warps and ``rows``: with ``rows`` = R > 1 (plain rows only, not
  ``aligned=1``) a program holds R consecutive rows as one [R, BLOCK_SIZE] block, reducing along axis 1, and
  the grid is ``cdiv(M, R)``. The seed's heuristic (8 warps from a 2048-wide block, else 4) is the default
  config, except on rows that move under 2 KB and do not split: there the default takes enough rows that a
  program moves 2 KB (``_row_default``).
* ``triton_persistent`` — the same whole-row block, but a grid of only ``num_sms * programs_per_sm``
  programs, each looping over rows ``pid, pid + grid, ...`` (seed 000's "persistent kernel"). It should
  help when there are many short rows: launching and scheduling one tiny program per row then costs as
  much as the row's work, and a long-lived program can prefetch its next row (``num_stages`` of
  ``tl.range``) while it reduces the current one. It should not help once the row kernel's grid already
  fills the GPU with enough work per program (long rows, or few rows: then ``grid = n_rows`` and both
  kernels launch the same programs), and it can lose to the tail: when ``n_rows`` is not a multiple of
  the grid, the last round of rows runs on part of the SMs while the rest idle.
* ``triton_online`` — rows of any width (the row kernels stop at ``MAX_ROW_BLOCK``): a program loops
  over ``BLOCK_N``-wide column blocks keeping a running max ``m`` and a running sum ``s`` that is
  rescaled by ``exp(m_old - m_new)`` whenever the max grows (the online normaliser of Milakov &
  Gimelshein, as in FlashAttention), then a second pass writes ``exp(x - m) / s``. It reads ``x`` twice
  (3 MN elements of traffic against the minimal 2 MN) unless the second read comes from L2, which two
  choices arrange: the second pass walks the row backwards, so it starts with the blocks the first
  pass read last (the likeliest still in L2), and ``programs_per_sm > 0`` makes the grid persistent
  (``num_sms * programs_per_sm`` programs looping over rows), which bounds the rows in flight, and so
  the bytes that must stay in L2 between the passes, to ``grid * row bytes`` (``programs_per_sm = 0``:
  one program per row, every row in flight at once). ``num_stages > 1`` pipelines the block loops, so
  that a smaller grid can still keep enough loads in flight. Two details keep it equal to torch:
  while the running max is still -inf the exponents are shifted by 0 (not by -inf, which would turn
  the -inf columns into NaN), and the running sum is Kahan-compensated (hundreds of sequential fp32
  block additions otherwise break the row-sum invariant, measured on N=262144 rows with 1024-wide
  blocks). Its default ``BLOCK_N`` is a quarter of the padded row, at most 4096 (16384 on rows of N >= 32768).

* ``triton_split`` — the multi-block softmax that reads ``x`` once: a team of ``cdiv(N, CHUNK)``
  programs shares each row, every program keeping its ``CHUNK`` columns in registers from load to
  store. The teams exchange their partial max and sum through global memory behind an atomic barrier
  (release/acquire at GPU scope), combine them with the same rescale as the online kernel and write.
  A barrier between programs needs the whole grid resident at once, so the launcher sizes the grid
  from the compiled kernel's registers and the device's occupancy limits; the spin is bounded, and
  unpublished partials read as NaN, so a barrier that ever failed would fail the correctness gate
  rather than hang or pass. Under the interpreter (programs run one after another) it is two
  launches, publish then combine, with the same arithmetic. A barrier through global memory per row can
  cost more than the third of the traffic it saves, so it is the measured alternative to
  ``triton_online``, run on rows of N >= SPLIT_MIN_N (how it fared on the H200: docs/kernel-notes.md).

* ``gluon_smem`` — Hopper only, in Gluon (``kernels/_rows_gluon.py``): a persistent program holds a row, or its
  part of a row split over a team of ``PARTS`` programs, in shared memory, filled by TMA in slots with one mbarrier
  each. As the slots land, each box row's online max and sum of exp2 (warp-level reductions); the parts' max and
  sum are exchanged through global memory behind ``kernelscope.teams``' barrier; then each slot is normalised and
  stored while its refill with the program's next row is already in flight. The row is read from HBM once, with
  the bytes in flight that TMA gives. Contiguous rows, N a multiple of 256 and at least 8192, a part of at most
  ``MAX_ROW_BYTES``; GPU only (Gluon does not run on the interpreter: the tests build it offline).

Negative controls: ``naive_no_max`` (no max subtraction: exp overflows on large logits),
``aligned_no_tail`` (``triton_row`` at ``aligned=1`` without the tail after the aligned body),
``online_no_rescale`` (``triton_online`` that forgets to rescale the running sum when the max grows:
blocks read before the max overcount by ``exp(m_new - m_old)``) and ``rows_reduce_axis0`` (``triton_row``
with several rows a program whose max and sum run over axis 0, across the program's rows, not along each).

Measured numbers behind the defaults and bounds here are in docs/kernel-notes.md.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels import _rows_gluon as gluon_smem
from kernelscope.baselines import compiled
from kernelscope.heuristics import (
    PIPELINED_RANGE,
    body_block,
    check_split,
    idle_warps,
    idle_warps_rows,
    no_tail_control,
    row_spills,
    row_split,
    rows_grid,
    rows_per_program,
    rows_unsupported,
    split_unsupported,
    vec_elements,
    whole_row_unsupported,
)
from kernelscope.runtime import device_limits
from kernelscope.spec import (
    Implementation,
    Inputs,
    Invariant,
    KernelSpec,
    Shape,
    Target,
    Tolerance,
    element_size,
    generator,
    randn,
    shape_entry,
)
from kernelscope.teams import (
    MAX_SPINS,
    SplitWorkspace,
    prepare_team_launch,
    split_parts,
    team_configs,
    team_default,
    team_partials,
    team_prune,
    team_publish,
    team_release,
    team_wait,
)

# Largest row the one-program-per-row kernel accepts: the whole row lives in registers.
MAX_ROW_BLOCK = 65536


@triton.jit
def _softmax_whole_row(out_row_ptr, in_row_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """Softmax of the ``n_cols`` contiguous elements at ``in_row_ptr``, held in one block
    (``BLOCK_SIZE >= n_cols``), stored at ``out_row_ptr``."""
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    x = tl.load(in_row_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerators = tl.exp(x)
    y = numerators / tl.sum(numerators, axis=0)
    tl.store(out_row_ptr + offsets, y.to(out_row_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_whole_row_aligned(
    out_row_ptr, in_row_ptr, n_cols, BLOCK_SIZE: tl.constexpr, VEC: tl.constexpr, KEEP_TAIL: tl.constexpr
):
    """``_softmax_whole_row`` with the row split at its first 16-byte boundary (``row_split``): the head and
    the tail, fewer than ``VEC`` elements each, load and store lane by lane; the body, from a pointer declared
    16-byte aligned and under a mask that changes only every ``VEC`` lanes, 16 bytes at a time. The output row
    lies at the same offset from a boundary as the input row (the launcher checks), so one split serves both.
    ``KEEP_TAIL`` is False only in the negative control ``aligned_no_tail``."""
    head, body = row_split(in_row_ptr, n_cols, VEC)
    tail_start = head + body
    edge = tl.arange(0, VEC)
    cols = tl.arange(0, BLOCK_SIZE)
    head_mask = edge < head
    body_mask = cols < body
    tail_mask = edge < (n_cols - tail_start if KEEP_TAIL else 0)
    x_head = tl.load(in_row_ptr + edge, mask=head_mask, other=-float("inf")).to(tl.float32)
    x_body = tl.load(tl.multiple_of(in_row_ptr + head, 16) + cols, mask=body_mask, other=-float("inf"))
    x_body = x_body.to(tl.float32)
    x_tail = tl.load(in_row_ptr + tail_start + edge, mask=tail_mask, other=-float("inf")).to(tl.float32)
    m = tl.maximum(tl.maximum(tl.max(x_head, axis=0), tl.max(x_body, axis=0)), tl.max(x_tail, axis=0))
    e_head = tl.exp(x_head - m)
    e_body = tl.exp(x_body - m)
    e_tail = tl.exp(x_tail - m)
    total = tl.sum(e_head, axis=0) + tl.sum(e_body, axis=0) + tl.sum(e_tail, axis=0)
    dtype = out_row_ptr.dtype.element_ty
    tl.store(out_row_ptr + edge, (e_head / total).to(dtype), mask=head_mask)
    tl.store(tl.multiple_of(out_row_ptr + head, 16) + cols, (e_body / total).to(dtype), mask=body_mask)
    tl.store(out_row_ptr + tail_start + edge, (e_tail / total).to(dtype), mask=tail_mask)


@triton.jit
def _softmax_rows(
    out_ptr,
    in_ptr,
    first_row,
    n_rows,
    n_cols,
    in_row_stride,
    out_row_stride,
    ROWS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    REDUCE_AXIS: tl.constexpr,
):
    """Softmax of rows ``first_row .. first_row + ROWS - 1`` held as one [ROWS, BLOCK_SIZE] block, each row
    reduced on its own (axis 1). The last program's rows past ``n_rows`` (where ROWS does not divide it) are
    masked out of the load and the store: they lie outside both tensors. Row offsets are int64, since
    ``row * stride`` passes 2^31 elements on multi-GB inputs. ``REDUCE_AXIS`` is 0 only in the negative control
    ``rows_reduce_axis0``, which normalises each column across the program's rows instead."""
    rows = first_row + tl.arange(0, ROWS).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x = tl.load(in_ptr + rows[:, None] * in_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    if REDUCE_AXIS == 1:
        x = x - tl.max(x, axis=1)[:, None]
        numerators = tl.exp(x)
        y = numerators / tl.sum(numerators, axis=1)[:, None]
    else:
        x = x - tl.max(x, axis=0)[None, :]
        numerators = tl.exp(x)
        y = numerators / tl.sum(numerators, axis=0)[None, :]
    out_offsets = rows[:, None] * out_row_stride + cols[None, :]
    tl.store(out_ptr + out_offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_softmax_kernel(
    out_ptr,
    in_ptr,
    n_rows,
    n_cols,
    in_row_stride,
    out_row_stride,
    BLOCK_SIZE: tl.constexpr,
    ALIGNED: tl.constexpr,
    VEC: tl.constexpr,
    KEEP_TAIL: tl.constexpr = True,
    ROWS: tl.constexpr = 1,
    REDUCE_AXIS: tl.constexpr = 1,
):
    """One program computes ``ROWS`` consecutive rows (one by default). ``in_ptr``/``out_ptr``: [n_rows, n_cols],
    unit column stride; with ``ALIGNED`` (one row a program only) every input row and its output row lie at the
    same offset from a 16-byte boundary."""
    if ROWS == 1:
        row = tl.program_id(0).to(tl.int64)
        out_row, in_row = out_ptr + row * out_row_stride, in_ptr + row * in_row_stride
        _softmax_one_row(out_row, in_row, n_cols, BLOCK_SIZE, ALIGNED, VEC, KEEP_TAIL)
    else:
        first_row = tl.program_id(0).to(tl.int64) * ROWS
        _softmax_rows(
            out_ptr, in_ptr, first_row, n_rows, n_cols, in_row_stride, out_row_stride, ROWS, BLOCK_SIZE, REDUCE_AXIS
        )


def _check_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError(
            f"softmax expects a 2-D tensor with unit column stride, got shape {tuple(x.shape)} strides {x.stride()}"
        )
    if out.shape != x.shape or out.stride(1) != 1:
        raise ValueError(f"output must match the input's shape {tuple(x.shape)} with unit column stride")


def _prepare_row(inputs: Inputs, out: torch.Tensor, config, keep_tail: bool = True, reduce_axis: int = 1) -> callable:
    """``keep_tail=False`` and ``reduce_axis=0`` only for the negative controls ``aligned_no_tail`` and
    ``rows_reduce_axis0``."""
    x = inputs["x"]
    _check_rows(x, out)
    n_rows, n_cols = x.shape
    num_warps = int(config["num_warps"])
    rows = int(config.get("rows", 1))  # configs from before the key, recorded runs included, ran one row a program
    aligned = _aligned(x, out, config)
    if aligned and rows > 1:
        raise ValueError(f"rows={rows} needs aligned=0: the split at 16-byte boundaries serves one row a program")
    vec = vec_elements(x.element_size())
    block = body_block(n_cols, vec) if aligned else triton.next_power_of_2(n_cols)
    grid = (triton.cdiv(n_rows, rows),)

    def run() -> torch.Tensor:
        _row_softmax_kernel[grid](
            out,
            x,
            n_rows,
            n_cols,
            x.stride(0),
            out.stride(0),
            BLOCK_SIZE=block,
            ALIGNED=aligned,
            VEC=vec,
            KEEP_TAIL=keep_tail,
            ROWS=rows,
            REDUCE_AXIS=reduce_axis,
            num_warps=num_warps,
        )
        return out

    return run


def _aligned(x: torch.Tensor, out: torch.Tensor, config) -> bool:
    """The config's ``aligned`` (0 when absent), checked against the tensors it will run on."""
    aligned = bool(config.get("aligned", 0))
    if aligned:
        check_split(x, out)
    return aligned


def _split_reason(shape: Shape, dtype: torch.dtype) -> str | None:
    """Why the rows of this case gain nothing from ``aligned=1`` (or cannot take it); None when they can."""
    return split_unsupported(shape["N"], shape.params.get("stride", shape["N"]), shape["N"], element_size(dtype))


def _with_split(configs: list[dict], shape: Shape, dtype: torch.dtype) -> list[dict]:
    """``configs`` with ``aligned=1`` added to each where it applies (rows Triton cannot prove aligned)."""
    return configs if _split_reason(shape, dtype) else [{**c, "aligned": 1} for c in configs]


ROW_WARPS = (1, 2, 4, 8, 16, 32)

# Several rows a program, swept on rows whose block is at most ROWS_MAX_BLOCK wide (3 x 4 = 12 configs more);
# heuristics.rows_unsupported prunes those past MAX_ROWS_BLOCK elements (8 rows of 2048).
ROWS_PER_PROGRAM = (2, 4, 8)
ROWS_WARPS = (1, 2, 4, 8)
ROWS_MAX_BLOCK = 2048

# Input bytes a program of the default should read at least. On the H200 (session 12, commit f2fb297,
# reports/nvidia-h200/; docs/kernel-notes.md, "Issue 24's targets at f2fb297") softmax 131072 x 512 at one
# row a program reached 98.8 % of copy bandwidth in fp32, 2 KB a program, but 77.8 % in fp16 at 1 KB.
ROWS_MIN_BYTES = 2048


def _row_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # Where the split applies, every warp count both ways: the sweep then measures what the full-width body
    # is worth against the lane-by-lane row it replaces. On narrow rows also several rows a program (plain rows
    # only, also where the split applies: the sweep measures one against the other).
    plain = [{"num_warps": w} for w in ROW_WARPS]
    configs = plain if _split_reason(shape, dtype) else [*_with_split(plain, shape, dtype), *plain]
    if triton.next_power_of_2(shape["N"]) <= ROWS_MAX_BLOCK:
        configs = [*configs, *({"num_warps": w, "rows": r} for r in ROWS_PER_PROGRAM for w in ROWS_WARPS)]
    return configs


def _row_default(shape: Shape, dtype: torch.dtype) -> dict:
    # The seed's heuristic: 8 warps once the block is 2048 wide, else 4; split at 16-byte boundaries where
    # Triton cannot prove the rows aligned (a 16-bit row then moves 16 bytes a load instead of 2).
    config = _with_split([{"num_warps": 8 if triton.next_power_of_2(shape["N"]) >= 2048 else 4}], shape, dtype)[0]
    # Rows that move under ROWS_MIN_BYTES and do not split: enough rows a program (a power of two) that it reads
    # 2 KB, the size at which fp32 131072 x 512 measured 98.8 % of copy bandwidth on the H200 where 16-bit rows
    # at 1 KB a program measured 77.8 % (ROWS_MIN_BYTES); at most MAX_ROWS_BLOCK elements a program. 2 warps: in
    # the first GPU sweep of `rows` (session 13, docs/kernel-notes.md) 131072 x 512 at rows=2 took 65.97 / 65.06 us
    # (fp16 / bf16) on 2 warps, within 0.2 % of the fastest config, and 72.86 / 74.14 us on 4.
    # Where the split applies it stays the default (one row a program).
    rows = rows_per_program(shape["N"], element_size(dtype), ROWS_MIN_BYTES)
    if rows > 1 and not config.get("aligned"):
        return {"num_warps": 2, "rows": rows}
    return config


def _one_row_default(shape: Shape, dtype: torch.dtype) -> dict:
    """``_row_default`` at one row a program: the split (aligned=1) that ``aligned_no_tail`` breaks serves one
    row at a time."""
    return {k: v for k, v in _row_default(shape, dtype).items() if k != "rows"}


def _row_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    return whole_row_unsupported(shape["N"], MAX_ROW_BLOCK)


def _row_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    rows, num_warps = int(config.get("rows", 1)), config["num_warps"]
    idle = idle_warps_rows(rows, shape["N"], num_warps) if rows > 1 else idle_warps(shape["N"], num_warps)
    return (
        _split_prune_reason(config, shape, dtype)
        or _rows_prune_reason(config, shape)
        or idle
        or row_spills(shape["N"], num_warps)
    )


def _rows_prune_reason(config, shape: Shape) -> str | None:
    rows = int(config.get("rows", 1))
    if rows > 1 and config.get("aligned", 0):
        return f"rows={rows} with aligned=1: the split at 16-byte boundaries serves one row a program"
    return rows_unsupported(rows, shape["N"])


def _split_prune_reason(config, shape: Shape, dtype: torch.dtype) -> str | None:
    return _split_reason(shape, dtype) if config.get("aligned", 0) else None


# --- triton_persistent ---------------------------------------------------------------------------

# Persistent grid sizes swept, in programs per SM. At 4-8 warps a program, 8 of them fill the 64 warp
# slots of an sm_90 SM, so larger values could not all be resident.
PROGRAMS_PER_SM = (1, 2, 4, 8)


@triton.jit
def _persistent_softmax_kernel(
    out_ptr,
    in_ptr,
    n_rows,
    n_cols,
    in_row_stride,
    out_row_stride,
    BLOCK_SIZE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    USE_TL_RANGE: tl.constexpr,
    ALIGNED: tl.constexpr,
    VEC: tl.constexpr,
):
    """Program ``pid`` of a grid of ``G`` computes rows ``pid, pid + G, pid + 2G, ...``.

    ``in_ptr``/``out_ptr``: [n_rows, n_cols], unit column stride; ``ALIGNED`` as in ``_row_softmax_kernel``.
    """
    first_row = tl.program_id(0)
    n_programs = tl.num_programs(0)
    # 64-bit row offsets: row * stride passes 2^31 elements on multi-GB inputs.
    in_row_stride = tl.cast(in_row_stride, tl.int64)
    out_row_stride = tl.cast(out_row_stride, tl.int64)
    if USE_TL_RANGE:
        for row in tl.range(first_row, n_rows, n_programs, num_stages=NUM_STAGES):
            _softmax_one_row(
                out_ptr + row * out_row_stride, in_ptr + row * in_row_stride, n_cols, BLOCK_SIZE, ALIGNED, VEC, True
            )
    else:
        for row in range(first_row, n_rows, n_programs):
            _softmax_one_row(
                out_ptr + row * out_row_stride, in_ptr + row * in_row_stride, n_cols, BLOCK_SIZE, ALIGNED, VEC, True
            )


@triton.jit
def _softmax_one_row(
    out_row,
    in_row,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
    ALIGNED: tl.constexpr,
    VEC: tl.constexpr,
    KEEP_TAIL: tl.constexpr,
):
    if ALIGNED:
        _softmax_whole_row_aligned(out_row, in_row, n_cols, BLOCK_SIZE, VEC, KEEP_TAIL)
    else:
        _softmax_whole_row(out_row, in_row, n_cols, BLOCK_SIZE)


def persistent_grid(n_rows: int, programs_per_sm: int) -> int:
    """Number of programs: enough to give every SM ``programs_per_sm``, never more than one per row."""
    return rows_grid(n_rows, programs_per_sm, device_limits()["num_sms"])


def _prepare_persistent(inputs: Inputs, out: torch.Tensor, config) -> callable:
    x = inputs["x"]
    _check_rows(x, out)
    n_rows, n_cols = x.shape
    grid = (persistent_grid(n_rows, int(config["programs_per_sm"])),)
    num_stages, num_warps = int(config["num_stages"]), int(config["num_warps"])
    aligned = _aligned(x, out, config)
    vec = vec_elements(x.element_size())
    block = body_block(n_cols, vec) if aligned else triton.next_power_of_2(n_cols)

    def run() -> torch.Tensor:
        _persistent_softmax_kernel[grid](
            out,
            x,
            n_rows,
            n_cols,
            x.stride(0),
            out.stride(0),
            BLOCK_SIZE=block,
            NUM_STAGES=num_stages,
            USE_TL_RANGE=PIPELINED_RANGE,
            ALIGNED=aligned,
            VEC=vec_elements(x.element_size()),
            num_warps=num_warps,
        )
        return out

    return run


def _stage_bytes(shape: Shape, dtype: torch.dtype, num_stages: int) -> int:
    # A loop pipelined into k stages keeps the next k - 1 rows' loads in shared memory (cp.async); one
    # stage loads straight into registers. Checked on sm_90 builds (triton 3.7): shared memory is
    # (k - 1) * row bytes plus a few bytes of reduction scratch. cp.async copies 4-byte-aligned pieces,
    # so fp16/bf16 rows whose stride is not a multiple of 16 elements (N=2049) were not pipelined at all.
    return (num_stages - 1) * triton.next_power_of_2(shape["N"]) * element_size(dtype)


def _persistent_warps(shape: Shape) -> int:
    # The row kernel's default warps, so that persistent vs row compares the scheduling alone.
    return _row_default(shape, torch.float32)["num_warps"]


def _persistent_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # split at 16-byte boundaries wherever that applies (triton_row's sweep measures what it is worth)
    stages = (1, 2) if PIPELINED_RANGE else (1,)
    space = [
        {"programs_per_sm": p, "num_stages": s, "num_warps": _persistent_warps(shape)}
        for p in PROGRAMS_PER_SM
        for s in stages
    ]
    return _with_split(space, shape, dtype)


def _persistent_default(shape: Shape, dtype: torch.dtype) -> dict:
    # Half of an SM's 64 warp slots (32 // num_warps programs): enough loads in flight for a
    # memory-bound kernel while leaving registers to spare. Prefetch the next row (num_stages=2) only for
    # rows of 64-128 KB: in the H200 sweeps of three runs (session 9's G and H, session 10's J;
    # docs/kernel-notes.md) one stage was faster or tied on every shape with narrower rows (131072 x 512 by
    # 3-7 %, 8192 x 8192 by 1-4 %, the split rows of N = 1000 and 2049 by 2-9 %), and the prefetch paid only
    # on 1024 x 65536 16-bit rows (128 KB: 3-9 % faster, at fewer programs an SM than this default's). The
    # prefetch also needs every program's row buffer to fit in 128 KB of an SM's shared memory (sm_80 has
    # 164 KB, sm_90 228 KB), so that the whole grid stays resident.
    num_warps = _persistent_warps(shape)
    programs_per_sm = 32 // num_warps
    stage = _stage_bytes(shape, dtype, 2)
    prefetch = PIPELINED_RANGE and stage >= 64 * 1024 and programs_per_sm * stage <= 128 * 1024
    config = {"programs_per_sm": programs_per_sm, "num_stages": 2 if prefetch else 1, "num_warps": num_warps}
    return _with_split([config], shape, dtype)[0]


def _persistent_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    if reason := _split_prune_reason(config, shape, dtype):
        return reason
    smem = _stage_bytes(shape, dtype, int(config["num_stages"]))
    per_block = limits["max_shared_mem_per_block"]
    if smem > per_block:
        return (
            f"{config['num_stages']} stages of a {triton.next_power_of_2(shape['N'])}-wide row need {smem} B of "
            f"shared memory > {per_block} B"
        )
    programs = int(config["programs_per_sm"])
    if programs * smem > per_block:
        # An SM's shared memory is about one block's maximum (227 of 228 KB on sm_90).
        return (
            f"{programs} programs x {smem} B of row buffers exceed an SM's shared memory: the grid could "
            f"not all be resident, so it would run in waves instead of persisting"
        )
    return None


# --- triton_online -------------------------------------------------------------------------------

# Widest column block of the default config: 4096 fp32 values are 16 registers a thread at 8 warps.
MAX_DEFAULT_BLOCK_N = 4096
# ... and for wide rows (N >= WIDE_ROW): 16384 (64 values a thread), the sweep's best on the wide cases
# (docs/kernel-notes.md).
MAX_DEFAULT_BLOCK_N_WIDE = 16384


@triton.jit
def _online_block_stats(in_row, start, cols, n_cols, m, s, c, RESCALE_SUM: tl.constexpr, L2_HINTS: tl.constexpr):
    """Pass 1 over one block: fold columns ``start + cols`` into the running max ``m`` and sum ``s``.
    Adding one block sum after another loses up to half an ulp of s per block, which over a few hundred
    blocks passes the fp32 row-sum limit; Kahan's compensation ``c`` carries the lost low-order bits."""
    offsets = start + cols
    if L2_HINTS:
        x = tl.load(in_row + offsets, mask=offsets < n_cols, other=-float("inf"), eviction_policy="evict_last")
    else:
        x = tl.load(in_row + offsets, mask=offsets < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    m_new = tl.maximum(m, tl.max(x, axis=0))
    # While every column seen is -inf, m_new is -inf and x - m_new would be -inf - (-inf) = NaN,
    # where torch gives exp(-inf - finite max) = 0 once a finite value arrives. Shifting by 0 keeps
    # those terms (and the rescale of the zero sum) at exactly 0.
    shift = tl.where(m_new == -float("inf"), 0.0, m_new)
    block_sum = tl.sum(tl.exp(x - shift), axis=0)
    if RESCALE_SUM:
        alpha = tl.exp(m - shift)
        s = s * alpha
        c = c * alpha
    compensated = block_sum - c
    total = s + compensated
    c = (total - s) - compensated
    return m_new, total, c


@triton.jit
def _online_block_write(out_row, in_row, start, cols, n_cols, m, inv_s, L2_HINTS: tl.constexpr):
    """Pass 2 over one block: ``exp(x - m) / s`` for columns ``start + cols``."""
    offsets = start + cols
    mask = offsets < n_cols
    if L2_HINTS:
        x = tl.load(in_row + offsets, mask=mask, other=-float("inf"), eviction_policy="evict_first")
    else:
        x = tl.load(in_row + offsets, mask=mask, other=-float("inf"))
    y = (tl.exp(x.to(tl.float32) - m) * inv_s).to(out_row.dtype.element_ty)
    if L2_HINTS:
        tl.store(out_row + offsets, y, mask=mask, eviction_policy="evict_first")
    else:
        tl.store(out_row + offsets, y, mask=mask)


@triton.jit
def _online_softmax_row(
    out_row,
    in_row,
    n_cols,
    BLOCK_N: tl.constexpr,
    RESCALE_SUM: tl.constexpr,
    L2_HINTS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """Softmax of the ``n_cols`` contiguous elements at ``in_row``, ``BLOCK_N`` at a time, into ``out_row``.

    ``L2_HINTS``: the first pass loads with ``evict_last`` (keep the row in L2 for the second pass),
    the second pass loads and stores with ``evict_first`` (nothing reads them again), so the output
    stream does not push the row out of L2 before it is re-read. ``NUM_STAGES > 1`` pipelines both
    block loops (``tl.range``: the next block's load is in flight while this one is reduced), so that
    fewer programs, and fewer rows in flight, can still keep HBM busy."""
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    c = tl.full([], 0.0, tl.float32)
    if NUM_STAGES > 1:
        for start in tl.range(0, n_cols, BLOCK_N, num_stages=NUM_STAGES):
            m, s, c = _online_block_stats(in_row, start, cols, n_cols, m, s, c, RESCALE_SUM, L2_HINTS)
    else:
        for start in range(0, n_cols, BLOCK_N):
            m, s, c = _online_block_stats(in_row, start, cols, n_cols, m, s, c, RESCALE_SUM, L2_HINTS)
    # Pass 2, last block first (the first pass read it last, so it is the likeliest still in L2). A
    # fully -inf row keeps m = -inf, so x - m is NaN everywhere, as in torch. One reciprocal a row
    # instead of a division an element (one more fp32 rounding, far below the tolerances).
    inv_s = 1.0 / s
    n_blocks = tl.cdiv(n_cols, BLOCK_N)
    if NUM_STAGES > 1:
        for i in tl.range(0, n_blocks, num_stages=NUM_STAGES):
            _online_block_write(out_row, in_row, (n_blocks - 1 - i) * BLOCK_N, cols, n_cols, m, inv_s, L2_HINTS)
    else:
        for i in range(0, n_blocks):
            _online_block_write(out_row, in_row, (n_blocks - 1 - i) * BLOCK_N, cols, n_cols, m, inv_s, L2_HINTS)


@triton.jit
def _online_softmax_kernel(
    out_ptr,
    in_ptr,
    n_rows,
    n_cols,
    in_row_stride,
    out_row_stride,
    BLOCK_N: tl.constexpr,
    RESCALE_SUM: tl.constexpr,
    L2_HINTS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """Program ``pid`` of a grid of ``G`` computes rows ``pid, pid + G, ...`` of any width (``G = n_rows``:
    one row each).

    ``in_ptr``/``out_ptr``: [n_rows, n_cols], unit column stride. ``RESCALE_SUM`` is False only in the
    negative control ``online_no_rescale``. ``NUM_STAGES > 1`` needs ``tl.range`` with ``num_stages``
    (PIPELINED_RANGE); the configs offer it only where the installed Triton has it.
    """
    in_row_stride = tl.cast(in_row_stride, tl.int64)
    out_row_stride = tl.cast(out_row_stride, tl.int64)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        _online_softmax_row(
            out_ptr + row * out_row_stride,
            in_ptr + row * in_row_stride,
            n_cols,
            BLOCK_N,
            RESCALE_SUM,
            L2_HINTS,
            NUM_STAGES,
        )


def _launch_online(inputs: Inputs, out: torch.Tensor, config, rescale_sum: bool) -> callable:
    x = inputs["x"]
    _check_rows(x, out)
    n_rows, n_cols = x.shape
    block_n, num_warps = int(config["BLOCK_N"]), int(config["num_warps"])
    programs_per_sm = int(config.get("programs_per_sm", 0))
    l2_hints = bool(config.get("l2_hints", 0))
    num_stages = int(config.get("num_stages", 1))
    if num_stages > 1 and not PIPELINED_RANGE:
        raise ValueError(f"num_stages={num_stages} needs tl.range(..., num_stages=), which this Triton lacks")
    grid = (persistent_grid(n_rows, programs_per_sm),)

    def run() -> torch.Tensor:
        _online_softmax_kernel[grid](
            out,
            x,
            n_rows,
            n_cols,
            x.stride(0),
            out.stride(0),
            BLOCK_N=block_n,
            RESCALE_SUM=rescale_sum,
            L2_HINTS=l2_hints,
            NUM_STAGES=num_stages,
            num_warps=num_warps,
        )
        return out

    return run


def _prepare_online(inputs: Inputs, out: torch.Tensor, config) -> callable:
    return _launch_online(inputs, out, config, rescale_sum=True)


# Rows at least this wide get a persistent default grid: one program per row would put every row in
# flight at once (1024 rows of 64K fp16 = 128 MB, twice the H200's L2), so the second pass would
# re-read from HBM; two programs per SM keep 2 * 132 rows = 34 MB in flight, and the eviction hints
# (``l2_hints``) ask L2 to keep the row rather than the output stream.
WIDE_ROW = 32768


def _online_default(shape: Shape, dtype: torch.dtype) -> dict:
    # A quarter of the padded row, capped at MAX_DEFAULT_BLOCK_N (MAX_DEFAULT_BLOCK_N_WIDE for wide rows):
    # narrow rows still loop over ~4 blocks (so the default is an online softmax on every shape, and the
    # CPU shapes test the rescale and the tail block). At most 8 warps.
    wide = shape["N"] >= WIDE_ROW
    cap = MAX_DEFAULT_BLOCK_N_WIDE if wide else MAX_DEFAULT_BLOCK_N
    block_n = max(1, min(cap, triton.next_power_of_2(shape["N"]) // 4))
    # persistent only where it bounds the rows in flight: with M <= 2 * num_sms rows the grid would be
    # one program per row anyway (and the sweep prunes that duplicate launch)
    persistent = wide and persistent_grid(shape["M"], 2) < shape["M"]
    return {
        "BLOCK_N": block_n,
        "num_warps": min(8, max(1, block_n // 512)),
        "programs_per_sm": 2 if persistent else 0,
        "l2_hints": int(wide),
    }


def _online_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # Listed most promising first (a session's max_configs keeps a prefix): wide rows try wide blocks on
    # persistent grids of 1-4 programs an SM, then one program per row; narrow rows the reverse.
    if shape["N"] >= WIDE_ROW:
        # 2 programs an SM with the eviction hints and one program per row first (the sweep's best on the
        # wide cases, docs/kernel-notes.md); 1 program an SM keeps the fewest rows in flight (the second pass
        # likeliest to hit L2) but a program loads, reduces, then loads again. The pipelined loops
        # (num_stages > 1) test whether that program can keep HBM busy once its next load is in flight.
        space = [{"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": p, "l2_hints": 1} for p in (2, 0)]
        if PIPELINED_RANGE:
            space += [
                {"BLOCK_N": b, "num_warps": 8, "programs_per_sm": p, "l2_hints": 1, "num_stages": k}
                for b, p, k in ((16384, 1, 2), (16384, 2, 2), (8192, 1, 3), (16384, 0, 2))
            ]
        space += [{"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": p, "l2_hints": h} for p, h in ((0, 0), (4, 1))]
    else:
        space = [{"BLOCK_N": b, "num_warps": 8, "programs_per_sm": 0} for b in (16384, 4096)]
        space += [{"BLOCK_N": 4096, "num_warps": 8, "programs_per_sm": 2}]
        space += [{"BLOCK_N": b, "num_warps": 4, "programs_per_sm": 0} for b in (1024, 4096)]
    default = _online_default(shape, dtype)
    return space if default in space else [default, *space]


def _online_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    block_n, threads = int(config["BLOCK_N"]), 32 * int(config["num_warps"])
    if block_n > triton.next_power_of_2(shape["N"]):
        return f"BLOCK_N={block_n} is wider than the padded row ({triton.next_power_of_2(shape['N'])})"
    if block_n // threads > 64:
        return f"{block_n // threads} fp32 values a thread for x and exp(x): registers spill"
    programs_per_sm = int(config.get("programs_per_sm", 0))
    stages = int(config.get("num_stages", 1))
    # a pipelined loop keeps the next stages - 1 blocks in shared memory (as _stage_bytes for rows)
    smem = (stages - 1) * block_n * element_size(dtype)
    # (an SM's shared memory is about one block's maximum, as in _persistent_prune)
    if max(1, programs_per_sm) * smem > limits["max_shared_mem_per_block"]:
        return (
            f"{stages} stages of {block_n}-wide blocks need {smem} B of shared memory a program, x "
            f"{max(1, programs_per_sm)} programs an SM: more than an SM has"
        )
    if programs_per_sm > 1 and persistent_grid(shape["M"], programs_per_sm) == shape["M"]:
        return (
            f"programs_per_sm={programs_per_sm} gives a grid of all {shape['M']} rows: the same launch as a "
            f"smaller programs_per_sm or one program per row"
        )
    return None


# --- triton_split --------------------------------------------------------------------------------
# The team machinery (barrier, partials, grid sizing) is kernelscope.teams, shared with layernorm.


@triton.jit
def _segment_stats(in_row, segment, offsets, n_cols, CHUNK: tl.constexpr, BLOCKS: tl.constexpr):
    """Pass 1 over a segment of ``BLOCKS`` chunks from column ``segment``: its max and sum of exponentials."""
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    c = tl.full([], 0.0, tl.float32)
    for b in range(0, BLOCKS):
        m, s, c = _online_block_stats(in_row, segment + b * CHUNK, offsets, n_cols, m, s, c, True, True)
    return m, s


@triton.jit
def _segment_write(out_row, in_row, segment, offsets, n_cols, m_row, inv_s, CHUNK: tl.constexpr, BLOCKS: tl.constexpr):
    """Pass 2 over the segment, last chunk first (pass 1 read it last, so it is the likeliest still in L2)."""
    for i in range(0, BLOCKS):
        _online_block_write(out_row, in_row, segment + (BLOCKS - 1 - i) * CHUNK, offsets, n_cols, m_row, inv_s, True)


@triton.jit
def _team_max_sum(stats_ptr, row, split, SPLIT_BLOCK: tl.constexpr):
    """The row's max and sum of exponentials from its team's partials (the online rescale,
    ``S = sum_j s_j exp(m_j - M)``)."""
    m_parts, s_parts = team_partials(stats_ptr, row, split, -float("inf"), 0.0, SPLIT_BLOCK)
    m_row = tl.max(m_parts, axis=0)
    s_row = tl.sum(s_parts * tl.exp(m_parts - tl.where(m_row == -float("inf"), 0.0, m_row)), axis=0)
    return m_row, s_row


@triton.jit
def _split_softmax_kernel(
    out_ptr,
    in_ptr,
    stats_ptr,
    arrived_ptr,
    n_rows,
    n_cols,
    split,
    in_row_stride,
    out_row_stride,
    CHUNK: tl.constexpr,
    SPLIT_BLOCK: tl.constexpr,
    PHASE: tl.constexpr,
    MAX_SPINS: tl.constexpr,
    BLOCKS: tl.constexpr = 1,
    OVERLAP: tl.constexpr = False,
    LOCAL_STATS: tl.constexpr = False,
):
    """A team of ``split`` consecutive programs computes one row at a time (``kernelscope.teams``); program
    ``part`` owns the segment of ``BLOCKS * CHUNK`` columns from ``part * BLOCKS * CHUNK``. Teams loop over
    rows ``team, team + n_teams, ...``.

    ``BLOCKS == 1``: the program holds its chunk in registers from its load to its store, so ``x`` is read
    once and ``y`` written once (2 MN elements of traffic, where ``triton_online`` moves 3 MN unless its
    second read hits L2). ``BLOCKS > 1``: the segment is too wide for registers, so the program makes
    ``triton_online``'s two passes over it (``_online_block_stats``, ``_online_block_write``, with the L2
    hints), and the second pass re-reads it from L2. What the team buys is the rows in flight: ``split``
    programs share a row, so a grid of G programs keeps G / split rows in L2 between the passes where
    ``triton_online`` keeps G (at 256 x 262144 that is every row, twice the L2, and its second pass reads
    from HBM).

    Per row, each program publishes the max ``m`` and ``sum(exp(x - m))`` of its segment, waits for its
    team, combines the partials and writes its segment. ``OVERLAP`` (segments only): a program publishes
    its next row's partials before it waits for this row's team, so pass 1 of one row covers the wait for the
    last; two rows a team are then in L2 between their passes. ``LOCAL_STATS`` is True only in the negative
    control ``split_local_stats``: each program normalises by its own segment's max and sum, as if the
    exchange were missing.
    """
    pid = tl.program_id(0)
    team = pid // split
    part = pid % split
    n_teams = tl.num_programs(0) // split
    in_row_stride = tl.cast(in_row_stride, tl.int64)
    out_row_stride = tl.cast(out_row_stride, tl.int64)
    offsets = tl.arange(0, CHUNK)
    cols = part * CHUNK + offsets
    mask = cols < n_cols
    segment = part * (BLOCKS * CHUNK)
    if OVERLAP:
        # iteration k publishes row k (while there is one) and finishes row k - 1 (from the second on)
        m_prev = tl.full([], -float("inf"), tl.float32)
        s_prev = tl.full([], 0.0, tl.float32)
        for row in range(team, n_rows + n_teams, n_teams):
            m = tl.full([], -float("inf"), tl.float32)
            s = tl.full([], 0.0, tl.float32)
            if row < n_rows:
                if (PHASE != 2) | LOCAL_STATS:
                    m, s = _segment_stats(in_ptr + row * in_row_stride, segment, offsets, n_cols, CHUNK, BLOCKS)
                if PHASE != 2:
                    team_publish(stats_ptr, arrived_ptr, row, part, m, s, SPLIT_BLOCK)
            prev = row - n_teams
            if prev >= team:
                if PHASE == 0:
                    team_wait(arrived_ptr, prev, split, tl.full([], 0, tl.int32), MAX_SPINS)
                if PHASE != 1:
                    m_row, s_row = _team_max_sum(stats_ptr, prev, split, SPLIT_BLOCK)
                    if LOCAL_STATS:
                        m_row = m_prev
                        s_row = s_prev
                    # a fully -inf row keeps m_row = -inf: x - m_row is NaN everywhere, as in torch
                    in_row = in_ptr + prev * in_row_stride
                    out_row = out_ptr + prev * out_row_stride
                    _segment_write(out_row, in_row, segment, offsets, n_cols, m_row, 1.0 / s_row, CHUNK, BLOCKS)
                    team_release(stats_ptr, arrived_ptr, prev, split, SPLIT_BLOCK)
            m_prev = m
            s_prev = s
    else:
        for row in range(team, n_rows, n_teams):
            in_row = in_ptr + row * in_row_stride
            out_row = out_ptr + row * out_row_stride
            if BLOCKS == 1:
                x = tl.load(in_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
                m = tl.max(x, axis=0)
                # an all -inf chunk (or one past the row's end) has m = -inf: shift by 0 so its sum is 0, not NaN
                s = tl.sum(tl.exp(x - tl.where(m == -float("inf"), 0.0, m)), axis=0)
            else:
                m = tl.full([], -float("inf"), tl.float32)
                s = tl.full([], 0.0, tl.float32)
                # pass 1 (the interpreter's PHASE 2 only combines, except in the control, which needs its own)
                if (PHASE != 2) | LOCAL_STATS:
                    m, s = _segment_stats(in_row, segment, offsets, n_cols, CHUNK, BLOCKS)
            if PHASE != 2:
                arrived = team_publish(stats_ptr, arrived_ptr, row, part, m, s, SPLIT_BLOCK)
            if PHASE == 0:
                team_wait(arrived_ptr, row, split, arrived, MAX_SPINS)
            if PHASE != 1:
                m_row, s_row = _team_max_sum(stats_ptr, row, split, SPLIT_BLOCK)
                if LOCAL_STATS:
                    m_row = m
                    s_row = s
                # a fully -inf row keeps m_row = -inf: x - m_row is NaN everywhere, as in torch
                inv_s = 1.0 / s_row
                if BLOCKS == 1:
                    y = tl.exp(x - m_row) * inv_s
                    tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
                else:
                    _segment_write(out_row, in_row, segment, offsets, n_cols, m_row, inv_s, CHUNK, BLOCKS)
                team_release(stats_ptr, arrived_ptr, row, split, SPLIT_BLOCK)


def _prepare_split(
    inputs: Inputs, out: torch.Tensor, config, max_spins: int = MAX_SPINS, local_stats: bool = False
) -> callable:
    x = inputs["x"]
    _check_rows(x, out)
    n_rows, n_cols = x.shape
    chunk, num_warps, blocks = int(config["CHUNK"]), int(config["num_warps"]), int(config.get("BLOCKS", 1))
    split = split_parts(n_cols, chunk * blocks)
    split_block = triton.next_power_of_2(split)
    limits = device_limits()
    work = SplitWorkspace(n_rows, split_block, x.device)
    meta = {
        "CHUNK": chunk,
        "SPLIT_BLOCK": split_block,
        "MAX_SPINS": max_spins,
        "num_warps": num_warps,
    }
    if blocks > 1:  # the register path's launch (and its compiled kernel) stays as it was without the keys
        meta["BLOCKS"] = blocks
        if int(config.get("overlap", 0)):
            meta["OVERLAP"] = True
    elif int(config.get("overlap", 0)):
        raise ValueError("overlap=1 needs segments (BLOCKS > 1): a chunk held in registers has nothing to overlap")
    if local_stats:
        meta["LOCAL_STATS"] = True
    args = (out, x, work.stats, work.arrived, n_rows, n_cols, split, x.stride(0), out.stride(0))
    programs_per_sm = int(config["programs_per_sm"])
    return prepare_team_launch(_split_softmax_kernel, args, meta, n_rows, split, programs_per_sm, limits, work, out)


# Narrowest row triton_split is run on: narrower rows fit one program's registers (triton_row), and the
# per-row barrier makes the split kernel much slower than triton_row there (docs/kernel-notes.md). Below
# this it is a cost without a question to answer; the kernel itself works at any width (the tests lower
# this bound).
SPLIT_MIN_N = 16384


def _split_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    if shape["N"] < SPLIT_MIN_N:
        return (
            f"N={shape['N']} < {SPLIT_MIN_N}: the row fits one program (triton_row), and a team barrier a "
            f"row only adds latency"
        )
    return None


def _split_default(shape: Shape, dtype: torch.dtype) -> dict:
    return team_default(shape["N"])


# Segments of several blocks a program (``BLOCKS > 1``: two passes over the segment, the second from L2), for
# rows at least WIDE_ROW wide. The blocks are triton_online's widest (16384 on 8 warps: two programs an SM) and
# half that (four an SM); segments of 2 and 4 blocks make teams of 2-16 programs at the GPU shapes, so at two
# programs an SM a grid keeps 264 / split rows between its passes: 16-33 MB of the 256 x 262144 case in 16 bits,
# where triton_online keeps all 256 rows (128 MB). ``overlap=1`` publishes the next row before waiting for the
# team (twice the rows in L2). Session 20's H100 sweep (docs/kernel-notes.md) put the 2-block segments first.
SEGMENT_SPACE = (
    {"CHUNK": 8192, "num_warps": 8, "programs_per_sm": 4, "BLOCKS": 2, "overlap": 1},
    {"CHUNK": 8192, "num_warps": 8, "programs_per_sm": 4, "BLOCKS": 2},
    {"CHUNK": 16384, "num_warps": 8, "programs_per_sm": 2, "BLOCKS": 2, "overlap": 1},
    {"CHUNK": 4096, "num_warps": 4, "programs_per_sm": 8, "BLOCKS": 4, "overlap": 1},
    {"CHUNK": 8192, "num_warps": 8, "programs_per_sm": 4, "BLOCKS": 4, "overlap": 1},
)
# The register configs kept beside them on wide rows: the default and the two within 5 % of the fastest in some
# dtype (4096 on 4 warps, 32768 on 16) in the session-14 and session-20 sweeps; the other three were 1.3-1.7x
# the fastest in every dtype.
WIDE_TEAM_SPACE = (
    {"CHUNK": 4096, "num_warps": 4, "programs_per_sm": 8},
    {"CHUNK": 32768, "num_warps": 16, "programs_per_sm": 1},
)


def _split_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    if shape["N"] < WIDE_ROW:
        return team_configs(shape["N"])
    return [_split_default(shape, dtype), *(dict(c) for c in SEGMENT_SPACE), *(dict(c) for c in WIDE_TEAM_SPACE)]


def _split_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    return team_prune(config, shape["N"], limits)


def _local_stats_config(shape: Shape, dtype: torch.dtype) -> dict:
    # Segments of two blocks, an eighth of the padded row (at least 2 columns): every gate shape, N = 5 included,
    # splits into teams of 3 or more, so no segment's max and sum are the row's, and the segment path (BLOCKS > 1)
    # is the one checked.
    chunk = max(1, triton.next_power_of_2(shape["N"]) // 16)
    return {"CHUNK": chunk, "num_warps": min(8, max(1, chunk // 1024)), "programs_per_sm": 4, "BLOCKS": 2}


def _prepare_gluon_smem(inputs: Inputs, out: torch.Tensor, config, skip_last_chunk_in_sum: bool = False):
    x = inputs["x"]
    _check_rows(x, out)
    config = gluon_smem.checked_config(x, out, config, "softmax")
    return gluon_smem.launch(x, out, config, device_limits(), skip_last_chunk_in_sum=skip_last_chunk_in_sum)


def _gluon_smem_sum_skips_a_slot(inputs: Inputs, out, config):
    """Negative control: gluon_smem whose sum leaves out each part's last slot (the max still sees it)."""
    # slots of 16 box rows (the second config): two or more a part from N = 8192 on, so there is a last one
    x = inputs["x"]
    config = gluon_smem.default_for("softmax", control=True)(
        Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control"), x.dtype
    )
    return _prepare_gluon_smem(inputs, out, config, skip_last_chunk_in_sum=True)


def _split_local_stats(inputs: Inputs, out, config):
    """Negative control: triton_split in segments, each program normalising by its own segment's max and sum."""
    x = inputs["x"]
    config = _local_stats_config(Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control"), x.dtype)
    return _prepare_split(inputs, out, config, local_stats=True)


def _online_no_rescale(inputs: Inputs, out, config):
    """Negative control: triton_online at its default config, but the running sum is not rescaled when
    the max grows, so every block before the last new max is overcounted by exp(m_new - m_old)."""
    x = inputs["x"]
    shape = Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control")
    return _launch_online(inputs, out, config or _online_default(shape, x.dtype), rescale_sum=False)


def _rows_control_config(shape: Shape, dtype: torch.dtype) -> dict:
    """The config of ``rows_reduce_axis0``: triton_row's default where it takes several rows, else 2 rows at the
    default's warps for each, so that the control runs (and must be rejected) on every case."""
    default = _row_default(shape, dtype)
    if int(default.get("rows", 1)) > 1:
        return default
    return {"num_warps": min(32, 2 * int(default["num_warps"])), "rows": 2}


def _rows_reduce_axis0(inputs: Inputs, out, config):
    """Negative control: triton_row with several rows a program whose max and sum are taken over axis 0 (down
    each column, across the program's rows) instead of along each row."""
    x = inputs["x"]
    shape = Shape({"M": x.shape[0], "N": x.shape[1], "stride": x.stride(0)}, "negative control")
    return _prepare_row(inputs, out, config or _rows_control_config(shape, x.dtype), reduce_axis=0)


def _torch_eager(inputs: Inputs, out, config):
    x = inputs["x"]
    return lambda: _softmax_last_dim(x)


def _softmax_last_dim(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _torch_compile(inputs: Inputs, out, config):
    return compiled(_softmax_last_dim, inputs["x"])


def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    """Logits in three regimes, chosen by ``seed % 3`` so several seeds cover all of them:

    0: N(0, 1); 1: N(0, 4^2) + 100 (large offset: exp without the max shift overflows fp32);
    2: N(0, 30^2) (wide spread: many probabilities underflow, one dominates).
    A ``stride`` shape parameter > N makes the rows non-contiguous (a view into a wider buffer).
    """
    g = generator(seed, device)
    regime = seed % 3
    scale, shift = [(1.0, 0.0), (4.0, 100.0), (30.0, 0.0)][regime]
    n_rows, n_cols = shape["M"], shape["N"]
    row_stride = shape.params.get("stride", n_cols)
    buffer = randn((n_rows, row_stride), dtype, g, scale=scale, shift=shift)
    return {"x": buffer[:, :n_cols]}


def make_output(inputs: Inputs) -> torch.Tensor:
    return torch.empty_like(inputs["x"], memory_format=torch.contiguous_format)


def reference(inputs: Inputs) -> torch.Tensor:
    x = inputs["x"].to(torch.float64)
    return torch.softmax(x, dim=-1)


def _row_sum_error(out: torch.Tensor, inputs: Inputs) -> float:
    return float((out.to(torch.float64).sum(dim=-1) - 1.0).abs().max())


def _row_sum_limit(dtype: torch.dtype, inputs: Inputs) -> float:
    # Storing: each probability carries up to half an ulp of relative error, so the row sum is off by at
    # most ~eps/2 summed over the row's mass (which is 1): eps of the stored dtype, with margin 4x.
    # Computing: the fp32 normaliser is a sum of N terms, which a tree reduction gets to within
    # ceil(log2 N) half-ulps (eps32 / 2 each), and dividing by it adds one more: eps32 * ceil(log2 N),
    # doubled. At N=16500 torch's own CPU softmax misses the first term alone (1.3e-6 > 4.8e-7, fp32).
    n_cols = max(2, inputs["x"].shape[-1])
    return 4 * torch.finfo(dtype).eps + 2 * math.ceil(math.log2(n_cols)) * torch.finfo(torch.float32).eps


def _naive_no_max(inputs: Inputs, out, config):
    """Negative control: exp(x) / sum(exp(x)) without subtracting the row max (overflows on large x)."""
    x = inputs["x"]

    def run():
        e = torch.exp(x.float())
        return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)

    return run


def _flops(shape: Shape) -> float:
    # per element: subtract max, exp, add to sum, divide (max and compare not counted)
    return 4.0 * shape["M"] * shape["N"]


def _bytes(shape: Shape, dtype: torch.dtype) -> float:
    # read M*N elements; write M*N elements
    return 2.0 * shape["M"] * shape["N"] * element_size(dtype)


KERNEL = KernelSpec(
    name="softmax",
    description="Row-wise stable softmax over the last dimension of an M x N matrix.",
    make_inputs=make_inputs,
    make_output=make_output,
    reference=reference,
    implementations=[
        Implementation(
            "triton_row",
            "triton",
            _prepare_row,
            description="one program per row (or per `rows` rows as one 2-D block), whole row in one block (seed 000)",
            configs=_row_configs,
            default_config=_row_default,
            prune=_row_prune,
            supports=_row_supports,
        ),
        Implementation(
            "triton_persistent",
            "triton",
            _prepare_persistent,
            description="min(M, num_sms x programs_per_sm) programs, each looping over rows with a whole-row block",
            configs=_persistent_configs,
            default_config=_persistent_default,
            prune=_persistent_prune,
            supports=_row_supports,
        ),
        Implementation(
            "triton_online",
            "triton",
            _prepare_online,
            description="one program per row, online max/sum over BLOCK_N-wide column blocks, then "
            "a second pass that writes; any row width",
            configs=_online_configs,
            default_config=_online_default,
            prune=_online_prune,
        ),
        Implementation(
            "triton_split",
            "triton",
            _prepare_split,
            description="a team of cdiv(N, CHUNK x BLOCKS) programs a row, each holding its chunk in registers "
            "(BLOCKS = 1) or making two passes over a segment of BLOCKS chunks, the second from L2; partial "
            "max/sum exchanged through global memory behind an atomic barrier, so x is read from HBM once "
            "however wide the row",
            configs=_split_configs,
            default_config=_split_default,
            prune=_split_prune,
            supports=_split_supports,
        ),
        Implementation(
            "gluon_smem",
            "triton",
            _prepare_gluon_smem,
            description="Hopper, in Gluon: persistent programs each holding a row, or its part of a row split over a "
            "team of up to 16, in shared memory, filled by TMA; each box row's online max and sum as the slots "
            "land, the parts' exchanged through global memory, the next row's loads in flight while this row is "
            "stored; read from HBM once (N a multiple of 256, N >= 8192; GPU only)",
            configs=gluon_smem.configs_for("softmax"),
            default_config=gluon_smem.default_for("softmax"),
            prune=gluon_smem.prune,
            supports=gluon_smem.supports,
        ),
        Implementation("torch", "eager", _torch_eager, description="torch.softmax (ATen)", writes_out=False),
        Implementation(
            "torch_compile",
            "compile",
            _torch_compile,
            description="torch.compile(torch.softmax), Inductor-generated Triton",
            writes_out=False,
        ),
    ],
    targets=[
        Target(
            "triton_row",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="a row that fits one program is read once and written once: near copy bandwidth once the "
            "problem is DRAM-bound, at every width it takes and in every dtype (issue 24's goal); odd and other "
            "rows Triton cannot prove aligned split at 16-byte boundaries (aligned=1), so 16-bit rows load at "
            "full width",
        ),
        Target(
            "triton_row",
            "speedup",
            1.0,
            baseline="torch",
            reason="the whole-row kernel should never be slower than torch.softmax where it runs",
        ),
        Target(
            "triton_online",
            "pct_copy_bw",
            70,
            shapes={"N": (65536, None)},
            reason="rows too wide for one program: the online kernel reads each row twice, so below copy "
            "bandwidth, but most of it while the second read hits L2",
        ),
        Target(
            "gluon_smem",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="issue 24's goal for every softmax moving 64 MB or more, for the design triton.language does not "
            "express: the row resident in shared memory, read from HBM once, with TMA's bytes in flight",
        ),
        Target(
            "triton_split",
            "pct_copy_bw",
            85,
            shapes={"N": (65536, None)},
            min_bytes=64e6,
            reason="rows too wide for one program, read from HBM once by a team of programs that exchange their "
            "partial statistics (from registers, or in segments whose second pass hits L2): the minimal traffic, "
            "so near copy bandwidth as for rows that fit one program (issue 24's goal for every softmax moving "
            "64 MB or more)",
        ),
    ],
    negative_controls=[
        Implementation(
            "gluon_smem_sum_skips_a_slot",
            "triton",
            _gluon_smem_sum_skips_a_slot,
            configs=lambda shape, dtype: [gluon_smem.default_for("softmax", control=True)(shape, dtype)],
            default_config=gluon_smem.default_for("softmax", control=True),
            supports=gluon_smem.supports,
            description="gluon_smem whose sum leaves out each part's last shared-memory slot",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "naive_no_max",
            "eager",
            _naive_no_max,
            writes_out=False,
            description="skips the max subtraction: exp overflows on large logits",
            rejected_for="non-finite outputs where the reference is finite",  # exp overflows on large logits
        ),
        no_tail_control(_prepare_row, _one_row_default),
        Implementation(
            "online_no_rescale",
            "triton",
            _online_no_rescale,
            configs=lambda shape, dtype: [_online_default(shape, dtype)],
            default_config=_online_default,
            description="triton_online without rescaling the running sum when the max grows",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "split_local_stats",
            "triton",
            _split_local_stats,
            configs=lambda shape, dtype: [_local_stats_config(shape, dtype)],
            default_config=_local_stats_config,
            description="triton_split in segments of two blocks, each program normalising by its own segment's "
            "max and sum (the exchange skipped): right only if every segment held the row's max and mass",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "rows_reduce_axis0",
            "triton",
            _rows_reduce_axis0,
            configs=lambda shape, dtype: [_rows_control_config(shape, dtype)],
            default_config=_rows_control_config,
            description="triton_row with several rows a program, its max and sum over axis 0 (across rows)",
            rejected_for="elements outside atol",
        ),
    ],
    tolerances={
        torch.float16: Tolerance(
            2e-6,
            1e-3,
            "fp32 math, one rounding to fp16 on store (2^-11 relative) plus "
            "tl.exp's approximation; atol covers fp16 subnormals",
        ),
        torch.bfloat16: Tolerance(
            2e-6, 8e-3, "fp32 math, one rounding to bf16 on store (2^-8 relative) with 2x margin"
        ),
        torch.float32: Tolerance(
            1e-7,
            2e-5,
            "fp32 math; exp via ex2.approx loses ~|x|*2^-23 relative for "
            "large |x - max|, the sum reorders N terms, and the online "
            "variant rescales it once per new block max",
        ),
    },
    flops=_flops,
    bytes_moved=_bytes,
    invariants=[
        Invariant(
            "row_sum_error",
            _row_sum_error,
            _row_sum_limit,
            "every row of probabilities sums to 1",
            # an output at the fp32 tolerance's edge everywhere sums far from 1; the fp16/bf16 limits let it through
            tighter_than_tolerance=(torch.float32,),
        )
    ],
    shape_sets={
        "cpu": [
            shape_entry("the seed's worked example: N=5, three masked lanes", M=3, N=5),
            shape_entry(
                "non-power-of-two row with strided rows (row stride 80 > N); 33 rows > the interpreter's "
                "4 SMs x programs_per_sm, so persistent programs loop over several rows; rows that move under "
                "2 KB and cannot split, so triton_row's default takes 16 rows a program (8 in fp32) and its last "
                "program holds one",
                M=33,
                N=70,
                stride=80,
            ),
            shape_entry("one more than a block: 129 pads to 256", M=16, N=129),
            shape_entry("online loop: the default BLOCK_N=128 gives blocks of 128, 128 and a 44-wide tail", M=3, N=300),
            shape_entry(
                "a row wide enough for triton_split: teams of 3 programs (8192, 8192 and a 116-wide tail), "
                "and 5 online blocks of 4096 with a 116-wide tail",
                M=3,
                N=16500,
            ),
        ],
        # The HBM-bound shapes hold M*N = 2^26 elements (268 MB of traffic at fp16) with N from 512 to
        # 262144, so the same bytes move through short rows (persistent vs row) and wide rows (online).
        "gpu": [
            shape_entry("the seed's experiment: [4096, 1000], 2.4% masked lanes", M=4096, N=1000),
            shape_entry("launch-bound: a few small rows", M=64, N=1024),
            shape_entry(
                "HBM-bound with many short rows (2^26 elements): 131072 one-KB rows, where a persistent grid "
                "amortises per-program launch and prefetches the next row",
                M=131072,
                N=512,
            ),
            shape_entry("HBM-bound, 2^26 elements (8192 x 8192): the row grid already fills the GPU", M=8192, N=8192),
            shape_entry("non-power-of-two N just above a block (2049 pads to 4096)", M=16384, N=2049),
            shape_entry(
                "wide rows, 2^26 elements: the largest row triton_row accepts (register pressure of one block) "
                "against triton_online",
                M=1024,
                N=65536,
            ),
            shape_entry(
                "rows too wide for one block, 2^26 elements: only triton_online; 256 programs underfill 132 SMs",
                M=256,
                N=262144,
            ),
        ],
    },
)
