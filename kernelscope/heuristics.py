"""Launch-config rules shared by kernels that keep a whole row in one Triton program, and the split of a row
at 16-byte boundaries that lets its body load and store at full width."""

from __future__ import annotations

import inspect

import triton
import triton.language as tl

#: warps every row kernel may use on any row: the usual default, which the sweep must always be able to time
BASE_WARPS = 4


def whole_row_unsupported(n_cols: int, max_block: int) -> str | None:
    """Reason a one-program-per-row kernel cannot take rows of ``n_cols`` (the row lives in registers)."""
    block = triton.next_power_of_2(n_cols)
    if block > max_block:
        return f"one program per row holds the whole row in registers; N={n_cols} needs a {block}-wide block"
    return None


def idle_warps(n_cols: int, num_warps: int) -> str | None:
    """Reason to prune a warp count that leaves whole warps without an element of the padded row
    (beyond the base 4 warps, which stay allowed)."""
    block = triton.next_power_of_2(n_cols)
    threads = 32 * int(num_warps)
    if threads > max(block, 32 * BASE_WARPS):
        return f"{threads} threads for a {block}-wide row: warps with no element"
    return None


def row_spills(n_cols: int, num_warps: int, max_per_thread: int = 256) -> str | None:
    """Reason to prune a warp count that gives each thread more than ``max_per_thread`` elements of the
    padded row: far past the 255-register limit, the config spills to local memory and takes minutes
    to compile (softmax N=65536 at one warp: 2048 values a thread, a 52 s compile and 4.5x slower
    than 16 warps on the H200)."""
    per_thread = triton.next_power_of_2(n_cols) // (32 * int(num_warps))
    if per_thread > max_per_thread:
        return f"{per_thread} elements a thread (> {max_per_thread}): registers spill"
    return None


# --- several rows a program -----------------------------------------------------------------------------
#
# A program that holds one narrow row moves little (a 512-wide 16-bit row: 1 KB in, 1 KB out), and with one
# such program per row the per-program cost can outweigh the row's traffic (softmax 131072 x 512 16-bit: 77.8 %
# of copy bandwidth on the H200, docs/kernel-notes.md). A program of ROWS consecutive rows holds them as one
# [ROWS, BLOCK] block and reduces along axis 1, so it moves ROWS times as much.

#: elements of the largest [ROWS, BLOCK] block a program of several rows may hold: 64 fp32 values a thread at
#: 4 warps, 256 at one warp (row_spills' bound), so registers stay bounded however many rows
MAX_ROWS_BLOCK = 8192


def rows_unsupported(rows: int, n_cols: int, max_elements: int = MAX_ROWS_BLOCK) -> str | None:
    """Reason to prune ``rows`` rows a program for rows of ``n_cols`` (a ``[rows, next_power_of_2(n_cols)]``
    block in registers) where the block passes ``max_elements``; None for one row (whole_row_unsupported's
    question) or a block that fits."""
    block = triton.next_power_of_2(n_cols)
    if rows > 1 and rows * block > max_elements:
        return (
            f"{rows} rows of a {block}-wide block are {rows * block} elements a program (> {max_elements}): "
            f"registers grow with the rows"
        )
    return None


def idle_warps_rows(rows: int, n_cols: int, num_warps: int) -> str | None:
    """:func:`idle_warps` for a program of ``rows`` rows: whole warps idle once the threads outnumber the
    elements of the ``[rows, next_power_of_2(n_cols)]`` block (beyond the base 4 warps, which stay allowed)."""
    block = triton.next_power_of_2(n_cols)
    threads = 32 * int(num_warps)
    if threads > max(rows * block, 32 * BASE_WARPS):
        return f"{threads} threads for {rows} rows of a {block}-wide block ({rows * block} elements): idle warps"
    return None


