"""Rows too wide for one program, split over a *team* of co-resident programs that exchange partial
statistics through global memory (``softmax.triton_split``, ``layernorm.triton_split``).

A team of ``split`` consecutive programs computes one row at a time; program ``part`` holds columns ``[part *
CHUNK, (part + 1) * CHUNK)`` in registers from its load to its store, so the row is read once and written once.
(softmax's segments, ``BLOCKS > 1``, give each program ``BLOCKS`` such chunks that it reads twice, the second time
from L2; ``team_prune`` sizes the team by the segment.) Per row, each program publishes two fp32 partials of its
chunk (``team_publish``: softmax's max and sum of exponentials, layernorm's mean and sum of squared deviations) in
``stats[row]`` ([2, SPLIT_BLOCK] fp32), adds 1 to ``arrived[row]`` (release), and waits until all ``split`` have
arrived (``team_wait``, acquire). Every program then reads all partials (``team_partials``), combines them and
writes its chunk; a second increment counts the readers (``team_release``): the last one poisons ``stats[row]``
with NaN and zeroes ``arrived[row]`` again, so the next launch starts from the same state without a fill kernel,
and a program that ever read a partial nobody had published produces NaN, which the correctness gate rejects.

Loading the chunk of the team's *next* row between publishing and waiting (so that HBM stays busy while the
team waits) was built and timed on an H200: slower in all nine wide-row cases, since the second chunk's
registers halve the programs an SM holds, and four resident programs an SM already overlap one's wait with
another's loads (docs/kernel-notes.md, session 14). It is not kept.

The wait needs every program of a team resident at once: ``prepare_team_launch`` sizes the grid from the
compiled kernel's registers and shared memory (``launch_resident``, which ``layernorm.triton_persistent`` uses
too, so that none of its persistent programs waits for a free SM). ``PHASE``: 0 on a GPU (one launch, with the
wait); the interpreter runs programs one after another, so a waiting program would wait for a teammate that has not
started: there the launcher runs PHASE 1 (publish) and then PHASE 2 (combine, write), the same arithmetic
with the launch boundary as the barrier.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

# Spin bound of the team barrier: under 1 us an L2 atomic round trip, so some tens of milliseconds
# before a program gives up, where teammates arrive within microseconds (a context switch freezes the
# whole team, so it does not count). It never should give up (the grid is sized so that every program
# is resident at once); if it does, the program reads the NaN that poisons unpublished partials, so the
# sweep and the correctness gate record a wrong result after one call instead of a job hanging.
MAX_SPINS = 1 << 16

# Thread blocks an SM can hold, whatever their size (sm_80 and sm_90).
MAX_BLOCKS_PER_SM = 32
# Shared memory the hardware reserves for each resident block, beyond what the kernel asks (1 KB on sm_80 and sm_90).
RESERVED_SHARED_PER_BLOCK = 1024


@triton.jit
def team_publish(stats_ptr, arrived_ptr, row, part, a, b, SPLIT_BLOCK: tl.constexpr):
    """Publish this program's partials ``(a, b)`` for ``row`` and count it as arrived; returns the count."""
    row_stats = stats_ptr + row * (2 * SPLIT_BLOCK)
    tl.store(row_stats + part, a)
    tl.store(row_stats + SPLIT_BLOCK + part, b)
    # every thread's stores before the one thread that performs the scalar atomic releases them
    tl.debug_barrier()
    return tl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1


@triton.jit
def team_wait(arrived_ptr, row, split, arrived, MAX_SPINS: tl.constexpr):
    """Spin until all ``split`` programs of the team have arrived at ``row`` (at most ``MAX_SPINS`` polls)."""
    spins = 0
    while (arrived < split) & (spins < MAX_SPINS):
        arrived = tl.atomic_add(arrived_ptr + row, 0, sem="acquire", scope="gpu")
        spins += 1
    tl.debug_barrier()


@triton.jit
def team_partials(stats_ptr, row, split, other_a, other_b, SPLIT_BLOCK: tl.constexpr):
    """All published ``(a, b)`` partials of ``row`` as two [SPLIT_BLOCK] vectors (``other_*`` past ``split``)."""
    row_stats = stats_ptr + row * (2 * SPLIT_BLOCK)
    parts = tl.arange(0, SPLIT_BLOCK)
    # volatile: straight from L2, never a stale L1 line
    a = tl.load(row_stats + parts, mask=parts < split, other=other_a, volatile=True)
    b = tl.load(row_stats + SPLIT_BLOCK + parts, mask=parts < split, other=other_b, volatile=True)
    return a, b


