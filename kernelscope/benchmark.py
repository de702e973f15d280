"""Timing stage: every implementation of one case, measured in one job on the same inputs.

Order: the primary baseline (block A1), the other baselines, the Triton variants at the config the
sweep chose, then the primary baseline again (block A2). A1 vs A2 is the A/A noise floor of this job:
a Triton-vs-baseline difference smaller than it cannot be told from measuring the baseline twice.
Each implementation's first call (JIT / torch.compile, from a cold cache directory set by the CLI) is
recorded apart from its steady-state samples. Launch-bound cases also get CUDA-graph replay timing
and host wall time per call.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping
from typing import Any

import torch

from kernelscope import clocks, faults, runtime, stats, timing
from kernelscope.spec import Implementation, KernelSpec, Shape


def _measure_impl(spec: KernelSpec, impl: Implementation, inputs, shape: Shape, dtype: torch.dtype,
                  config: Mapping[str, Any], settings: timing.TimingSettings,
                  monitor: clocks.ClockMonitor | None) -> dict[str, Any]:
    started = time.perf_counter()
    rec: dict[str, Any] = {"implementation": impl.name, "kind": impl.kind, "config": dict(config)}
    reason = impl.unsupported_reason(shape, dtype)
    if reason:
        return {**rec, "status": "unsupported", "reason": reason}
    try:
        out = spec.make_output(inputs)
        prepared = time.perf_counter()
        fn = impl.prepare(inputs, out, config)
        # building the callable: for torch.compile this holds the process's first import of Dynamo and
        # Inductor, a cost the first call (its compile) does not include
        rec["prepare_ms"] = (time.perf_counter() - prepared) * 1e3
        with torch.no_grad(), faults.bounded(impl.name):
            rec.update(timing.measure(fn, settings, monitor))
            if rec["median_us"] < settings.graph_below_us:
                rec["graph"] = timing.graph_replay_us(fn, settings.graph_calls)
                rec["host_wall_us"] = timing.host_wall_us(fn, settings.host_calls)
        rec["status"] = "ok"
    except Exception as exc:  # a failing (hanging, OOM) implementation is recorded; the others still run
        rec.update({"status": faults.status(exc), "reason": f"{type(exc).__name__}: {exc}"[:2000],
                    "traceback": traceback.format_exc(limit=6)})
        faults.after_failure()
    # everything this implementation cost the job: prepare, first call, clock warm-up, warm-up, samples,
    # graph replay and host timing (``wall_s`` is the sampling alone)
    rec["job_wall_s"] = time.perf_counter() - started
    return rec


def time_case(spec: KernelSpec, shape: Shape, dtype: torch.dtype, best_configs: Mapping[str, Mapping[str, Any]],
              settings: timing.TimingSettings, failed_correctness: Mapping[str, str] | None = None,
              seed: int = 0) -> dict[str, Any]:
    """``best_configs`` maps each Triton variant to the config its sweep chose (absent: no valid config).
    Implementations in ``failed_correctness`` are not timed: a fast wrong kernel is not a result."""
    failed_correctness = failed_correctness or {}
    started = time.perf_counter()
    device = runtime.device()
    inputs = spec.make_inputs(shape, dtype, device, seed)
    monitor = clocks.ClockMonitor() if runtime.select_backend() == "cuda" else None
    primary = spec.implementation(spec.primary_baseline)
    if monitor is not None and monitor.available:
        warm = primary.prepare(inputs, spec.make_output(inputs), {})
        monitor.settle(warm, seconds=settings.clock_warmup_s * 2)
    setup_s = time.perf_counter() - started  # inputs, NVML, the clock settle

    def run(impl: Implementation, config: Mapping[str, Any]) -> dict[str, Any]:
        if impl.name in failed_correctness:
            return {"implementation": impl.name, "kind": impl.kind, "status": "not_timed",
                    "reason": f"failed the correctness gate: {failed_correctness[impl.name]}"}
        return _measure_impl(spec, impl, inputs, shape, dtype, config, settings, monitor)

    results = []
    # if a hang cannot be interrupted, the job writes what it has (faults.bounded); no A2 block, no A/A floor
    faults.on_abandon(lambda label: {"primary_baseline": primary.name, "settings": dataclasses.asdict(settings),
                                     "aa_floor": None, "setup_s": setup_s,
                                     "implementations": [*results, faults.abandoned_record(label)]})
    results.append({**run(primary, {}), "block": "A1"})
    for impl in spec.baselines:
        if impl.name != primary.name:
            results.append(run(impl, {}))
    for impl in spec.triton_variants:
        config = best_configs.get(impl.name)
        if config is None and impl.unsupported_reason(shape, dtype):
            results.append({"implementation": impl.name, "kind": impl.kind, "status": "unsupported",
                            "reason": impl.unsupported_reason(shape, dtype)})
            continue
        if config is None:
            results.append({"implementation": impl.name, "kind": impl.kind, "status": "no_config",
                            "reason": "the sweep found no valid config for this case"})
            continue
        results.append(run(impl, config))
    results.append({**run(primary, {}), "block": "A2"})
    a1, a2 = results[0], results[-1]
    aa = stats.aa_floor(a1["samples_us"], a2["samples_us"]) if a1["status"] == a2["status"] == "ok" else None
    return {
        "primary_baseline": primary.name,
        "settings": dataclasses.asdict(settings),
        "nvml": monitor.static_info() if monitor else {"nvml": "not used: no CUDA device"},
        "steady_sm_mhz": monitor.steady_sm_mhz if monitor else None,
        "aa_floor": aa,
        "setup_s": setup_s,
        "implementations": results,
    }