def rows_per_program(n_cols: int, element_bytes: int, min_bytes: int, max_elements: int = MAX_ROWS_BLOCK) -> int:
    """Rows a program takes so that it reads at least ``min_bytes`` (rows of ``n_cols * element_bytes``): the
    power of two at or above ``min_bytes / row bytes``, capped so that the ``[rows, block]`` block keeps within
    ``max_elements``; 1 where one row already reads ``min_bytes`` (or the cap allows no more)."""
    row_bytes = max(1, n_cols * element_bytes)
    if row_bytes >= min_bytes:
        return 1
    rows = triton.next_power_of_2(-(-min_bytes // row_bytes))
    return max(1, min(rows, max_elements // triton.next_power_of_2(n_cols)))


# --- rows split at 16-byte boundaries -------------------------------------------------------------
#
# Triton vectorises a load only as far as it can prove the addresses aligned: a pointer argument is known
# 16-byte aligned, and an integer argument (N, a row stride) is known to be a multiple of 16 only when it is
# one (the launch specialises on it). A row of N = 2049 fp16 elements therefore loads 2 bytes at a time for
# the whole row, though all but at most 14 of its bytes lie in aligned 16-byte pieces. row_split cuts the
# row at its first 16-byte boundary: a head of fewer than VEC elements (VEC = 16 bytes of elements), an
# aligned body whose length is a multiple of VEC, and a tail of fewer than VEC elements. The body is loaded
# from a pointer declared 16-byte aligned (tl.multiple_of) with a mask that changes only every VEC lanes,
# which is what the compiler needs for 128-bit loads and stores.

#: bytes a full-width (128-bit) load or store moves
ALIGN_BYTES = 16


def vec_elements(element_bytes: int) -> int:
    """Elements of a full-width (16-byte) load: ``VEC`` of :func:`row_split`."""
    return ALIGN_BYTES // element_bytes


@triton.jit
def row_split(row_ptr, n_cols, VEC: tl.constexpr):
    """``(head, body)`` of the ``n_cols`` contiguous elements at ``row_ptr``: ``head`` elements before the first
    16-byte boundary (fewer than ``VEC``, the elements in 16 bytes), then ``body`` elements from that boundary
    (a multiple of ``VEC``), then a tail of the ``n_cols - head - body < VEC`` that remain."""
    past_boundary = (row_ptr.to(tl.int64) % 16) // (16 // VEC)  # elements since the boundary at or before row_ptr
    head = tl.minimum((VEC - past_boundary) % VEC, n_cols)
    body = (n_cols - head) // VEC * VEC
    return head, body


def body_block(n_cols: int, vec: int) -> int:
    """The block of a split row's body (:func:`row_split`): the body holds at most ``n_cols // vec * vec``
    elements whatever the head, so its block is the power of two above that, not above ``n_cols``. For
    N = 2049 (16-bit, VEC 8) that is 2048 lanes, not 4096, and for N = 4097 4096, not 8192: half the registers,
    whose occupancy Nsight Compute showed limiting layernorm 8192 x 4097 (docs/kernel-notes.md, session 10)."""
    return triton.next_power_of_2(max(1, n_cols // vec * vec))


def split_unsupported(n_cols: int, row_stride: int, out_row_stride: int, element_bytes: int) -> str | None:
    """Reason the split of :func:`row_split` cannot apply, or adds nothing, to rows of ``n_cols`` elements with
    these input and output row strides (in elements); None when it applies."""
    if n_cols % 16 == 0 and row_stride % 16 == 0 and out_row_stride % 16 == 0:
        return (
            f"N={n_cols} and the row strides are multiples of 16, which Triton specialises on: every row is "
            f"known aligned and already loads at full width"
        )
    if (row_stride - out_row_stride) * element_bytes % ALIGN_BYTES:
        return (
            f"input rows (stride {row_stride}) and output rows (stride {out_row_stride}) start at different "
            f"offsets from a {ALIGN_BYTES}-byte boundary: one split cannot serve both"
        )
    return None


def check_split(x, out) -> None:
    """Raise unless every row of ``x`` and of ``out`` (2-D tensors, unit column stride) lies at the same offset
    from a 16-byte boundary: the split kernels compute one split from the input row and store with it."""
    if (x.data_ptr() - out.data_ptr()) % ALIGN_BYTES or (x.stride(0) - out.stride(0)) * x.element_size() % ALIGN_BYTES:
        raise ValueError(
            f"aligned=1 needs input and output rows at the same offset from a {ALIGN_BYTES}-byte boundary; got "
            f"data pointers {x.data_ptr() % ALIGN_BYTES} and {out.data_ptr() % ALIGN_BYTES} bytes past one and row "
            f"strides {x.stride(0)} and {out.stride(0)} elements: use aligned=0"
        )


def _off_boundary_like(x):
    """An uninitialised contiguous tensor of ``x``'s shape and dtype whose data starts one element past a
    16-byte boundary."""
    return x.new_empty(x.numel() + 1)[1:].view(x.shape)


def no_tail_control(prepare_row, row_default):
    """The negative control ``aligned_no_tail`` of a row kernel: ``prepare_row(inputs, out, config,
    keep_tail=False)`` at ``row_default`` with aligned=1, which neither loads nor stores the tail after the
    aligned body (the remainder a vectorised loop forgets). Rows aligned at both ends have no tail, so it runs
    on a copy of ``inputs["x"]`` one element past a 16-byte boundary, where most rows end with one (so the
    gate rejects it on every case); what it leaves unwritten stays NaN."""
    from kernelscope.spec import Implementation, Shape  # spec imports torch: only where a control is declared

    def config(shape, dtype) -> dict:
        return {**row_default(shape, dtype), "aligned": 1}

    def prepare(inputs, out, _config):
        x = inputs["x"]
        staged_in, staged_out = _off_boundary_like(x), _off_boundary_like(x)
        shape = Shape({"M": x.shape[0], "N": x.shape[1]}, "negative control")
        row = prepare_row({**inputs, "x": staged_in}, staged_out, config(shape, x.dtype), keep_tail=False)

        def run():
            staged_in.copy_(x)
            staged_out.fill_(float("nan"))
            return row().clone()

        return run

    return Implementation(
        "aligned_no_tail",
        "triton",
        prepare,
        configs=lambda shape, dtype: [config(shape, dtype)],
        default_config=config,
        writes_out=False,
        description="triton_row at aligned=1 without the tail after the aligned body",
        rejected_for="non-finite outputs where the reference is finite",
    )


# --- rows walked by persistent programs ------------------------------------------------------------------

#: ``tl.range(..., num_stages=k)`` lets the compiler pipeline a loop's next load behind this iteration's
#: reductions (the launch's own num_stages only pipelines loads that feed tl.dot). Triton 3.6 and 3.7 both
#: have it; where it is missing a kernel loops with ``range`` and its configs keep num_stages at 1.
PIPELINED_RANGE = hasattr(tl, "range") and "num_stages" in inspect.signature(tl.range).parameters


def rows_grid(n_rows: int, programs_per_sm: int, num_sms: int) -> int:
    """Programs of a grid whose program ``p`` walks rows ``p, p + G, ...``: ``programs_per_sm`` for every SM,
    never more than one a row; ``programs_per_sm = 0`` is one program a row."""
    return min(n_rows, num_sms * programs_per_sm) if programs_per_sm > 0 else n_rows
