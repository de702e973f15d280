"""Profile stage: which device kernels each implementation actually launches.

``torch.profiler`` records every CUDA kernel launched during a few calls (after a warm-up, so JIT and
autotuning launches are excluded): name, launches per call and device time. Extra kernels (memsets,
casts, copies) become visible; the name says which backend ATen/cuBLAS/cuDNN/Inductor picked.
Profiling is kept apart from timing: profiler overhead never enters a timed sample.
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kernelscope import gpus, runtime, timing
from kernelscope.spec import KernelSpec, Shape


def _device_time_us(event) -> float:
    """Duration of a device-side profiler event (the kernel's own execution interval)."""
    time_range = getattr(event, "time_range", None)
    if time_range is not None:
        return float(time_range.elapsed_us())
    # older/newer torch spell the aggregate cuda_time / device_time: detect the attribute
    for attr in ("device_time", "cuda_time", "self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, attr, None)
        if value is not None:
            return float(value)
    return 0.0


def kernels_launched(fn, calls: int) -> list[dict[str, Any]]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "device_us": 0.0})
    for event in prof.events():
        if "CUDA" not in str(getattr(event, "device_type", "")):
            continue
        totals[event.name]["count"] += 1
        totals[event.name]["device_us"] += _device_time_us(event)
    return sorted(
        (
            {"name": name, "launches_per_call": v["count"] / calls, "device_us_per_call": v["device_us"] / calls}
            for name, v in totals.items()
        ),
        key=lambda r: -r["device_us_per_call"],
    )


def profile_case(
    spec: KernelSpec,
    shape: Shape,
    dtype: torch.dtype,
    best_configs: Mapping[str, Mapping[str, Any]],
    calls: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    if runtime.select_backend() != "cuda":
        return {
            "captured": False,
            "reason": "no CUDA device: Triton ran in interpreter mode on the CPU, so no GPU kernel was launched "
            "and nothing could be captured",
            "implementations": [],
        }
    with gpus.shared("profile inputs"):
        inputs = spec.make_inputs(shape, dtype, runtime.device(), seed)
    records = []
    for impl in spec.implementations:
        rec: dict[str, Any] = {"implementation": impl.name, "kind": impl.kind}
        reason = impl.unsupported_reason(shape, dtype)
        config = best_configs.get(impl.name, {}) if impl.kind == "triton" else {}
        if reason or (impl.kind == "triton" and impl.name not in best_configs):
            records.append({**rec, "status": "skipped", "reason": reason or "no valid config from the sweep"})
            continue
        try:
            fn = impl.prepare(inputs, spec.make_output(inputs), config)
            if impl.kind == "triton":  # compiled, loaded and its launcher built before the lock (no launch)
                with torch.no_grad():
                    timing.compile_only(fn)
            with torch.no_grad(), gpus.shared(f"profile {impl.name}"):
                rec["kernels"] = kernels_launched(fn, calls)
            rec["config"] = dict(config)
            rec["status"] = "ok"
        except Exception as exc:  # recorded, the other implementations still run
            rec.update(
                {
                    "status": "error",
                    "reason": f"{type(exc).__name__}: {exc}"[:2000],
                    "traceback": traceback.format_exc(limit=6),
                }
            )
        records.append(rec)
    return {"captured": True, "calls": calls, "implementations": records}
