"""Timing stage: every implementation of one case, measured in one job on the same inputs.

Order: the primary baseline (block A1), the other baselines, the Triton variants at the config the
sweep chose, then the primary baseline again (block A2). A1 vs A2 is the A/A noise floor of this job:
a Triton-vs-baseline difference smaller than it cannot be told from measuring the baseline twice.

Only the sampling holds the GPU exclusively (:mod:`kernelscope.gpus`), in one section for all of them.
Before it: inputs, every closure, every Triton compile (``compile_ms``, no lock, from a cold cache
directory set by the CLI) and every first call (``first_call_ms``, shared lock; for torch.compile this is
its compile). Short cases, and cases whose event samples may hold launch gaps, also get CUDA-graph replay
timing (cold L2 where the samples are) and host wall time per call.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping
from typing import Any

import torch

from kernelscope import baselines, claims, clocks, faults, gpus, placement, runtime, stats, timing
from kernelscope.spec import Implementation, KernelSpec, Shape


def _error(rec: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """The record of an implementation that raised: its status says how (timeout, oom, compile_error, error)."""
    faults.after_failure()
    return {
        **rec,
        "status": faults.status(exc),
        "reason": f"{type(exc).__name__}: {exc}"[:2000],
        "traceback": traceback.format_exc(limit=6),
    }


def wants_graph(rec: Mapping[str, Any], settings: timing.TimingSettings) -> bool:
    """Short cases, and any case whose event samples may hold launch gaps (``claims.launch_bound``), get
    CUDA-graph replay timing: without it such a record cannot be compared by device time."""
    return rec["median_us"] < settings.graph_below_us or claims.starved_fraction(rec) > claims.STARVED_LIMIT


class _Prepared:
    """One implementation made ready outside the exclusive section: output allocated, closure built,
    Triton kernels compiled (no lock), first call made (shared lock)."""

    def __init__(self, spec: KernelSpec, impl: Implementation, inputs, config: Mapping[str, Any]) -> None:
        self.impl = impl
        self.fn = None
        #: what the closure reads and writes (the case's input tensors and its own output): what rotates
        self.tensors: list[torch.Tensor] = []
        self.rec: dict[str, Any] = {"implementation": impl.name, "kind": impl.kind, "config": dict(config)}
        started = time.perf_counter()
        retried: list[str] = []
        try:
            self.fn = faults.retry_oom(lambda: self._prepare(spec, impl, inputs, config), retried)
        except Exception as exc:  # a failing implementation is recorded; the others still run
            self.rec = _error(self.rec, exc)
        if retried:  # out of memory, then prepared again: the card's memory was (also) other jobs'
            self.rec["oom_retries"] = retried
        self.wall_s = time.perf_counter() - started

    def _prepare(self, spec: KernelSpec, impl: Implementation, inputs, config: Mapping[str, Any]):
        """One attempt at the preparation (``faults.retry_oom`` makes another after an out-of-memory fault). The
        one-time costs (prepare, compile, first call) are the first attempt's: a later one finds the imports done
        and the kernels compiled and loaded."""
        started = time.perf_counter()  # this attempt's: an earlier attempt's wait is not preparation
        out = spec.make_output(inputs)
        self.tensors = [*_tensors(inputs), out]
        fn = impl.prepare(inputs, out, config)
        # building the callable: for torch.compile this holds the process's first import of Dynamo and
        # Inductor (the CLI imports them before any lock), a cost the first call does not include
        self.rec.setdefault("prepare_ms", (time.perf_counter() - started) * 1e3)
        with torch.no_grad():
            if impl.kind == "triton":  # a baseline's closure would run its kernels for real
                kernels: list[dict[str, Any]] = []
                self.rec.setdefault("compile_ms", timing.compile_only(fn, kernels))
                if kernels:
                    self.rec.setdefault("kernels", kernels)
            compiles = impl.kind == "compile"
            loaded = {id(m) for m in baselines._loaded_inductor_modules()} if compiles else set()
            with gpus.shared(f"first call {impl.name}"), faults.bounded(impl.name):
                first_call_ms = timing.first_call(fn)
            self.rec.setdefault("first_call_ms", first_call_ms)
            if compiles:  # the configs Inductor chose at that call (tuned per process)
                new = [m for m in baselines._loaded_inductor_modules() if id(m) not in loaded]
                self.rec.setdefault("compiled_config", baselines.inductor_choices(new or None))
        return fn


def _measure(
    prepared: _Prepared,
    settings: timing.TimingSettings,
    monitor: clocks.ClockMonitor | None,
    flush: timing.L2Flusher,
    block: str | None = None,
    seed_method: bool = False,
    placements: placement.Placements | None = None,
) -> dict[str, Any]:
    # A2 measures A1's closure again: its preparation, compile and first call belong to A1
    rec = {
        k: v for k, v in prepared.rec.items() if block != "A2" or k not in ("prepare_ms", "first_call_ms", "compile_ms")
    }
    if block:
        rec["block"] = block
    if prepared.fn is None:
        return rec
    started = time.perf_counter()
    try:
        with torch.no_grad(), faults.bounded(prepared.impl.name):
            rec.update(timing.measure(prepared.fn, settings, monitor, with_first_call=False, flush=flush))
            if wants_graph(rec, settings):
                _add_graph(rec, prepared, settings, flush)
            _add_device(rec, prepared, settings, monitor, flush, seed_method, placements)
        rec["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a failing (hanging, OOM) implementation is recorded; the others run
        rec = _error(rec, exc)
    # everything this implementation cost the job: prepare, compile, first call, warm-ups, samples, graph
    # replay and host timing (``wall_s`` is the sampling alone)
    rec["job_wall_s"] = (prepared.wall_s if block != "A2" else 0.0) + time.perf_counter() - started
    return rec


def _add_device(
    rec: dict[str, Any],
    prepared: _Prepared,
    settings: timing.TimingSettings,
    monitor: clocks.ClockMonitor | None,
    flush: timing.L2Flusher,
    seed_method: bool,
    placements: placement.Placements | None = None,
) -> None:
    """The device-time basis (CUPTI kernel timestamps; its calls rotate over ``placements`` of the case's
    tensors where there are several), sustained load for long records, host launch cost per call, and the
    seed document's method where the case is one the seed measured."""
    if runtime.select_backend() != "cuda":
        return
    fn = placements.rotating(prepared.fn, prepared.tensors) if placements is not None else prepared.fn
    rec["device"] = timing.measure_device(fn, settings, flush, rec["median_us"], monitor)
    if placements is not None and rec["device"].get("status") == "ok":
        rec["device"]["placements"] = placements.copies
    device_us = rec["device"].get("median_us", rec["median_us"])
    if device_us >= settings.sustained_above_us:
        rec["sustained"] = timing.measure_sustained(prepared.fn, settings, flush, monitor)
    if rec.get("host_wall_us") is None:  # a long kernel's launch cost: few calls, enough to average
        rec["host_wall_us"] = timing.host_wall_us(
            prepared.fn, max(3, min(settings.host_calls, int(5e3 / max(device_us, 1e-3))))
        )
    if seed_method:
        rec["seed_method"] = timing.seed_method(prepared.fn, settings)