@triton.jit
def team_release(stats_ptr, arrived_ptr, row, split, SPLIT_BLOCK: tl.constexpr):
    """Count this program as a reader of ``row``'s partials; the last reader poisons them and resets the count."""
    # all of this program's reads of the partials happen before it counts itself as a reader
    tl.debug_barrier()
    readers = tl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
    if readers == 2 * split:
        row_stats = stats_ptr + row * (2 * SPLIT_BLOCK)
        parts = tl.arange(0, SPLIT_BLOCK)
        tl.store(row_stats + parts, float("nan"))
        tl.store(row_stats + SPLIT_BLOCK + parts, float("nan"))
        tl.atomic_xchg(arrived_ptr + row, 0, sem="release", scope="gpu")


def split_parts(n_cols: int, chunk: int) -> int:
    """Programs per row (the team size) for chunks of ``chunk`` columns."""
    return triton.cdiv(n_cols, chunk)


def resident_programs(n_regs: int | None, num_warps: int, shared_bytes: int, limits) -> int:
    """Programs of one kernel that fit on the whole device at once (what the team barrier relies on), from
    the compiled kernel's registers and shared memory; with no register count (the interpreter, or a
    Triton without the handle), one program per SM, which fits whenever the kernel launches at all."""
    if not n_regs:
        return limits["num_sms"]
    threads = 32 * num_warps
    regs_per_warp = -(-n_regs * 32 // 256) * 256  # registers are allocated per warp, 256 at a time
    per_sm = min(
        limits["max_threads_per_sm"] // threads, limits["regs_per_sm"] // (regs_per_warp * num_warps), MAX_BLOCKS_PER_SM
    )
    if shared_bytes:  # the SM's shared memory, each block's with the hardware's reservation
        per_sm_shared = limits.get("shared_mem_per_sm", limits["max_shared_mem_per_block"])
        per_sm = min(per_sm, per_sm_shared // (shared_bytes + RESERVED_SHARED_PER_BLOCK))
    return limits["num_sms"] * max(per_sm, 1)


def split_grid(n_rows: int, split: int, programs_per_sm: int, resident: int, num_sms: int) -> int:
    """Grid size: whole teams only, ``num_sms * programs_per_sm`` programs at most, never more than can be
    resident at once, never more teams than rows. Raises if not even one team can be resident."""
    if split > resident:
        raise ValueError(
            f"a row needs a team of {split} programs but only {resident} can be resident at once: use a wider CHUNK"
        )
    teams = max(1, min(n_rows, min(num_sms * programs_per_sm, resident) // split))
    return teams * split


class SplitWorkspace:
    """Per-row partials (NaN when unpublished) and arrival counters: allocated once per prepared launch,
    restored by the kernel itself at the end of each row."""

    def __init__(self, n_rows: int, split_block: int, device: torch.device) -> None:
        self.stats = torch.full((n_rows, 2, split_block), float("nan"), dtype=torch.float32, device=device)
        self.arrived = torch.zeros(n_rows, dtype=torch.int32, device=device)


def prepare_team_launch(
    kernel,
    args: tuple,
    meta: dict,
    n_rows: int,
    split: int,
    programs_per_sm: int,
    limits,
    work: SplitWorkspace,
    out: torch.Tensor,
) -> Callable[[], torch.Tensor]:
    """A ``run()`` that launches ``kernel[grid](*args, PHASE=..., **meta)`` with whole, co-resident teams and
    returns ``out`` (the tensor the kernel writes).

    Under the interpreter: two launches (PHASE 1 then 2) on a grid with no residency limit. On a GPU: one
    launch (PHASE 0); the first call compiles the kernel (so its time includes the compile, like every other
    Triton launch' first call) and sizes the grid from the compiled kernel's registers and shared memory.
    ``run.workspace`` is ``work``, for tests."""
    if limits["interpreter"]:
        grid = (split_grid(n_rows, split, programs_per_sm, n_rows * split, limits["num_sms"]),)

        def run() -> torch.Tensor:
            kernel[grid](*args, PHASE=1, **meta)
            kernel[grid](*args, PHASE=2, **meta)
            return out

        run.workspace = work
        return run
    run = launch_resident(
        kernel,
        args,
        {**meta, "PHASE": 0},
        limits,
        lambda resident: (split_grid(n_rows, split, programs_per_sm, resident, limits["num_sms"]),),
        out,
    )
    run.workspace = work
    return run


def resident_on_device(kernel, args: tuple, meta: dict, limits) -> int:
    """Programs of ``kernel[grid](*args, **meta)`` the device holds at once (``resident_programs``), from the
    compiled kernel: compiles it (or finds it in Triton's cache) for these arguments."""
    compiled_kernel = kernel.warmup(*args, grid=(1,), **meta)
    n_regs = None
    if hasattr(compiled_kernel, "_init_handles"):  # Triton 3.x: known once the binary is loaded
        compiled_kernel._init_handles()
        n_regs = getattr(compiled_kernel, "n_regs", None)
    return resident_programs(n_regs, int(meta["num_warps"]), int(compiled_kernel.metadata.shared), limits)


def launch_resident(
    kernel, args: tuple, meta: dict, limits, grid_for: Callable[[int], tuple[int]], out: torch.Tensor
) -> Callable[[], torch.Tensor]:
    """A ``run()`` that launches ``kernel[grid_for(resident)](*args, **meta)`` and returns ``out``, ``resident``
    being ``resident_on_device``: worked out on the first call, which therefore includes the compile (like
    every Triton launch's first call), and kept."""
    sized: list[tuple[int]] = []

    def run() -> torch.Tensor:
        if not sized:
            sized.append(grid_for(resident_on_device(kernel, args, meta, limits)))
        kernel[sized[0]](*args, **meta)
        return out

    return run


# --- the config policy both team kernels share -----------------------------------------------------------

# Widest chunk of the default.
MAX_SPLIT_CHUNK = 8192


def team_default(n_cols: int) -> dict:
    """A quarter of the padded row a program (so even the CPU shapes split into teams of 3-4), at most
    8192 columns: 32 fp32 values a thread at 8 warps, live across the barrier (64 registers in the sm_90
    softmax build, so 4 programs an SM are resident: one loads or stores while another waits)."""
    chunk = max(16, min(MAX_SPLIT_CHUNK, triton.next_power_of_2(n_cols) // 4))
    return {"CHUNK": chunk, "num_warps": min(8, max(1, chunk // 1024)), "programs_per_sm": 4}


# Listed most promising first. 16-64 values a thread, so x stays in registers across the barrier; the
# ptxas register counts for sm_90 (softmax, fp16, triton 3.7) bound the resident programs an SM: 4096/4
# warps 56 regs (9 an SM), 8192/8 64 (4), 16384/16 84 (1), 16384/8 128 (1), 32768/16 107 (1).
TEAM_SPACE = (
    {"CHUNK": 8192, "num_warps": 8, "programs_per_sm": 4},
    {"CHUNK": 4096, "num_warps": 4, "programs_per_sm": 8},
    {"CHUNK": 16384, "num_warps": 16, "programs_per_sm": 1},
    {"CHUNK": 8192, "num_warps": 8, "programs_per_sm": 2},
    {"CHUNK": 16384, "num_warps": 8, "programs_per_sm": 1},
    {"CHUNK": 32768, "num_warps": 16, "programs_per_sm": 1},
)


def team_configs(n_cols: int) -> list[dict]:
    default = team_default(n_cols)
    space = [dict(c) for c in TEAM_SPACE]
    return space if default in space else [default, *space]


def team_prune(config, n_cols: int, limits) -> str | None:
    """Why ``config`` is not swept for rows of ``n_cols``; None if it is. A config's ``BLOCKS`` (1 where absent)
    gives each program a segment of that many ``CHUNK``-wide blocks: the team is sized by the segment, the
    registers by the chunk."""
    chunk, threads = int(config["CHUNK"]), 32 * int(config["num_warps"])
    segment = chunk * int(config.get("BLOCKS", 1))
    padded = triton.next_power_of_2(n_cols)
    if segment > max(16, padded // 2):
        what = f"CHUNK={chunk}" if segment == chunk else f"a segment of {segment} columns"
        return f"{what} leaves fewer than two programs for a {padded}-wide padded row: nothing is split"
    if chunk // threads > 64:
        return f"{chunk // threads} fp32 values a thread held across the barrier: registers spill"
    if chunk < threads and threads > 32:
        return f"CHUNK={chunk} is less than one value for each of {threads} threads: whole warps idle"
    split = split_parts(n_cols, segment)
    if not limits.get("interpreter") and split > limits["num_sms"]:  # the interpreter runs two launches, no wait
        return f"a team of {split} programs a row is more than one per SM ({limits['num_sms']}): use a wider CHUNK"
    return None
