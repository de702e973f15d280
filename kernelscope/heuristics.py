"""Launch-config rules shared by kernels that keep a whole row in one Triton program."""

from __future__ import annotations

import triton

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
