"""LayerNorm forward over the last dimension of an [M, N] matrix, with weight and bias of shape [N]:

``y = (x - mean) / sqrt(var + eps) * weight + bias``, eps = 1e-5, biased variance, statistics in fp32.

Variants:

* ``triton_row`` — one program per row, ``BLOCK_N = next_power_of_2(N)`` (with ``aligned=1`` the body's
  block, ``heuristics.body_block``: 4096 for N = 4097, not 8192): the row is loaded once and
  stays in registers; the mean is reduced first, then the variance of the *centred* values (two
  reductions over registers, not E[x^2] - E[x]^2, which cancels catastrophically when
  |mean| >> std). Only the number of warps is tuned.
* ``triton_looped`` — one program per row, walking the row in ``BLOCK_N``-wide chunks three times
  (sum; sum of squared deviations; normalise and store), as Triton's tutorial 05 does. Rows of any
  width fit; the second and third passes re-read the row, mostly from L2.
* ``triton_online`` — programs over rows of any width (persistent, a few an SM, on wide rows), two passes of
  ``BLOCK_N``-wide chunks: the first reads x once and combines the chunks' means and M2 exactly (Chan et al.),
  the second re-reads x, last chunk first and mostly from L2, and writes y. softmax's triton_online, for layernorm.
* ``triton_split`` — rows of N >= SPLIT_MIN_N: a team of programs a row (``kernelscope.teams``), each holding a
  ``CHUNK`` of x in registers; the chunks' means and M2 are exchanged through global memory and combined exactly
  (Chan et al.), so x is read once. On an H200 the exchange limits it (docs/kernel-notes.md, session 14).
* ``triton_persistent`` — rows Triton cannot prove aligned (odd N): persistent programs, each walking the rows
  of one alignment class (rows ``period`` apart start at the same offset from a 16-byte boundary), so weight and
  bias are loaded once into registers at that class's columns and every row's x and y move 16 bytes at a time.
* ``triton_staged`` — the same rows, one program a row: a first launch writes each class's weight and bias
  shifted to its body columns into a small workspace, which every row then reads 16 bytes at a time, so the
  registers hold the row alone.

* ``gluon_smem`` — Hopper only, in Gluon (``kernels/_rows_gluon.py``, shared with softmax): a persistent program
  holds a row, or its part of a row split over a team, in shared memory, filled by TMA slot by slot; as the slots
  land, each box row's mean and sum of squared deviations (exact two-pass over the box row in registers, merged
  slot by slot), the parts' exchanged through global memory; then the affine step slot by slot while each slot's
  refill with the next row is in flight. x is read from HBM once. Contiguous rows, N a multiple of 256 and at
  least 8192; GPU only (the tests build it offline).

Invariants: ``xhat = (y - bias) / weight`` (weight is drawn in [0.5, 1.5], so the division is well
conditioned) must have, per row, mean 0 and variance var / (var + eps).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels import _rows_gluon as gluon_smem
from kernelscope.baselines import compiled
from kernelscope.heuristics import (
    ALIGN_BYTES,
    PIPELINED_RANGE,
    body_block,
    check_split,
    idle_warps,
    no_tail_control,
    row_split,
    rows_grid,
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
    launch_resident,
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

EPS = 1e-5
# Largest row the one-program-per-row kernel accepts: the whole row lives in registers.
MAX_ROW_BLOCK = 65536
ROW_MAX_PER_THREAD = 128
LOOP_BLOCK_NS = (1024, 4096)
LOOP_NUM_WARPS = (4, 8)


@triton.jit
def _layernorm_row_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    N,
    stride_xm,
    stride_om,
    eps,
    BLOCK_N: tl.constexpr,
    ALIGNED: tl.constexpr = False,
    VEC: tl.constexpr = 1,
    KEEP_TAIL: tl.constexpr = True,
):
    """One program normalises one row held whole in registers.

    ``x_ptr``: [M, N], row stride ``stride_xm``, unit column stride; ``out_ptr``: [M, N], row stride
    ``stride_om``; ``w_ptr``, ``b_ptr``: [N], contiguous. ``ALIGNED``: every x row and its output row lie at
    the same offset from a 16-byte boundary (the launcher checks), and the row is split there
    (``_layernorm_row_aligned``).
    """
    row = tl.program_id(0).to(tl.int64)
    x_row, out_row = x_ptr + row * stride_xm, out_ptr + row * stride_om
    if ALIGNED:
        _layernorm_row_aligned(out_row, x_row, w_ptr, b_ptr, N, eps, BLOCK_N, VEC, KEEP_TAIL)
    else:
        cols = tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        # Masked lanes must not contribute (mean - 0)^2 to the variance.
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / N
        rstd = tl.rsqrt(var + eps)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        y = xc * rstd * w + b
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm_row_aligned(
    out_row,
    x_row,
    w_ptr,
    b_ptr,
    N,
    eps,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    KEEP_TAIL: tl.constexpr,
):
    """The row kernel's arithmetic on a row split at its first 16-byte boundary (``row_split``): the head and
    the tail (fewer than ``VEC`` elements each) lane by lane, the body of x and of the output 16 bytes at a
    time. weight and bias are read at the body's columns, which start on a boundary only when the row does:
    those loads stay lane by lane, but they are the same ``2N`` elements for every row, so they come from
    cache, not HBM. ``KEEP_TAIL`` is False only in the negative control ``aligned_no_tail``."""
    head, body = row_split(x_row, N, VEC)
    tail_start = head + body
    edge = tl.arange(0, VEC)
    cols = tl.arange(0, BLOCK_N)
    head_mask = edge < head
    body_mask = cols < body
    tail_mask = edge < (N - tail_start if KEEP_TAIL else 0)
    xc_head, xc_body, xc_tail, rstd = _split_row_stats(
        x_row, N, eps, head, tail_start, edge, cols, head_mask, body_mask, tail_mask
    )
    dtype = out_row.dtype.element_ty
    _affine_store(out_row, xc_head, rstd, w_ptr, b_ptr, 0, edge, head_mask, dtype)
    _affine_store(tl.multiple_of(out_row + head, 16), xc_body, rstd, w_ptr, b_ptr, head, cols, body_mask, dtype)
    _affine_store(out_row + tail_start, xc_tail, rstd, w_ptr, b_ptr, tail_start, edge, tail_mask, dtype)


@triton.jit
def _split_row_stats(x_row, N, eps, head, tail_start, edge, cols, head_mask, body_mask, tail_mask):
    """Load a row split as ``row_split`` splits it (the body 16 bytes at a time) and return its centred head,
    body and tail (zero on masked lanes) in fp32, and ``rstd``: the mean first, then the variance of the
    centred values, both over registers."""
    x_head = tl.load(x_row + edge, mask=head_mask, other=0.0).to(tl.float32)
    x_body = tl.load(tl.multiple_of(x_row + head, 16) + cols, mask=body_mask, other=0.0).to(tl.float32)
    x_tail = tl.load(x_row + tail_start + edge, mask=tail_mask, other=0.0).to(tl.float32)
    mean = (tl.sum(x_head, axis=0) + tl.sum(x_body, axis=0) + tl.sum(x_tail, axis=0)) / N
    # Masked lanes must not contribute (mean - 0)^2 to the variance.
    xc_head = tl.where(head_mask, x_head - mean, 0.0)
    xc_body = tl.where(body_mask, x_body - mean, 0.0)
    xc_tail = tl.where(tail_mask, x_tail - mean, 0.0)
    var = (
        tl.sum(xc_head * xc_head, axis=0) + tl.sum(xc_body * xc_body, axis=0) + tl.sum(xc_tail * xc_tail, axis=0)
    ) / N
    return xc_head, xc_body, xc_tail, tl.rsqrt(var + eps)


@triton.jit
def _layernorm_classes_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    n_rows,
    N,
    period,
    stride_xm,
    stride_om,
    eps,
    BLOCK_N: tl.constexpr,
    VEC: tl.constexpr,
    CLASS_ZERO_AFFINE: tl.constexpr = False,
):
    """Persistent programs, each over the rows of one alignment class, with weight and bias in registers.

    Rows ``r`` and ``r + period`` start at the same offset from a 16-byte boundary (the launcher computes
    ``period``, 16 bytes over the gcd of 16 and the row stride's bytes), so the rows ``cls, cls + period, ...``
    of one class split at the same column (``row_split``). Program ``pid`` takes class ``pid % period``, loads
    weight and bias at that class's head, body and tail columns once (lane by lane: they start on a boundary
    only for class 0's alignment), and then walks its share of the class's rows: x and y 16 bytes at a time
    and no per-row weight or bias load, which on odd N kept the one-row kernels at half the copy bandwidth
    (docs/kernel-notes.md, session 13). Two rows a program at a time and a compiler prefetch of the next row
    (``tl.range`` stages) were timed slower on an H200 (session 15) and are not kept.
    ``CLASS_ZERO_AFFINE`` is True only in the negative control ``classes_one_offset``: every class's weight and
    bias read as if its rows split where class 0's do (shifted by the difference of the heads)."""
    pid = tl.program_id(0)
    cls = pid % period
    per_class = tl.num_programs(0) // period
    stride_xm = tl.cast(stride_xm, tl.int64)
    stride_om = tl.cast(stride_om, tl.int64)
    head, body = row_split(x_ptr + cls * stride_xm, N, VEC)
    tail_start = head + body
    edge = tl.arange(0, VEC)
    cols = tl.arange(0, BLOCK_N)
    head_mask = edge < head
    body_mask = cols < body
    tail_mask = edge < N - tail_start
    shift = 0
    if CLASS_ZERO_AFFINE:
        shift = row_split(x_ptr, N, VEC)[0] - head
    w_head = _load_columns(w_ptr, shift, edge, head_mask, N)
    b_head = _load_columns(b_ptr, shift, edge, head_mask, N)
    w_body = _load_columns(w_ptr, head + shift, cols, body_mask, N)
    b_body = _load_columns(b_ptr, head + shift, cols, body_mask, N)
    w_tail = _load_columns(w_ptr, tail_start + shift, edge, tail_mask, N)
    b_tail = _load_columns(b_ptr, tail_start + shift, edge, tail_mask, N)
    dtype = out_ptr.dtype.element_ty
    rows_in_class = tl.cdiv(n_rows - cls, period)
    for i in range(pid // period, rows_in_class, per_class):
        row = cls + tl.cast(i, tl.int64) * period
        x_row, out_row = x_ptr + row * stride_xm, out_ptr + row * stride_om
        xc_head, xc_body, xc_tail, rstd = _split_row_stats(
            x_row, N, eps, head, tail_start, edge, cols, head_mask, body_mask, tail_mask
        )
        tl.store(out_row + edge, (xc_head * rstd * w_head + b_head).to(dtype), mask=head_mask)
        body_y = (xc_body * rstd * w_body + b_body).to(dtype)
        tl.store(tl.multiple_of(out_row + head, 16) + cols, body_y, mask=body_mask)
        tl.store(out_row + tail_start + edge, (xc_tail * rstd * w_tail + b_tail).to(dtype), mask=tail_mask)


@triton.jit
def _stage_affine_kernel(
    ws_w,
    ws_b,
    x_ptr,
    w_ptr,
    b_ptr,
    N,
    stride_xm,
    BLOCK_N: tl.constexpr,
    PITCH: tl.constexpr,
    VEC: tl.constexpr,
    CLASS_ZERO_AFFINE: tl.constexpr = False,
):
    """Program ``cls`` writes weight and bias at the body columns of alignment class ``cls`` (its rows'
    ``row_split`` head onwards) to row ``cls`` of the workspaces ``ws_w`` and ``ws_b`` (``PITCH`` elements a row,
    a multiple of 16 bytes), so that the row kernel reads them 16 bytes at a time. ``CLASS_ZERO_AFFINE`` (the
    negative control ``staged_one_offset`` only) writes class 0's columns for every class."""
    cls = tl.program_id(0)
    head, body = row_split(x_ptr + cls * tl.cast(stride_xm, tl.int64), N, VEC)
    if CLASS_ZERO_AFFINE:
        head = row_split(x_ptr, N, VEC)[0]
    cols = tl.arange(0, BLOCK_N)
    mask = (cols < body) & (head + cols < N)
    tl.store(ws_w + cls * PITCH + cols, tl.load(w_ptr + head + cols, mask=mask, other=0.0), mask=cols < body)
    tl.store(ws_b + cls * PITCH + cols, tl.load(b_ptr + head + cols, mask=mask, other=0.0), mask=cols < body)


@triton.jit
def _layernorm_staged_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    ws_w,
    ws_b,
    N,
    period,
    stride_xm,
    stride_om,
    eps,
    BLOCK_N: tl.constexpr,
    PITCH: tl.constexpr,
    VEC: tl.constexpr,
    CLASS_ZERO_AFFINE: tl.constexpr = False,
):
    """One program a row, split as ``row_split`` splits it; the body's weight and bias come from row
    ``row % period`` of the workspaces ``_stage_affine_kernel`` wrote, so x, y, weight and bias of the body all
    move 16 bytes at a time and the registers hold the row only (triton_persistent holds weight and bias in
    them, which capped its programs an SM at 3-6: docs/kernel-notes.md, session 15). Head and tail (fewer
    than ``VEC`` columns each) read weight and bias lane by lane, from L1/L2. ``CLASS_ZERO_AFFINE`` (the negative
    control ``staged_one_offset`` only) reads them at class 0's columns too, as the staging kernel does."""
    row = tl.program_id(0).to(tl.int64)
    cls = row % period
    x_row, out_row = x_ptr + row * stride_xm, out_ptr + row * stride_om
    head, body = row_split(x_row, N, VEC)
    tail_start = head + body
    edge = tl.arange(0, VEC)
    cols = tl.arange(0, BLOCK_N)
    head_mask, body_mask, tail_mask = edge < head, cols < body, edge < N - tail_start
    xc_head, xc_body, xc_tail, rstd = _split_row_stats(
        x_row, N, eps, head, tail_start, edge, cols, head_mask, body_mask, tail_mask
    )
    shift = 0
    if CLASS_ZERO_AFFINE:
        shift = row_split(x_ptr, N, VEC)[0] - head
    dtype = out_ptr.dtype.element_ty
    w_head = _load_columns(w_ptr, shift, edge, head_mask, N)
    b_head = _load_columns(b_ptr, shift, edge, head_mask, N)
    tl.store(out_row + edge, (xc_head * rstd * w_head + b_head).to(dtype), mask=head_mask)
    w_tail = _load_columns(w_ptr, tail_start + shift, edge, tail_mask, N)
    b_tail = _load_columns(b_ptr, tail_start + shift, edge, tail_mask, N)
    tl.store(out_row + tail_start + edge, (xc_tail * rstd * w_tail + b_tail).to(dtype), mask=tail_mask)
    w = tl.load(tl.multiple_of(ws_w + cls * PITCH, 16) + cols, mask=body_mask).to(tl.float32)
    b = tl.load(tl.multiple_of(ws_b + cls * PITCH, 16) + cols, mask=body_mask).to(tl.float32)
    tl.store(tl.multiple_of(out_row + head, 16) + cols, (xc_body * rstd * w + b).to(dtype), mask=body_mask)


@triton.jit
def _load_columns(ptr, start, lanes, mask, N):
    """Columns ``start + lanes`` of a [N] vector in fp32, lane by lane; 0 where masked or outside [0, N)."""
    cols = start + lanes
    return tl.load(ptr + cols, mask=mask & (cols >= 0) & (cols < N), other=0.0).to(tl.float32)


@triton.jit
def _affine_store(out_piece, xc, rstd, w_ptr, b_ptr, start, lanes, mask, dtype: tl.constexpr):
    """Store ``xc * rstd * weight + bias`` for the columns ``start + lanes`` of a row at ``out_piece + lanes``."""
    w = tl.load(w_ptr + start + lanes, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + start + lanes, mask=mask).to(tl.float32)
    tl.store(out_piece + lanes, (xc * rstd * w + b).to(dtype), mask=mask)


@triton.jit
def _layernorm_looped_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    N,
    stride_xm,
    stride_om,
    eps,
    BLOCK_N: tl.constexpr,
):
    """One program normalises one row in ``BLOCK_N``-wide chunks, three passes over the row.

    Pointers as in ``_layernorm_row_kernel``. Each pass accumulates per lane and reduces once at the
    end, so the summation is blocked (pairwise across lanes) rather than one long running sum.
    """
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        acc += xc * xc
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        tl.store(out_row + cols, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _online_stats_block(
    x_row, start, cols, N, n_a, dmean_a, m2_a, shift, BETWEEN: tl.constexpr, L2_HINTS: tl.constexpr
):
    """Pass 1 over one block: fold columns ``start + cols`` into the row's running count ``n_a``, mean and M2
    (Chan et al.'s pairwise combination). The block's own mean and M2 come from registers (mean, then the
    centred squares); the running mean is kept as ``dmean_a``, its offset from ``shift`` (the first block's
    mean), so that its roundings are of a number near 0 rather than of the row's offset."""
    offsets = start + cols
    mask = offsets < N
    if L2_HINTS:
        x = tl.load(x_row + offsets, mask=mask, other=0.0, eviction_policy="evict_last")
    else:
        x = tl.load(x_row + offsets, mask=mask, other=0.0)
    x = x.to(tl.float32)
    n_b = tl.minimum(N - start, cols.shape[0]).to(tl.float32)
    mean_b = tl.sum(x, axis=0) / n_b
    xc = tl.where(mask, x - mean_b, 0.0)
    m2_b = tl.sum(xc * xc, axis=0)
    shift = tl.where(n_a == 0.0, mean_b, shift)
    delta = (mean_b - shift) - dmean_a
    n = n_a + n_b
    dmean = dmean_a + delta * (n_b / n)
    m2 = m2_a + m2_b
    if BETWEEN:
        m2 += delta * delta * (n_a * n_b / n)
    return n, dmean, m2, shift


@triton.jit
def _online_write_block(out_row, x_row, w_ptr, b_ptr, start, cols, N, mean, rstd, L2_HINTS: tl.constexpr):
    """Pass 2 over one block: ``(x - mean) * rstd * weight + bias`` for columns ``start + cols``."""
    offsets = start + cols
    mask = offsets < N
    if L2_HINTS:
        x = tl.load(x_row + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(x_row + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=mask).to(tl.float32)
    y = ((x.to(tl.float32) - mean) * rstd * w + b).to(out_row.dtype.element_ty)
    if L2_HINTS:
        tl.store(out_row + offsets, y, mask=mask, eviction_policy="evict_first")
    else:
        tl.store(out_row + offsets, y, mask=mask)


@triton.jit
def _layernorm_online_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    n_rows,
    N,
    stride_xm,
    stride_om,
    eps,
    BLOCK_N: tl.constexpr,
    BETWEEN: tl.constexpr,
    L2_HINTS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """Program ``pid`` of a grid of ``G`` normalises rows ``pid, pid + G, ...`` (``G = n_rows``: one row each)
    of any width, ``BLOCK_N`` columns at a time, in two passes: the statistics (x read once), then the
    output (x read again, last block first, mostly from L2).

    Pointers as in ``_layernorm_row_kernel``. ``L2_HINTS``: pass 1 loads with ``evict_last`` (keep the row in
    L2 for pass 2), pass 2 loads and stores with ``evict_first``. ``NUM_STAGES > 1`` pipelines both block
    loops (needs PIPELINED_RANGE). ``BETWEEN`` is False only in the negative control ``online_no_between``.
    """
    stride_xm = tl.cast(stride_xm, tl.int64)
    stride_om = tl.cast(stride_om, tl.int64)
    cols = tl.arange(0, BLOCK_N)
    n_blocks = tl.cdiv(N, BLOCK_N)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * stride_xm
        out_row = out_ptr + row * stride_om
        n = tl.full([], 0.0, tl.float32)
        dmean = tl.full([], 0.0, tl.float32)
        m2 = tl.full([], 0.0, tl.float32)
        shift = tl.full([], 0.0, tl.float32)
        if NUM_STAGES > 1:
            for start in tl.range(0, N, BLOCK_N, num_stages=NUM_STAGES):
                n, dmean, m2, shift = _online_stats_block(x_row, start, cols, N, n, dmean, m2, shift, BETWEEN, L2_HINTS)
        else:
            for start in range(0, N, BLOCK_N):
                n, dmean, m2, shift = _online_stats_block(x_row, start, cols, N, n, dmean, m2, shift, BETWEEN, L2_HINTS)
        mean = shift + dmean
        rstd = tl.rsqrt(m2 / N + eps)
        # Pass 2, last block first: pass 1 read it last, so it is the likeliest still in L2.
        if NUM_STAGES > 1:
            for i in tl.range(0, n_blocks, num_stages=NUM_STAGES):
                _online_write_block(
                    out_row, x_row, w_ptr, b_ptr, (n_blocks - 1 - i) * BLOCK_N, cols, N, mean, rstd, L2_HINTS
                )
        else:
            for i in range(0, n_blocks):
                _online_write_block(
                    out_row, x_row, w_ptr, b_ptr, (n_blocks - 1 - i) * BLOCK_N, cols, N, mean, rstd, L2_HINTS
                )


@triton.jit
def _layernorm_split_kernel(
    out_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    stats_ptr,
    arrived_ptr,
    n_rows,
    N,
    split,
    stride_xm,
    stride_om,
    eps,
    CHUNK: tl.constexpr,
    SPLIT_BLOCK: tl.constexpr,
    PHASE: tl.constexpr,
    MAX_SPINS: tl.constexpr,
    LOCAL_STATS: tl.constexpr = False,
):
    """A team of ``split`` programs normalises one row at a time (``kernelscope.teams``); program ``part``
    holds columns ``[part * CHUNK, (part + 1) * CHUNK)`` of x in registers from its load to its store, so x is
    read once and y written once.

    Per row each program publishes its chunk's mean and sum of squared deviations from that mean (``M2``,
    from the registers: no E[x^2] - E[x]^2), and the team combines them exactly (Chan et al.'s parallel
    variance): ``mean = sum_j n_j mean_j / N``, ``M2 = sum_j (M2_j + n_j (mean_j - mean)^2)``, ``n_j`` the
    chunk's columns. ``LOCAL_STATS`` is True only in the negative control ``split_local_stats``: each
    program normalises with its own chunk's statistics, as if the exchange were missing.
    """
    pid = tl.program_id(0)
    team = pid // split
    part = pid % split
    n_teams = tl.num_programs(0) // split
    stride_xm = tl.cast(stride_xm, tl.int64)
    stride_om = tl.cast(stride_om, tl.int64)
    cols = part * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    n_part = tl.minimum(N - part * CHUNK, CHUNK).to(tl.float32)
    for row in range(team, n_rows, n_teams):
        x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        mean_part = tl.sum(x, axis=0) / n_part
        xc_part = tl.where(mask, x - mean_part, 0.0)
        m2_part = tl.sum(xc_part * xc_part, axis=0)
        if PHASE != 2:
            arrived = team_publish(stats_ptr, arrived_ptr, row, part, mean_part, m2_part, SPLIT_BLOCK)
        if PHASE == 0:
            team_wait(arrived_ptr, row, split, arrived, MAX_SPINS)
        if PHASE != 1:
            means, m2s = team_partials(stats_ptr, row, split, 0.0, 0.0, SPLIT_BLOCK)
            counts = tl.minimum(tl.maximum(N - tl.arange(0, SPLIT_BLOCK) * CHUNK, 0), CHUNK).to(tl.float32)
            mean = tl.sum(counts * means, axis=0) / N
            deviation = means - mean
            m2 = tl.sum(m2s + counts * deviation * deviation, axis=0)
            if LOCAL_STATS:
                mean = mean_part
                m2 = m2_part * N / n_part
            rstd = tl.rsqrt(m2 / N + eps)
            w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
            y = tl.where(mask, x - mean, 0.0) * rstd * w + b
            tl.store(out_ptr + row * stride_om + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
            team_release(stats_ptr, arrived_ptr, row, split, SPLIT_BLOCK)


def _check(inputs: Inputs, out: torch.Tensor) -> None:
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError(
            f"layernorm expects a 2-D x with unit column stride, got shape {tuple(x.shape)} strides {x.stride()}"
        )
    if out.shape != x.shape or out.stride(1) != 1:
        raise ValueError(f"output must match x's shape {tuple(x.shape)} with unit column stride")
    for name, t in (("weight", w), ("bias", b)):
        if t.shape != (x.shape[1],) or t.stride(0) != 1:
            raise ValueError(f"{name} must be a contiguous [{x.shape[1]}] vector, got shape {tuple(t.shape)}")


def _launcher(kernel, inputs: Inputs, out: torch.Tensor, block_n: int, num_warps: int, **meta):
    _check(inputs, out)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    n_rows, n_cols = x.shape

    def run() -> torch.Tensor:
        kernel[(n_rows,)](
            out, x, w, b, n_cols, x.stride(0), out.stride(0), EPS, BLOCK_N=block_n, num_warps=num_warps, **meta
        )
        return out

    return run


def _prepare_row(inputs: Inputs, out: torch.Tensor, config, keep_tail: bool = True):
    x = inputs["x"]
    aligned = bool(config.get("aligned", 0))
    vec = vec_elements(x.element_size())
    block_n = body_block(x.shape[1], vec) if aligned else triton.next_power_of_2(x.shape[1])
    if aligned:
        check_split(x, out)
    meta = {"ALIGNED": aligned, "VEC": vec, "KEEP_TAIL": keep_tail}
    return _launcher(_layernorm_row_kernel, inputs, out, block_n, int(config["num_warps"]), **meta)


def _prepare_looped(inputs: Inputs, out: torch.Tensor, config):
    return _launcher(_layernorm_looped_kernel, inputs, out, int(config["BLOCK_N"]), int(config["num_warps"]))


def _prepare_online(inputs: Inputs, out: torch.Tensor, config, between: bool = True):
    _check(inputs, out)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    n_rows, n_cols = x.shape
    num_stages = int(config.get("num_stages", 1))
    if num_stages > 1 and not PIPELINED_RANGE:
        raise ValueError(f"num_stages={num_stages} needs tl.range(..., num_stages=), which this Triton lacks")
    grid = (rows_grid(n_rows, int(config.get("programs_per_sm", 0)), device_limits()["num_sms"]),)
    meta = {
        "BLOCK_N": int(config["BLOCK_N"]),
        "BETWEEN": between,
        "L2_HINTS": bool(config.get("l2_hints", 0)),
        "NUM_STAGES": num_stages,
        "num_warps": int(config["num_warps"]),
    }

    def run() -> torch.Tensor:
        _layernorm_online_kernel[grid](out, x, w, b, n_rows, n_cols, x.stride(0), out.stride(0), EPS, **meta)
        return out

    return run


def _prepare_split(inputs: Inputs, out: torch.Tensor, config, local_stats: bool = False):
    _check(inputs, out)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    n_rows, n_cols = x.shape
    chunk = int(config["CHUNK"])
    split = split_parts(n_cols, chunk)
    split_block = triton.next_power_of_2(split)
    work = SplitWorkspace(n_rows, split_block, x.device)
    meta = {
        "CHUNK": chunk,
        "SPLIT_BLOCK": split_block,
        "MAX_SPINS": MAX_SPINS,
        "LOCAL_STATS": local_stats,
        "num_warps": int(config["num_warps"]),
    }
    args = (out, x, w, b, work.stats, work.arrived, n_rows, n_cols, split, x.stride(0), out.stride(0), EPS)
    programs_per_sm = int(config["programs_per_sm"])
    return prepare_team_launch(
        _layernorm_split_kernel, args, meta, n_rows, split, programs_per_sm, device_limits(), work, out
    )


def alignment_period(row_stride: int, element_bytes: int) -> int:
    """Rows after which the row starts repeat their offset from a 16-byte boundary: 8 for 16-bit rows of
    N = 4097 (each row starts 2 bytes further on), 1 when the row stride is a multiple of 16 bytes."""
    return ALIGN_BYTES // math.gcd(row_stride * element_bytes, ALIGN_BYTES)


def _prepare_classes(inputs: Inputs, out: torch.Tensor, config, class_zero_affine: bool = False):
    _check(inputs, out)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    check_split(x, out)  # out's rows then fall in x's classes
    n_rows, n_cols = x.shape
    vec = vec_elements(x.element_size())
    period = alignment_period(x.stride(0), x.element_size())
    limits = device_limits()
    args = (out, x, w, b, n_rows, n_cols, period, x.stride(0), out.stride(0), EPS)
    meta = {
        "BLOCK_N": body_block(n_cols, vec),
        "VEC": vec,
        "CLASS_ZERO_AFFINE": class_zero_affine,
        "num_warps": int(config["num_warps"]),
    }
    at_most = limits["num_sms"] * int(config["programs_per_sm"])

    def grid_for(resident: int) -> tuple[int]:
        # whole classes of at most programs_per_sm programs an SM, all resident at once (a program that
        # waits for a free SM would run its rows after the others: a second, mostly empty wave)
        per_class = min(triton.cdiv(n_rows, period), min(at_most, resident) // period)
        return (period * max(1, per_class),)

    if limits["interpreter"]:
        grid = grid_for(at_most)

        def run() -> torch.Tensor:
            _layernorm_classes_kernel[grid](*args, **meta)
            return out

        return run
    return launch_resident(_layernorm_classes_kernel, args, meta, limits, grid_for, out)


# Listed most promising first. programs_per_sm is an upper bound: the grid holds no more programs than are
# resident at once (teams.resident_on_device). The sm_90 build for the 4096-wide body of N = 4097 in 16 bits
# (docs/experiments/layernorm_classes_ptx.py) takes 165 registers a thread at 4 warps (3 programs an SM), 254 at
# 2 (4), 80 at 8 (3). On the H200 (session 15, docs/kernel-notes.md) 4 warps were the fastest in 4 of 6 odd-N
# cases, 2 warps at N = 4097 in 16 bits (7 % faster there, 31 % slower at N = 2049).
CLASSES_SPACE = tuple({"num_warps": w, "programs_per_sm": 8} for w in (4, 2, 8))


def _classes_default(shape: Shape, dtype: torch.dtype) -> dict:
    return dict(CLASSES_SPACE[0])


def _classes_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [dict(c) for c in CLASSES_SPACE]


def _classes_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    block = body_block(shape["N"], vec_elements(element_size(dtype)))
    per_thread = block // (32 * int(config["num_warps"]))
    # x, weight and bias are live together across the loop: 64 fp32 values a thread of each fit (2 warps,
    # N = 4097 in 16 bits: 254 registers, no spills); 128 would not
    if per_thread > 64:
        return f"{per_thread} values a thread of each of x, weight and bias: spills past 255 registers"
    return idle_warps(shape["N"], config["num_warps"])


def _classes_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    if reason := _split_reason(shape, dtype):
        return reason
    return whole_row_unsupported(shape["N"], MAX_ROW_BLOCK)


def _packed_rows_reason(shape: Shape, dtype: torch.dtype) -> str | None:
    """The class controls' ``supports``: ``_split_reason`` of x packed to row stride N, which they run on."""
    return split_unsupported(shape["N"], shape["N"], shape["N"], element_size(dtype))


def _packed_class_zero_control(inputs: Inputs, prepare, default_config):
    """A class-0-affine negative control (``prepare(..., class_zero_affine=True)``) on a copy of x packed to row
    stride N, whose rows fall in 2-8 alignment classes on every CPU shape and dtype."""
    x = inputs["x"]
    packed, staged = x.contiguous(), torch.empty_like(x, memory_format=torch.contiguous_format)
    shape = Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control")
    run = prepare({**inputs, "x": packed}, staged, default_config(shape, x.dtype), class_zero_affine=True)

    def control() -> torch.Tensor:
        packed.copy_(x)
        staged.fill_(float("nan"))
        return run().clone()

    return control


def _classes_one_offset(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: triton_persistent with every class's weight and bias read as if its rows split where
    class 0's do, on x packed to row stride N."""
    return _packed_class_zero_control(inputs, _prepare_classes, _classes_default)


def _prepare_staged(inputs: Inputs, out: torch.Tensor, config, class_zero_affine: bool = False):
    _check(inputs, out)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    check_split(x, out)
    n_rows, n_cols = x.shape
    vec = vec_elements(x.element_size())
    block = body_block(n_cols, vec)
    pitch = triton.cdiv(block, vec) * vec  # whole 16-byte vectors a workspace row, so every row starts on one
    period = alignment_period(x.stride(0), x.element_size())
    # allocated once here, outside the timed call; both launches are inside it
    ws_w, ws_b = torch.empty((2, period * pitch), dtype=w.dtype, device=w.device)
    meta = {"BLOCK_N": block, "PITCH": pitch, "VEC": vec}
    num_warps = int(config["num_warps"])
    stage_warps = min(8, max(1, block // (32 * vec)))  # one 16-byte vector a thread: a launch of ``period`` programs

    def run() -> torch.Tensor:
        _stage_affine_kernel[(period,)](
            ws_w, ws_b, x, w, b, n_cols, x.stride(0), CLASS_ZERO_AFFINE=class_zero_affine, num_warps=stage_warps,
            **meta,
        )  # fmt: skip
        _layernorm_staged_kernel[(n_rows,)](
            out, x, w, b, ws_w, ws_b, n_cols, period, x.stride(0), out.stride(0), EPS,
            CLASS_ZERO_AFFINE=class_zero_affine, num_warps=num_warps, **meta,
        )  # fmt: skip
        return out

    return run


# Outside the pipeline (docs/experiments/layernorm_staged_affine.py, session 15) one row a program ran fastest at
# 32 body values a thread in 16 bits (4 warps on N = 4097, 2 on 2049) and at 4 warps in fp32 (32 values on 4097).
STAGED_NUM_WARPS = (1, 2, 4, 8, 16)
STAGED_VALUES_A_THREAD = 32


def _staged_default(shape: Shape, dtype: torch.dtype) -> dict:
    block = body_block(shape["N"], vec_elements(element_size(dtype)))
    return {"num_warps": min(16, max(1, block // (32 * STAGED_VALUES_A_THREAD)))}


def _staged_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [{"num_warps": w} for w in STAGED_NUM_WARPS]


def _staged_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    block = body_block(shape["N"], vec_elements(element_size(dtype)))
    per_thread = block // (32 * int(config["num_warps"]))
    # x, x - mean, weight and bias of the body are live together, as in triton_row
    if per_thread > ROW_MAX_PER_THREAD:
        return f"{per_thread} body values a thread (> {ROW_MAX_PER_THREAD}): spills past 255 registers"
    return idle_warps(shape["N"], config["num_warps"])


def _staged_one_offset(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: triton_staged with every class's weight and bias staged (body) and read (head and tail)
    at class 0's columns, on x packed to row stride N."""
    return _packed_class_zero_control(inputs, _prepare_staged, _staged_default)


def _local_stats_config(shape: Shape, dtype: torch.dtype) -> dict:
    # An eighth of the padded row a program (at least 2 columns): every gate shape, N = 5 included, splits
    # into teams of 3 or more, so no chunk's statistics are the row's.
    chunk = max(2, triton.next_power_of_2(shape["N"]) // 8)
    return {"CHUNK": chunk, "num_warps": min(8, max(1, chunk // 1024)), "programs_per_sm": 4}


def _split_local_stats(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: the split kernel with each program normalising by its own chunk's statistics."""
    x = inputs["x"]
    config = _local_stats_config(Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control"), x.dtype)
    return _prepare_split(inputs, out, config, local_stats=True)


# --- triton_online ---------------------------------------------------------------------------------------------

# Rows at least this wide get a persistent default grid with the eviction hints: one program a row would put
# every row in flight at once (1024 rows of 64K fp16 = 128 MB, more than twice the H200's L2), so the second
# pass would re-read from HBM (softmax's triton_online, measured so: docs/kernel-notes.md).
ONLINE_WIDE_ROW = 32768
# Most values of a block a thread holds: pass 2 holds x, weight and bias of a block at once. At 64 (16384 columns
# on 8 warps) ptxas gives 108 (fp16) and 175 (fp32) registers a thread on sm_90; at 32, 64 and 88
# (docs/experiments/results/layernorm_online_ptx.txt).
ONLINE_MAX_VALUES_A_THREAD = 64
# The wide rows' default: 16384 columns on 8 warps, two programs an SM, the eviction hints. The H200 sweep of
# 1024 x 65536 (docs/kernel-notes.md, session 17) chose it in fp16 and bf16; 8192 columns on two programs an SM,
# the first default, was 1.16-1.29x slower there (too few bytes in flight an SM).
ONLINE_WIDE_DEFAULT = {"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": 2, "l2_hints": 1}


def _online_default(shape: Shape, dtype: torch.dtype) -> dict:
    # Wide rows: ONLINE_WIDE_DEFAULT, one program a row where two an SM would be every row anyway. Narrower: a
    # quarter of the padded row (so every CPU shape loops over several blocks and tests the combination and the
    # tail block), capped at 8192 columns, on tutorial 05's warps.
    if shape["N"] >= ONLINE_WIDE_ROW:
        persistent = rows_grid(shape["M"], 2, device_limits()["num_sms"]) < shape["M"]
        return {**ONLINE_WIDE_DEFAULT, "programs_per_sm": 2 if persistent else 0}
    block_n = max(1, min(8192, triton.next_power_of_2(shape["N"]) // 4))
    return {"BLOCK_N": block_n, "num_warps": _tutorial_num_warps(block_n), "programs_per_sm": 0, "l2_hints": 0}


def _online_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # Listed most promising first (a session's max_configs keeps a prefix), in the order of the H200 sweep of
    # 1024 x 65536 (docs/kernel-notes.md, session 17): wide rows the default, then 32768 columns on 16 warps (the
    # fastest in fp32), one program a row, smaller blocks on more programs, two pipelined loops and no hints;
    # narrower rows one program a row at three block widths.
    if shape["N"] >= ONLINE_WIDE_ROW:
        space = [
            {"BLOCK_N": b, "num_warps": w, "programs_per_sm": p, "l2_hints": 1}
            for b, w, p in ((16384, 8, 2), (32768, 16, 1), (16384, 8, 0), (8192, 8, 0), (16384, 16, 1), (4096, 4, 4))
        ]
        if PIPELINED_RANGE:
            space += [
                {"BLOCK_N": b, "num_warps": 8, "programs_per_sm": 2, "l2_hints": 1, "num_stages": k}
                for b, k in ((4096, 3), (8192, 2))
            ]
        space += [{"BLOCK_N": 8192, "num_warps": 8, "programs_per_sm": 0, "l2_hints": 0}]
    else:
        space = [
            {"BLOCK_N": b, "num_warps": w, "programs_per_sm": 0, "l2_hints": 0}
            for b, w in ((1024, 4), (2048, 8), (4096, 8))
        ]
    default = _online_default(shape, dtype)
    return space if default in space else [default, *space]


def _online_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    block_n, threads = int(config["BLOCK_N"]), 32 * int(config["num_warps"])
    padded = triton.next_power_of_2(shape["N"])
    if block_n > padded:
        return f"BLOCK_N={block_n} is wider than the padded row ({padded})"
    if block_n // threads > ONLINE_MAX_VALUES_A_THREAD:
        return f"{block_n // threads} values a thread of x, weight and bias in fp32: registers spill"
    programs_per_sm = int(config.get("programs_per_sm", 0))
    stages = int(config.get("num_stages", 1))
    # a pipelined loop keeps the next stages - 1 blocks of x (and in pass 2 of weight and bias) in shared memory
    smem = 3 * (stages - 1) * block_n * element_size(dtype)
    if max(1, programs_per_sm) * smem > limits.get("max_shared_mem_per_block", math.inf):
        return (
            f"{stages} stages of {block_n}-wide blocks of x, weight and bias need {smem} B of shared memory a "
            f"program, x {max(1, programs_per_sm)} programs an SM: more than an SM has"
        )
    num_sms = limits.get("num_sms")
    if programs_per_sm > 1 and num_sms and rows_grid(shape["M"], programs_per_sm, num_sms) == shape["M"]:
        return (
            f"programs_per_sm={programs_per_sm} gives a grid of all {shape['M']} rows: the same launch as a "
            f"smaller programs_per_sm or one program per row"
        )
    return None


def _online_no_between(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: triton_online at its default config, its blocks' M2 combined without the between-block
    term."""
    x = inputs["x"]
    shape = Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control")
    return _prepare_online(inputs, out, config or _online_default(shape, x.dtype), between=False)


# Narrowest row triton_split is run on: narrower rows fit one program's registers (triton_row), where a team
# barrier a row only adds latency (softmax's split measured so, docs/kernel-notes.md). The kernel itself works
# at any width (the tests lower this bound).
SPLIT_MIN_N = 16384


def _split_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    if shape["N"] < SPLIT_MIN_N:
        return f"N={shape['N']} < {SPLIT_MIN_N}: the row fits one program (triton_row)"
    return None


def _split_default(shape: Shape, dtype: torch.dtype) -> dict:
    return team_default(shape["N"])


def _split_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return team_configs(shape["N"])


def _split_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    return team_prune(config, shape["N"], limits)


def _tutorial_num_warps(block_n: int) -> int:
    # Triton tutorial 05 (layer norm): one warp per 256 elements of the block, between 1 and 8.
    return min(max(block_n // 256, 1), 8)


def _split_reason(shape: Shape, dtype: torch.dtype) -> str | None:
    """Why the rows of this case gain nothing from ``aligned=1`` (or cannot take it); None when they can."""
    return split_unsupported(shape["N"], shape.params.get("stride", shape["N"]), shape["N"], element_size(dtype))


def _row_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # Where the split applies, every warp count both ways, so the sweep measures what it is worth.
    plain = [{"num_warps": w} for w in (2, 4, 8, 16, 32)]
    return plain if _split_reason(shape, dtype) else [*({**c, "aligned": 1} for c in plain), *plain]


def _row_default(shape: Shape, dtype: torch.dtype) -> dict:
    # Triton tutorial 02 (fused softmax), whose one-row-in-registers kernel this one mirrors:
    # 4 warps, 8 from a 2048-wide block, 16 from 4096; split at 16-byte boundaries where Triton cannot prove
    # the rows aligned (16-bit rows then load and store 16 bytes at a time instead of 2).
    block = triton.next_power_of_2(shape["N"])
    config = {"num_warps": 16 if block >= 4096 else 8 if block >= 2048 else 4}
    return config if _split_reason(shape, dtype) else {**config, "aligned": 1}


def _row_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    return whole_row_unsupported(shape["N"], MAX_ROW_BLOCK)


def _row_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    if reason := idle_warps(shape["N"], config["num_warps"]):
        return reason
    block = triton.next_power_of_2(shape["N"])
    threads = 32 * int(config["num_warps"])
    # x, x - mean, weight and bias are live together: past 128 fp32 values of x per thread that is
    # over the 255-register limit, so the config spills (and takes minutes to compile).
    if block // threads > ROW_MAX_PER_THREAD:
        return f"{block // threads} elements per thread (> {ROW_MAX_PER_THREAD}): spills past 255 registers"
    return _split_reason(shape, dtype) if config.get("aligned", 0) else None


def _looped_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [{"BLOCK_N": n, "num_warps": w} for n in LOOP_BLOCK_NS for w in LOOP_NUM_WARPS]


def _looped_default(shape: Shape, dtype: torch.dtype) -> dict:
    block_n = min(LOOP_BLOCK_NS[-1], triton.next_power_of_2(shape["N"]))
    return {"BLOCK_N": block_n, "num_warps": _tutorial_num_warps(block_n)}


def _looped_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    # A chunk wider than the (padded) row only adds masked lanes; the smallest chunk stays.
    padded = triton.next_power_of_2(shape["N"])
    if config["BLOCK_N"] > max(padded, LOOP_BLOCK_NS[0]):
        return f"BLOCK_N={config['BLOCK_N']} is wider than the padded row ({padded})"
    return None


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def _torch_eager(inputs: Inputs, out, config):
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    return lambda: _layer_norm(x, w, b)


def _torch_compile(inputs: Inputs, out, config):
    return compiled(_layer_norm, inputs["x"], inputs["weight"], inputs["bias"])


def _gluon_smem_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    # The default with weight and bias loaded after the team exchange (WB_AHEAD=0) first, so the sweep records both
    # loads on the pipeline's basis: the default's WB_AHEAD=1 rests on an event-timed A/B whose margin is not clear
    # of that method's own bias (docs/kernel-notes.md, "Session 30").
    after_exchange = dict(gluon_smem.default_for("layernorm")(shape, dtype), WB_AHEAD=0)
    return [after_exchange] + gluon_smem.configs_for("layernorm")(shape, dtype)


def _prepare_gluon_smem(inputs: Inputs, out: torch.Tensor, config, skip_last_chunk_in_sum: bool = False):
    _check(inputs, out)
    x = inputs["x"]
    return gluon_smem.launch(
        x,
        out,
        gluon_smem.checked_config(x, out, config, "layernorm"),
        device_limits(),
        skip_last_chunk_in_sum=skip_last_chunk_in_sum,
        weight=inputs["weight"],
        bias=inputs["bias"],
        eps=EPS,
    )


def _gluon_smem_sum_skips_a_slot(inputs: Inputs, out, config):
    """Negative control: gluon_smem whose mean and variance see zeros in place of each part's last slot."""
    # slots of 16 box rows (the second config): two or more a part from N = 8192 on, so there is a last one
    x = inputs["x"]
    config = gluon_smem.default_for("layernorm", control=True)(
        Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control"), x.dtype
    )
    return _prepare_gluon_smem(inputs, out, config, skip_last_chunk_in_sum=True)


def _no_eps(inputs: Inputs, out, config):
    """Negative control: divides by sqrt(var) without eps; wrong when var is not >> eps, NaN when 0."""
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]

    def run():
        xf = x.float()
        xc = xf - xf.mean(dim=-1, keepdim=True)
        var = (xc * xc).mean(dim=-1, keepdim=True)
        return (xc / var.sqrt() * w.float() + b.float()).to(x.dtype)

    return run


def _one_pass_variance_fp16(inputs: Inputs, out, config):
    """Negative control: var = E[x^2] - E[x]^2 in half precision (a careless autocast): with a mean
    offset of 32 std, both terms are ~1024, where an fp16 ulp is 1, i.e. the size of the variance."""
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]

    def run():
        xh = x.half()
        mean = xh.mean(dim=-1, keepdim=True)
        var = (xh * xh).mean(dim=-1, keepdim=True) - mean * mean
        return ((xh - mean) * torch.rsqrt(var + EPS) * w.half() + b.half()).to(x.dtype)

    return run


#: half the span of regime 0's column ramp (``make_inputs``): variance 4/3 along the row beside x's 1
RAMP = 2.0


def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    """Rows in three regimes, chosen by ``seed % 3``, with weight ~ U[0.5, 1.5) and bias ~ N(0, 0.5^2):

    0: x ~ N(0, 1) plus a column ramp from -2 to 2 (a mean that changes along the row, as channels' offsets do):
    any piece of a row, a kernel's block, slot or part, then has its own mean, so a combination of pieces'
    statistics that leaves out the between-pieces term is off by ~half the variance at every width and dtype (with
    a flat mean it is off by ~pieces / N, under bf16's tolerance on wide rows);
    1: x ~ 32 + N(0, 1), a mean offset of 32 std (E[x^2] - E[x]^2 cancels ~10 bits; 32 keeps the N(0, 1) part
    resolved even in bf16, whose ulp at 32 is 0.25);
    2: x ~ N(0, 1e-3^2), variance 1e-6 < eps, where eps sets the scale of the output.
    A ``stride`` shape parameter > N makes the rows non-contiguous.
    """
    g = generator(seed, device)
    scale, shift = [(1.0, 0.0), (1.0, 32.0), (1e-3, 0.0)][seed % 3]
    n_rows, n_cols = shape["M"], shape["N"]
    row_stride = shape.params.get("stride", n_cols)
    x = randn((n_rows, row_stride), dtype, g, scale=scale, shift=shift)
    if seed % 3 == 0:
        ramp = torch.linspace(-RAMP, RAMP, row_stride, dtype=torch.float32, device=g.device)
        x = (x.to(torch.float32) + ramp).to(dtype)
    x = x[:, :n_cols]
    # Bounded away from 0 so the invariant can undo the affine step: (y - bias) / weight.
    weight = (0.5 + torch.rand((n_cols,), generator=g, dtype=torch.float32, device=g.device)).to(dtype)
    bias = randn((n_cols,), dtype, g, scale=0.5)
    return {"x": x, "weight": weight, "bias": bias}


def make_output(inputs: Inputs) -> torch.Tensor:
    return torch.empty_like(inputs["x"], memory_format=torch.contiguous_format)


def reference(inputs: Inputs) -> torch.Tensor:
    return _layer_norm(inputs["x"], inputs["weight"], inputs["bias"])


def _normalised_rows(out: torch.Tensor, inputs: Inputs) -> torch.Tensor:
    """xhat = (y - bias) / weight in fp64: the rows as they were before the affine step."""
    return (out.to(torch.float64) - inputs["bias"].to(torch.float64)) / inputs["weight"].to(torch.float64)


def _row_mean_error(out: torch.Tensor, inputs: Inputs) -> float:
    return float(_normalised_rows(out, inputs).mean(dim=-1).abs().max())


def _row_variance_error(out: torch.Tensor, inputs: Inputs) -> float:
    xhat = _normalised_rows(out, inputs)
    var_x = inputs["x"].to(torch.float64).var(dim=-1, unbiased=False)
    expected = var_x / (var_x + EPS)  # exactly 1 - eps / (var + eps): not 1 when var is near eps
    return float((xhat.var(dim=-1, unbiased=False) - expected).abs().max())


def _moment_limit(dtype: torch.dtype, inputs: Inputs | None = None) -> float:
    # Storing y rounds it by u = eps/2 relative; undoing the affine step divides by weight >= 0.5, so
    # xhat_i is off by <= 2u |y_i|, with |y| <= 1.5 |xhat| + |bias| <~ 10. A row's mean is then off by
    # <= 20u = 10 eps and its variance (2 cov(xhat, error)) by <~ 8u = 4 eps; 16 eps also covers the
    # interpreter's truncating bf16 casts (u = eps). Plus the fp32 statistics' own error on rows
    # offset by 32 std: the mean is off by <= ~6e-6 std (see the fp32 tolerance), with 16x margin.
    return 16 * torch.finfo(dtype).eps + 1e-4


def _flops(shape: Shape) -> float:
    # per element: add to the sum, centre, square and accumulate (2), scale by rstd, affine (2)
    return 7.0 * shape["M"] * shape["N"]


def _bytes(shape: Shape, dtype: torch.dtype) -> float:
    # read MN elements and 2N (weight, bias); write MN elements
    return float((2 * shape["M"] * shape["N"] + 2 * shape["N"]) * element_size(dtype))


KERNEL = KernelSpec(
    name="layernorm",
    description="LayerNorm forward over the last dimension of an M x N matrix, weight and bias [N], eps 1e-5.",
    make_inputs=make_inputs,
    make_output=make_output,
    reference=reference,
    implementations=[
        Implementation(
            "triton_row",
            "triton",
            _prepare_row,
            description="one program per row, whole row in registers, mean then centred variance",
            configs=_row_configs,
            default_config=_row_default,
            prune=_row_prune,
            supports=_row_supports,
        ),
        Implementation(
            "triton_looped",
            "triton",
            _prepare_looped,
            description="one program per row, three passes over BLOCK_N-wide chunks (tutorial 05)",
            configs=_looped_configs,
            default_config=_looped_default,
            prune=_looped_prune,
        ),
        Implementation(
            "triton_online",
            "triton",
            _prepare_online,
            description="programs over rows of any width in BLOCK_N chunks, two passes: the chunks' means and M2 "
            "combined exactly (x read once), then the output (x re-read, last chunk first, mostly from L2)",
            configs=_online_configs,
            default_config=_online_default,
            prune=_online_prune,
        ),
        Implementation(
            "triton_split",
            "triton",
            _prepare_split,
            description="a team of programs a row, each holding a chunk in registers; chunk means and M2 exchanged "
            "through global memory and combined exactly (x read once)",
            configs=_split_configs,
            default_config=_split_default,
            prune=_split_prune,
            supports=_split_supports,
        ),
        Implementation(
            "triton_persistent",
            "triton",
            _prepare_classes,
            description="persistent programs, each over the rows of one 16-byte alignment class: weight and bias "
            "loaded once into registers at that class's columns, x and y 16 bytes at a time",
            configs=_classes_configs,
            default_config=_classes_default,
            prune=_classes_prune,
            supports=_classes_supports,
        ),
        Implementation(
            "triton_staged",
            "triton",
            _prepare_staged,
            description="one program per row; a first launch writes each 16-byte alignment class's weight and bias "
            "shifted to its body columns, so x, y, weight and bias all move 16 bytes at a time",
            configs=_staged_configs,
            default_config=_staged_default,
            prune=_staged_prune,
            supports=_classes_supports,
        ),
        Implementation(
            "gluon_smem",
            "triton",
            _prepare_gluon_smem,
            description="Hopper, in Gluon: persistent programs each holding a row, or its part of a row split over a "
            "team of up to 16, in shared memory, filled by TMA; each box row's mean and sum of squared deviations "
            "merged as the slots land, the parts' exchanged through global memory, the affine step while the next "
            "row's loads are in flight; x read from HBM once (N a multiple of 256, N >= 8192; GPU only)",
            configs=_gluon_smem_configs,
            default_config=gluon_smem.default_for("layernorm"),
            prune=gluon_smem.prune,
            supports=gluon_smem.supports,
        ),
        Implementation(
            "torch", "eager", _torch_eager, description="torch.nn.functional.layer_norm (ATen)", writes_out=False
        ),
        Implementation(
            "torch_compile",
            "compile",
            _torch_compile,
            description="torch.compile(F.layer_norm), Inductor-generated Triton",
            writes_out=False,
        ),
    ],
    targets=[
        Target(
            "gluon_smem",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="issue 24's goal for every layernorm moving 64 MB or more, for the design triton.language does "
            "not express: the row resident in shared memory, read from HBM once, with TMA's bytes in flight",
        ),
        Target(
            "triton_row",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="x read once and y written once from a row held in registers (weight and bias are 2N elements, "
            "cached across rows): near copy bandwidth once DRAM-bound, at every width it takes and in every dtype "
            "(issue 24's goal); rows Triton cannot prove aligned split at 16-byte boundaries (aligned=1)",
        ),
        Target(
            "triton_split",
            "pct_copy_bw",
            85,
            shapes={"N": (65536, None)},
            min_bytes=64e6,
            reason="rows too wide for one program's registers, read once by a team of programs that exchange "
            "their chunks' means and M2: the minimal traffic, so near copy bandwidth (issue 24's goal for every "
            "layernorm moving 64 MB or more)",
        ),
        Target(
            "triton_online",
            "pct_copy_bw",
            85,
            shapes={"N": (ONLINE_WIDE_ROW, None)},
            min_bytes=64e6,
            reason="rows too wide for one program's registers, with no exchange between programs: HBM moves a "
            "copy's bytes when the second read of x hits L2 (weight and bias are cached across rows), so near copy "
            "bandwidth (issue 24's goal for every layernorm moving 64 MB or more)",
        ),
        Target(
            "triton_staged",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="rows Triton cannot prove aligned (odd N), with every body column of x, y, weight and bias moved "
            "16 bytes at a time and the registers left to the row (a second, tiny launch stages weight and bias): "
            "near copy bandwidth (issue 24's goal for every layernorm moving 64 MB or more)",
        ),
        Target(
            "triton_persistent",
            "pct_copy_bw",
            85,
            min_bytes=64e6,
            reason="rows Triton cannot prove aligned (odd N), read once 16 bytes at a time with weight and bias "
            "held in registers, so nothing a row is loaded lane by lane: near copy bandwidth (issue 24's goal for "
            "every layernorm moving 64 MB or more)",
        ),
    ],
    negative_controls=[
        Implementation(
            "gluon_smem_sum_skips_a_slot",
            "triton",
            _gluon_smem_sum_skips_a_slot,
            configs=lambda shape, dtype: [gluon_smem.default_for("layernorm", control=True)(shape, dtype)],
            default_config=gluon_smem.default_for("layernorm", control=True),
            supports=gluon_smem.supports,
            description="gluon_smem whose statistics see zeros in place of each part's last shared-memory slot",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "no_eps",
            "eager",
            _no_eps,
            writes_out=False,
            description="rsqrt(var) without eps: 3.3x too large when var = eps / 10, NaN on constant rows",
            rejected_for="elements outside atol",
        ),
        no_tail_control(_prepare_row, _row_default),
        Implementation(
            "split_local_stats",
            "triton",
            _split_local_stats,
            configs=lambda shape, dtype: [_local_stats_config(shape, dtype)],
            default_config=_local_stats_config,
            description="triton_split with each program normalising by its own chunk's mean and variance (the "
            "exchange skipped): right only if every chunk had the row's statistics",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "online_no_between",
            "triton",
            _online_no_between,
            configs=lambda shape, dtype: [_online_default(shape, dtype)],
            default_config=_online_default,
            description="triton_online combining its chunks' M2 without the between-chunk term n_a n_b / n "
            "(mean_b - mean_a)^2: right only if every chunk had the row's mean",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "classes_one_offset",
            "triton",
            _classes_one_offset,
            configs=lambda shape, dtype: [_classes_default(shape, dtype)],
            default_config=_classes_default,
            # on its packed rows (stride N): where they need no alignment classes, the one-offset bug is a no-op, so
            # the gate could not reject it there (docs/kernel-notes.md, "Session 22"); it sits out there, for the
            # reason the variant it guards gives on such rows
            supports=_packed_rows_reason,
            writes_out=False,
            description="triton_persistent with weight and bias read at the first class's columns for every "
            "class, on x packed to row stride N: right only where every row starts at the same alignment",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "staged_one_offset",
            "triton",
            _staged_one_offset,
            configs=lambda shape, dtype: [_staged_default(shape, dtype)],
            default_config=_staged_default,
            # on its packed rows (stride N): where they need no alignment classes, the one-offset bug is a no-op, so
            # the gate could not reject it there (docs/kernel-notes.md, "Session 22"); it sits out there, for the
            # reason the variant it guards gives on such rows
            supports=_packed_rows_reason,
            writes_out=False,
            description="triton_staged with every class's weight and bias taken at the first class's columns, on "
            "x packed to row stride N: right only where every row starts at the same alignment",
            rejected_for="elements outside atol",
        ),
        Implementation(
            "one_pass_variance_fp16",
            "eager",
            _one_pass_variance_fp16,
            writes_out=False,
            description="E[x^2] - E[x]^2 in fp16: catastrophic cancellation on rows offset by 32 std",
            rejected_for="elements outside atol",
        ),
    ],
    tolerances={
        torch.float16: Tolerance(
            1e-4,
            1e-3,
            "fp32 statistics, one rounding to fp16 (2^-11 relative); atol "
            "for y near 0 and fp32's mean error on rows offset by 32 std",
        ),
        torch.bfloat16: Tolerance(
            1e-3, 8e-3, "fp32 statistics, one rounding to bf16 (2^-8 relative) with 2x margin; atol for y near 0"
        ),
        torch.float32: Tolerance(
            1e-4,
            1e-5,
            "fp32 statistics: on rows offset by 32 std the fp32 mean is off "
            "by <= ~6e-6 std (2^-24 * 32 per rounding; max over 4096 rows of "
            "a simulated GPU reduction order), times weight <= 1.5; ~7x margin",
        ),
    },
    flops=_flops,
    bytes_moved=_bytes,
    invariants=[
        Invariant(
            "normalised_mean_error", _row_mean_error, _moment_limit, "before the affine step every row has mean 0"
        ),
        Invariant(
            "normalised_variance_error",
            _row_variance_error,
            _moment_limit,
            "before the affine step every row has variance var / (var + eps)",
            # an output at the fp32 tolerance's edge everywhere has the wrong variance; fp16/bf16 limits let it pass
            tighter_than_tolerance=(torch.float32,),
        ),
    ],
    shape_sets={
        "cpu": [
            shape_entry("tiny, non-power-of-two row: 3 masked lanes of 8", M=3, N=5),
            shape_entry("strided rows (row stride 80 > N = 70)", M=33, N=70, stride=80),
            shape_entry("one more than a block: 129 pads to 256", M=16, N=129),
        ],
        "gpu": [
            shape_entry("decode-sized batch: 32 rows of 4096, a quarter of the SMs busy (launch-bound)", M=32, N=4096),
            shape_entry("LLaMA-7B hidden size, 16384 tokens: 256 MB of traffic at fp16", M=16384, N=4096),
            shape_entry(
                "LLaMA-70B hidden size, 16384 tokens: 512 MB at fp16, 32 fp32 elements per thread at 8 warps",
                M=16384,
                N=8192,
            ),
            shape_entry(
                "odd N just past a power of two: the row kernel pads 4097 to 8192, the looped one has a "
                "1-element tail chunk",
                M=8192,
                N=4097,
            ),
            shape_entry(
                "wide rows, N = 65536: the row kernel's register limit against the looped kernel; 256 MB at fp16",
                M=1024,
                N=65536,
            ),
        ],
    },
)