def graph_calls(rec: Mapping[str, Any], settings: timing.TimingSettings) -> int:
    """Launches per captured graph: ``graph_calls`` for a record shorter than ``graph_below_us``, else as many
    as hold about ``graph_calls * graph_below_us`` of its time (at least one). A long record gets a graph only
    when some record of its case is launch-bound, and 20 calls of a 15 ms naive baseline, replayed 30 times,
    took 9 s of the card's exclusive time (the 6ae207e default run, attention fp16 causal)."""
    budget_us = settings.graph_calls * settings.graph_below_us
    return max(1, min(settings.graph_calls, int(budget_us // max(rec["median_us"], 1e-3))))


def _add_graph(
    rec: dict[str, Any], prepared: _Prepared, settings: timing.TimingSettings, flush: timing.L2Flusher
) -> None:
    rec["graph"] = timing.graph_replay_us(prepared.fn, graph_calls(rec, settings), flush=flush)
    rec["host_wall_us"] = timing.host_wall_us(prepared.fn, settings.host_calls)


def _tensors(inputs) -> list[torch.Tensor]:
    return [t for t in inputs.values() if isinstance(t, torch.Tensor)]


def _placements(slots: list, settings: timing.TimingSettings) -> placement.Placements | None:
    """Copies of the case's tensors (its inputs, every prepared output) for the device-time samples to rotate
    over, each closure called once at each of its placements before the exclusive section (shared lock). None
    under the interpreter, with ``placements: 1``, or where the budget allows one copy."""
    prepared = [s for s in slots if isinstance(s, _Prepared) and s.fn is not None]
    if runtime.select_backend() != "cuda" or settings.placements <= 1 or not prepared:
        return None
    with gpus.shared("placements"):
        tensors = [t for s in prepared for t in s.tensors]
        places = placement.for_case(tensors, settings.placements, settings.placement_bytes)
        if places is None:
            return None
        for slot in prepared:
            try:
                with torch.no_grad(), faults.bounded(slot.impl.name):
                    places.warm(slot.fn, slot.tensors)
            except Exception as exc:  # noqa: BLE001 - recorded as the implementation's failure; the others run
                slot.rec = _error(slot.rec, exc)
                slot.fn = None
        runtime.synchronize()
    return places


def time_case(
    spec: KernelSpec,
    shape: Shape,
    dtype: torch.dtype,
    best_configs: Mapping[str, Mapping[str, Any]],
    settings: timing.TimingSettings,
    failed_correctness: Mapping[str, str] | None = None,
    seed: int = 0,
    seed_method: bool = False,
) -> dict[str, Any]:
    """``best_configs`` maps each Triton variant to the config its sweep chose (absent: no valid config).
    Implementations in ``failed_correctness`` are not timed: a fast wrong kernel is not a result.

    Everything but the sampling happens before the GPU is taken exclusively; the samples of every
    implementation (A1, baselines, Triton variants, A2) are then taken in one exclusive section."""
    failed_correctness = failed_correctness or {}
    started = time.perf_counter()
    device = runtime.device()
    with gpus.shared("inputs"):
        inputs = spec.make_inputs(shape, dtype, device, seed)
        runtime.synchronize()
    monitor = clocks.ClockMonitor(gpus.bound_uuid()) if runtime.select_backend() == "cuda" else None
    primary = spec.implementation(spec.primary_baseline)

    def skipped(impl: Implementation, config: Mapping[str, Any] | None) -> dict[str, Any] | None:
        base = {"implementation": impl.name, "kind": impl.kind}
        if impl.name in failed_correctness:
            failure = str(failed_correctness[impl.name])
            # a case whose reference raised was not checked at all (kernelscope.correctness), not failed
            why = failure if failure.startswith("not checked") else f"failed the correctness gate: {failure}"
            return {**base, "status": "not_timed", "reason": why}
        reason = impl.unsupported_reason(shape, dtype)
        if reason:
            return {**base, "status": "unsupported", "reason": reason}
        if config is None:
            return {**base, "status": "no_config", "reason": "the sweep found no valid config for this case"}
        return None

    order: list[tuple[Implementation, dict[str, Any] | None]] = [(primary, {})]
    order += [(impl, {}) for impl in spec.baselines if impl.name != primary.name]
    order += [(impl, best_configs.get(impl.name)) for impl in spec.triton_variants]
    slots: list[dict[str, Any] | _Prepared | None] = []
    results: list[dict[str, Any]] = []
    # if a hang cannot be interrupted, the job writes what it has (faults.bounded): the records measured so
    # far, else those prepared so far; no A2 block, no A/A floor
    faults.on_abandon(
        lambda label: {
            "primary_baseline": primary.name,
            "settings": dataclasses.asdict(settings),
            "aa_floor": None,
            "implementations": [
                *(results or [s.rec if isinstance(s, _Prepared) else s for s in slots if s is not None]),
                faults.abandoned_record(label),
            ],
        }
    )
    # Prepared (compiled, loaded, first called) Triton variants first, then the baselines; sampled in ``order``.
    # The sweep ranks a variant's configs in a process where no baseline has run; a config loaded after the
    # baselines' first calls has run slower than in its sweep (docs/timing-basis.md, "The sweep and the timing
    # stage on one wide-row config").
    slots.extend([None] * len(order))
    for i in sorted(range(len(order)), key=lambda i: order[i][0].kind != "triton"):
        impl, config = order[i]
        slots[i] = skipped(impl, config) or _Prepared(spec, impl, inputs, config)
    placements = _placements(slots, settings)
    setup_s = time.perf_counter() - started  # inputs, every prepare, compile and first call, the placements

    flush = timing.L2Flusher(settings.flush_l2)
    exclusive_started = time.perf_counter()
    with gpus.exclusive("timing"):
        if monitor is not None and monitor.available and isinstance(slots[0], _Prepared) and slots[0].fn:
            monitor.settle(slots[0].fn, seconds=settings.clock_warmup_s * 2)
        for i, slot in enumerate([*slots, slots[0]]):
            block = "A1" if i == 0 else "A2" if i == len(slots) else None
            if isinstance(slot, _Prepared):
                results.append(
                    _measure(slot, settings, monitor, flush, block, seed_method and block != "A2", placements)
                )
            else:
                results.append({**slot, **({"block": block} if block else {})})
        # a launch-bound record is compared by graph replay, which needs the other side's graph too
        if any(r.get("status") == "ok" and claims.launch_bound(r) for r in results):
            prepared = {s.impl.name: s for s in slots if isinstance(s, _Prepared)}
            for rec in results:
                if rec.get("status") == "ok" and "graph" not in rec:
                    _add_graph(rec, prepared[rec["implementation"]], settings, flush)
    exclusive_s = time.perf_counter() - exclusive_started
    a1, a2 = results[0], results[-1]
    aa = stats.aa_floor(a1["samples_us"], a2["samples_us"]) if a1["status"] == a2["status"] == "ok" else None
    return {
        "primary_baseline": primary.name,
        "settings": dataclasses.asdict(settings),
        "nvml": monitor.static_info() if monitor else {"nvml": "not used: no CUDA device"},
        "steady_sm_mhz": monitor.steady_sm_mhz if monitor else None,
        "aa_floor": aa,
        "setup_s": setup_s,
        "sampling_section_s": exclusive_s,
        "implementations": results,
    }
