"""Optional Nsight Compute stage: hardware counters for each Triton variant of a case and its eager baselines.

``ncu`` runs ``python -m kernelscope ncu-target ...`` (which warms every variant up, then calls each once
between ``cudaProfilerStart``/``Stop``, inside an NVTX range named after the implementation) with
``--profile-from-start off``, so only those calls are profiled, ``--nvtx --nvtx-include <range>/`` for each
implementation, so each profiled kernel is attributed to its implementation by name (not by launch order),
and ``--clock-control none``, so the card's clocks are left as they are. The counters answer
*why* a kernel sits where it does on the roofline: DRAM throughput, achieved occupancy, registers per
thread, local-memory (spill) traffic, SM and issue-slot utilisation, and the warp stall reasons (the average
number of warps stalled on each reason per issued instruction, as ncu's WarpStateStats section reports them).
The eager baselines (cuBLAS, cuDNN's SDPA, torch's own kernels) are profiled beside the Triton variants, so a
gap to the vendor kernel has counters on both sides.

Where ``ncu`` is not on ``PATH``, where there is no CUDA device, or where ncu cannot read the counters
(e.g. ``ERR_NVGPUCTRPERM``), the stage records that it did not run and why; the report says so.

The CSV layout parsed here is ncu's ``--csv --page raw`` format (a header row of metric names, a row of
units, then one row per profiled kernel); with ``--nvtx`` a column named after the NVTX state (its domain and
push/pop range stack) carries each kernel's ranges, where :func:`parse_csv` finds the implementation's range.
That parsing ran on an H200 in session 10, and with the utilisation and stall metrics and the baselines' rows
in session 13 (docs/kernel-notes.md, "Session 13").
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: the warp stall reasons recorded (ncu's WarpStateStats names, without the metric's prefix and suffix)
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "barrier",
    "wait",
    "math_pipe_throttle",
    "mio_throttle",
    "lg_throttle",
    "not_selected",
)

#: what each reported quantity is read from
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "local_load_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "local_store_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "shared_mem_per_block_bytes": "launch__shared_mem_per_block",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    # the L2's share of its peak and the bytes through it, and the bytes the SMs load from global memory (not by
    # TMA): what tells an L2-bound kernel from a DRAM-bound one
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_bytes": "lts__t_bytes.sum",
    "global_load_bytes": "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    # what a kernel spends energy on besides its tensor-core work: the bytes it moves from DRAM and the
    # instructions it issues; and the SM clock it ran at under ncu (unlocked: the card's own clock), so a replay
    # that ran slower than the timing runs shows it
    "dram_bytes": "dram__bytes.sum",
    "inst_executed": "smsp__inst_executed.sum",
    "sm_clock_hz": "smsp__cycles_elapsed.avg.per_second",
    **{
        f"stall_{reason}": f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"
        for reason in STALL_REASONS
    },
}


#: NVTX push/pop range around each implementation's profiled call: ``kernelscope.<implementation>``
NVTX_PREFIX = "kernelscope."
_NVTX_RANGE = re.compile(re.escape(NVTX_PREFIX) + r"([A-Za-z0-9_]+)")


def nvtx_range(implementation: str) -> str:
    return NVTX_PREFIX + implementation


def command(target: Sequence[str], implementations: Sequence[str], ncu: str = "ncu") -> list[str]:
    """The ncu command line: only kernels inside the named implementations' NVTX ranges are profiled."""
    include = [arg for name in implementations for arg in ("--nvtx-include", f"{nvtx_range(name)}/")]
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--nvtx",
        *include,
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(METRICS.values()),
        *target,
    ]


def _number(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw``: header, units, then one row per profiled kernel launch. Lines
    before the header (ncu's own ``==PROF==`` messages, the target's output) are skipped. ``implementation``
    is the innermost ``kernelscope.<name>`` NVTX range the kernel ran in (None if it ran in none)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, data = rows[0], rows[2:]
    # ncu names the column after the NVTX state it shows (e.g. "thread Domain:Push/Pop_Range:...")
    nvtx_columns = [name for name in header if re.search(r"nvtx|push/pop|domain", name, re.IGNORECASE)]
    out = []
    for row in data:
        if len(row) != len(header):
            continue
        cells = dict(zip(header, row))
        ranges = [m for column in nvtx_columns for m in _NVTX_RANGE.findall(cells[column])]
        out.append(
            {
                "kernel": cells.get("Kernel Name"),
                "implementation": ranges[-1] if ranges else None,
                **{key: _number(cells.get(metric, "")) for key, metric in METRICS.items()},
            }
        )
    return out


def run(target: Sequence[str], implementations: Sequence[str], on_gpu: bool) -> dict[str, Any]:
    """Profile ``target``, which calls each of ``implementations`` once inside its NVTX range; every profiled
    kernel is attributed to the implementation whose range it ran in."""
    if not on_gpu:
        return {"ran": False, "reason": "no CUDA device (Triton interpreter run)"}
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"ran": False, "reason": "ncu (Nsight Compute) is not on PATH"}
    from kernelscope import gpus

    # ncu replays every kernel many times: the card is this job's alone meanwhile; the target process
    # inherits the card and the lock (gpus.child_environment) instead of waiting for it
    with gpus.exclusive("ncu"):
        proc = subprocess.run(
            command(target, implementations, ncu),
            capture_output=True,
            text=True,
            timeout=1800,
            env=gpus.child_environment(),
        )
    rows = parse_csv(proc.stdout)
    if proc.returncode != 0 or not rows:
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"ran": False, "reason": f"ncu exited {proc.returncode} with {len(rows)} kernel rows: {tail}"}
    unattributed = [r["kernel"] for r in rows if r["implementation"] not in implementations]
    missing = [name for name in implementations if name not in {r["implementation"] for r in rows}]
    if unattributed or missing:
        return {
            "ran": False,
            "reason": f"ncu's kernels do not match the implementations' NVTX ranges: "
            f"kernels outside them {unattributed}, implementations without a kernel "
            f"{missing}",
        }
    order = {name: i for i, name in enumerate(implementations)}
    return {
        "ran": True,
        "command": " ".join(command(["<target>"], implementations, "ncu")),
        "kernels": sorted(rows, key=lambda r: order[r["implementation"]]),
    }


def profiled_implementations(spec, shape, dtype, best_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The implementations the stage profiles, in order: the Triton variants the case supports and the sweep
    tuned, then the eager baselines the case supports (torch.compile's are left out: its compile would run
    inside ncu's process)."""
    triton = [
        impl.name
        for impl in spec.triton_variants
        if impl.name in best_configs and impl.unsupported_reason(shape, dtype) is None
    ]
    eager = [
        impl.name for impl in spec.baselines if impl.kind == "eager" and impl.unsupported_reason(shape, dtype) is None
    ]
    return triton + eager


def target(spec, shape, dtype, best_configs: Mapping[str, Mapping[str, Any]], seed: int = 0) -> list[str]:
    """Inside ncu: warm every profiled implementation up (compilation is never profiled), then call each once
    between cudaProfilerStart and cudaProfilerStop, inside its NVTX range. Returns the implementations."""
    import torch

    from kernelscope import runtime

    inputs = spec.make_inputs(shape, dtype, runtime.device(), seed)
    closures = []
    for name in profiled_implementations(spec, shape, dtype, best_configs):
        fn = spec.implementation(name).prepare(inputs, spec.make_output(inputs), best_configs.get(name, {}))
        for _ in range(3):
            fn()
        closures.append((name, fn))
    torch.cuda.synchronize()
    order = []
    for name, fn in closures:
        torch.cuda.profiler.start()
        torch.cuda.nvtx.range_push(nvtx_range(name))
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.profiler.stop()
        order.append(name)
    return order


def target_argv(specs_path: str, kernel: str, shape: str, dtype: str, sweep_path: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kernelscope",
        "ncu-target",
        "--specs",
        specs_path,
        "--kernel",
        kernel,
        "--shape",
        shape,
        "--dtype",
        dtype,
        "--sweep",
        sweep_path,
        "--out",
        "-",
    ]
