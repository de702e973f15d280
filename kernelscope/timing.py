"""Measurement of one closure: first call apart, warm-up apart, then noise-aware sampling.

On CUDA every sample is bracketed by CUDA events; with ``flush_l2`` a buffer twice the L2 size is
overwritten before each sample (outside the events) so each sample starts cold, as nvbench's cold
measurements do. SM/memory clocks, temperature, power and throttle reasons are read through NVML after
every sample, and samples taken while throttled or below the steady clock are flagged, not dropped.
Under the interpreter the host clock is used and the numbers describe the interpreter, nothing else.

Sampling stops (nvbench-style) once there are at least ``min_samples`` samples and ``min_time_s`` of
measured time and the 95 % confidence interval of the median is narrower than ``target_rel_ci`` of the
median, or when ``max_time_s`` / ``max_samples`` is reached; then ``target_reached`` is False.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from kernelscope import clocks, defaults, devicetime, runtime, stats

#: per-thread switch read by the wrapped ``JITFunction.run`` (see compile_only)
_COMPILE_ONLY = threading.local()


_DEFAULTS = defaults.timing_defaults()


@dataclasses.dataclass(frozen=True)
class TimingSettings:
    """How a record is measured. Every default is the config schema's (``kernelscope.defaults``): one source."""

    warmup: int = _DEFAULTS["warmup"]
    min_samples: int = _DEFAULTS["min_samples"]
    max_samples: int = _DEFAULTS["max_samples"]
    min_time_s: float = _DEFAULTS["min_time_s"]
    max_time_s: float = _DEFAULTS["max_time_s"]
    target_rel_ci: float = _DEFAULTS["target_rel_ci"]
    flush_l2: bool = _DEFAULTS["flush_l2"]
    graph_below_us: float = _DEFAULTS["graph_below_us"]
    graph_calls: int = _DEFAULTS["graph_calls"]
    host_calls: int = _DEFAULTS["host_calls"]
    clock_warmup_s: float = _DEFAULTS["clock_warmup_s"]
    batch: int = _DEFAULTS["batch"]
    head_start_us_per_sample: float = _DEFAULTS["head_start_us_per_sample"]
    # device time from CUPTI kernel records (kernelscope.devicetime): about device_time_s of device work
    # per record, between device_min_samples and device_max_samples calls (0 turns the basis off)
    device_time_s: float = _DEFAULTS["device_time_s"]
    device_min_samples: int = _DEFAULTS["device_min_samples"]
    device_max_samples: int = _DEFAULTS["device_max_samples"]
    # the device-time samples rotate over this many copies of the case's tensors at different addresses
    # (kernelscope.placement), as many as placement_bytes of extra device memory holds
    placements: int = _DEFAULTS["placements"]
    placement_bytes: int = _DEFAULTS["placement_bytes"]
    # records whose device time is at least sustained_above_us are also measured under sustained load:
    # sustained_warm_s of back-to-back calls first, then sustained_samples calls with no idle between them
    sustained_above_us: float = _DEFAULTS["sustained_above_us"]
    sustained_warm_s: float = _DEFAULTS["sustained_warm_s"]
    sustained_samples: int = _DEFAULTS["sustained_samples"]
    # the seed document's method for the cases it names (per-sample synchronisation, warm L2)
    seed_warmup: int = _DEFAULTS["seed_warmup"]
    seed_rounds: int = _DEFAULTS["seed_rounds"]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> TimingSettings:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(cfg) - fields
        if unknown:
            raise ValueError(f"unknown timing settings {sorted(unknown)}; known: {sorted(fields)}")
        return cls(**cfg)


class L2Flusher:
    """Overwrites a buffer twice the L2 size before each sample, so each sample starts with a cold L2.
    ``count`` says how many flushes really ran: records report ``l2_flushed`` from it, not from the
    settings. ``device`` and ``l2_bytes`` default to the CUDA device's; a test passes a stand-in."""

    def __init__(self, enabled: bool, device: torch.device | str | None = None, l2_bytes: int | None = None) -> None:
        self.buffer = None
        self.count = 0
        if enabled and (device is not None or runtime.select_backend() == "cuda"):
            l2 = l2_bytes if l2_bytes is not None else runtime.device_limits()["l2_bytes"]
            self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device or "cuda")

    @property
    def active(self) -> bool:
        return self.buffer is not None

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.fill_(0x5A5A5A5A)  # a write of 2x L2 evicts everything the kernel could reuse
            self.count += 1


def _install_compile_only_switch() -> bool:
    """Wrap ``JITFunction.run`` once so that a thread with the switch on compiles instead of launching.
    Triton's own ``JITFunction.warmup`` is a launch with ``warmup=True``: it compiles, runs nothing. The
    switch is per thread, so a sweep's worker threads compile concurrently while other code launches."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    if getattr(JITFunction.run, "_kernelscope_switch", False):
        return True
    original = JITFunction.run
    if "warmup" not in inspect.signature(original).parameters:
        return False

    def run(self, *args, grid, warmup, **kwargs):
        if not getattr(_COMPILE_ONLY, "on", False):
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        kernel = original(self, *args, grid=grid, warmup=True, **kwargs)
        devicetime.load(kernel)  # so the first launch under the GPU lock has nothing left to build
        sink = getattr(_COMPILE_ONLY, "kernels", None)
        if sink is not None and (used := kernel_resources(kernel)) is not None:
            sink.append(used)
        return kernel

    run._kernelscope_switch = True
    JITFunction.run = run
    return True


def kernel_resources(kernel: Any) -> dict[str, Any] | None:
    """What the driver says a loaded Triton kernel takes: registers a thread, local memory a thread (register
    spills and local arrays: the driver's LOCAL_SIZE_BYTES, which Triton keeps as ``n_spills`` in 4-byte words)
    and shared memory a program. None for an object without them (not loaded, another Triton)."""
    registers, spilled = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
    if not isinstance(registers, int) or not isinstance(spilled, int):
        return None
    metadata = getattr(kernel, "metadata", None)
    return {
        "kernel": getattr(kernel, "name", None),
        "registers": registers,
        "local_bytes": 4 * spilled,
        "shared_bytes": getattr(metadata, "shared", None),
    }


def compile_only(fn: Callable[[], Any], kernels: list[dict[str, Any]] | None = None) -> float | None:
    """Compile every Triton kernel ``fn`` would launch, without launching any, and return the wall time
    in milliseconds; None on the interpreter, or where this Triton has no compile-only launch (then the
    first call compiles, as it does when this pass fails). Whatever else the closure does (torch set-up
    ops) still runs; its output is garbage and is ignored. Needs no GPU lock: no kernel of the closure's
    runs, so a sampler on the card sees at most the set-up ops' short kernels. ``kernels``, where given,
    receives each compiled kernel's :func:`kernel_resources`."""
    if runtime.select_backend() != "cuda" or not _install_compile_only_switch():
        return None
    t0 = time.perf_counter()
    _COMPILE_ONLY.on = True
    _COMPILE_ONLY.kernels = kernels
    try:
        fn()
    except Exception:  # noqa: BLE001 - whatever failed here fails again, and is recorded, at the first call
        return None
    finally:
        _COMPILE_ONLY.on = False
        _COMPILE_ONLY.kernels = None
    return (time.perf_counter() - t0) * 1e3


def first_call(fn: Callable[[], Any]) -> float:
    """Wall time of one call including JIT compilation / autotuning, in milliseconds."""
    runtime.synchronize()
    t0 = time.perf_counter()
    fn()
    runtime.synchronize()
    return (time.perf_counter() - t0) * 1e3


def warm_clocks(fn: Callable[[], Any], seconds: float, monitor: clocks.ClockMonitor | None = None) -> None:
    """Run ``fn`` back to back for up to ``seconds`` so the SM clock leaves idle before the first sample.
    With a monitor that knows the steady clock, stop as soon as the clock is there: a card that another
    job just left busy needs no warm-up, and every second here is exclusive GPU time."""
    if runtime.select_backend() != "cuda" or seconds <= 0:
        return
    steady = monitor.steady_sm_mhz if monitor is not None and monitor.available else None
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        if steady and (monitor.read().get("sm_mhz") or 0) >= clocks.STEADY_FRACTION * steady:
            return


def _gpu_sleep(us: float) -> bool:
    """Keep the GPU busy for about ``us`` microseconds (``torch.cuda._sleep`` spins for a number of
    cycles), so the host can enqueue a whole batch of samples before the first one starts."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return False
    khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 2_000_000)  # CUDA reports kHz
    sleep(int(us * khz / 1e3))
    return True


def _sample_batch(fn: Callable[[], Any], flush: L2Flusher, settings: TimingSettings) -> tuple[list[float], int]:
    """Samples in microseconds. On CUDA a batch of samples is enqueued behind a GPU sleep and read after
    one synchronisation: each event pair then brackets the kernel alone, not the host's launch latency
    (synchronising after every sample lets the queue drain, so a kernel shorter than its launch overhead
    would be timed as launch overhead). The L2 flush of each sample runs before its start event.

    The second value counts the samples that may hold a launch gap: those whose launch the host finished
    later than the GPU could have reached their start event (the head start plus the device time of the
    samples before, a lower bound that ignores the flushes), so the GPU may have waited inside the events.
    A call that blocks the host (a hidden synchronisation) shows up here too, rightly: the queue drains."""
    if runtime.select_backend() == "cuda":
        k = max(1, settings.batch)
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]
        head_start_us = (
            settings.head_start_us_per_sample * k if _gpu_sleep(settings.head_start_us_per_sample * k) else 0.0
        )
        t0 = time.perf_counter()
        launched_us = []
        for start, end in pairs:
            flush()
            start.record()
            fn()
            end.record()
            # read after end.record, so no host work sits between the kernel and its end event (this
            # over-states the launch time by one record call: the count errs towards flagging)
            launched_us.append((time.perf_counter() - t0) * 1e6)
        pairs[-1][1].synchronize()
        samples = [start.elapsed_time(end) * 1e3 for start, end in pairs]
        gpu_reaches = head_start_us + np.concatenate([[0.0], np.cumsum(samples[:-1])])
        return samples, int(np.sum(np.asarray(launched_us) > gpu_reaches))
    flush()
    t0 = time.perf_counter()
    fn()
    return [(time.perf_counter() - t0) * 1e6], 0


def measure(
    fn: Callable[[], Any],
    settings: TimingSettings,
    monitor: clocks.ClockMonitor | None = None,
    with_first_call: bool = True,
    flush: L2Flusher | None = None,
) -> dict[str, Any]:
    """Time ``fn``; returns samples (us), summary statistics and clock/flag information. ``flush`` is the
    L2 flusher to use (default: one built from ``settings.flush_l2`` for the CUDA device)."""
    on_gpu = runtime.select_backend() == "cuda"
    result: dict[str, Any] = {
        "timer": "cuda_event" if on_gpu else "host_perf_counter",
        "enqueue": f"batched:{max(1, settings.batch)}" if on_gpu else "host",
    }
    if with_first_call:
        result["first_call_ms"] = first_call(fn)
    for _ in range(settings.warmup):
        fn()
    warm_clocks(fn, settings.clock_warmup_s, monitor)
    runtime.synchronize()
    flush = flush if flush is not None else L2Flusher(settings.flush_l2)
    flushes_before = flush.count
    samples: list[float] = []
    clock_samples: list[dict[str, Any]] = []
    t_begin = time.perf_counter()
    batches = starved_batches = starved_samples = 0
    while True:
        batch, starved = _sample_batch(fn, flush, settings)
        batches += 1
        starved_batches += int(starved > 0)
        starved_samples += starved
        samples.extend(batch)
        if monitor is not None:
            clock_samples.extend([monitor.read()] * len(batch))  # read once per batch, after it ran
        n = len(samples)
        measured_s = sum(samples) * 1e-6
        elapsed = time.perf_counter() - t_begin
        # the stopping rule: enough samples, enough measured time, and the median's CI inside the target
        rule_met = (
            n >= settings.min_samples
            and measured_s >= settings.min_time_s
            and _converged(samples, settings.target_rel_ci)
        )
        if rule_met or n >= settings.max_samples or elapsed >= settings.max_time_s:
            # stopped by a cap: the target counts as reached only if the whole rule was met, so a capped
            # measurement with fewer than min_samples is never reported as converged
            target_reached = rule_met
            break
    # a flush ran before every sample (counted, not inferred from the settings)
    result["l2_flushed"] = flush.count - flushes_before == len(samples)
    result.update(stats.summarize(samples))
    result["samples_us"] = [round(s, 4) for s in samples]
    result["target_rel_ci"] = settings.target_rel_ci
    result["target_reached"] = bool(target_reached)
    result["wall_s"] = time.perf_counter() - t_begin
    if on_gpu:
        # samples (and batches holding them) whose launch came after the GPU could have reached their start
        # event: they may include a launch gap
        result.update(batches=batches, starved_batches=starved_batches, starved_samples=starved_samples)
    if monitor is not None:
        result["clocks"] = clocks.flag_samples(clock_samples, monitor.steady_sm_mhz)
    return result


def _converged(samples: list[float], target: float) -> bool:
    lo, hi = stats.median_ci_order(np.asarray(samples))
    med = float(np.median(samples))
    return med > 0 and (hi - lo) / 2 <= target * med


def graph_replay_us(
    fn: Callable[[], Any], calls: int, repeats: int = 30, flush: L2Flusher | None = None
) -> dict[str, Any]:
    """Per-call device time of ``calls`` launches captured in one CUDA graph and replayed: launch gaps
    removed, so the difference to the event median is host/launch overhead.

    With an active ``flush`` the graph holds ``flush(); fn()`` per call and a second graph the flushes
    alone; each sample is the difference of one replay of each, over ``calls``. The kernel then starts
    from a cold L2 as in the event samples, and both bases see the same cache state. Without a flush the
    replays run warm (``l2`` says which)."""
    if runtime.select_backend() != "cuda":
        return {"status": "skipped", "reason": "CUDA graphs need a CUDA device"}
    cold = flush is not None and flush.active
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

        def capture(body: Callable[[], None]) -> torch.cuda.CUDAGraph:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    body()
            graph.replay()
            torch.cuda.synchronize()
            return graph

        def replay_us(graph: torch.cuda.CUDAGraph) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3

        flush_buffer = flush.buffer if cold else None
        main = capture((lambda: (flush_buffer.fill_(0x5A5A5A5A), fn())) if cold else fn)
        flush_only = capture(lambda: flush_buffer.fill_(0x5A5A5A5A)) if cold else None
        per_call, flush_per_call = [], []
        for _ in range(repeats):
            total = replay_us(main)
            flushes = replay_us(flush_only) if flush_only is not None else 0.0
            per_call.append((total - flushes) / calls)
            flush_per_call.append(flushes / calls)
        del main, flush_only
        out = {
            "status": "ok",
            "calls_per_graph": calls,
            "samples_us": per_call,
            "median_us": float(np.median(per_call)),
            "l2": "flushed" if cold else "warm",
        }
        if cold:
            out["flush_us_per_call"] = float(np.median(flush_per_call))
        return out
    except Exception as exc:  # noqa: BLE001 - capture can legitimately fail (e.g. host sync inside fn)
        torch.cuda.synchronize()
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}


def host_wall_us(fn: Callable[[], Any], calls: int) -> float:
    """Host-side wall time per call for back-to-back launches (no synchronisation inside the loop):
    the Python + launcher overhead that a launch-bound kernel pays."""
    runtime.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    runtime.synchronize()
    return (t1 - t0) * 1e6 / calls


def prepare_device_basis(lock: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> None:
    """Start CUPTI once, then compile the delimiter kernel and run it once, before the GPU is taken
    exclusively. CUPTI's first start in a process takes seconds of host time and runs no device work, so
    it holds no lock; nor do the delimiter's buffer (the process's CUDA context comes up with it) and its
    compile, which launch nothing. Only its one run is under ``lock()`` (the caller passes the shared GPU
    lock: never inside another job's sampling). A failure here is recorded by the measurement that fails
    again."""
    if runtime.select_backend() != "cuda":
        return
    with contextlib.suppress(Exception), devicetime._default_profile():
        pass
    delimiter = None
    with contextlib.suppress(Exception):
        delimiter = _delimiter(L2Flusher(False))
        delimiter.compile()
    with lock(), contextlib.suppress(Exception):  # an empty closure runs no device work: sample() says so
        delimiter = delimiter or _delimiter(L2Flusher(False))
        devicetime.sample(lambda: None, delimiter, 1, 1, lambda k: None, torch.cuda.synchronize)


def _delimiter(flush: L2Flusher) -> devicetime.Delimiter:
    """The delimiter between calls: over the flush buffer (each delimiter flushes the L2) or 16 words (Triton
    specialises a length of 1, and a second compile would fall inside the GPU lock)."""
    buffer = (
        flush.buffer
        if flush.active
        else torch.empty(devicetime.Delimiter.SMALL, dtype=torch.int32, device=runtime.device())
    )
    return devicetime.Delimiter(buffer)


def _device_calls(settings: TimingSettings, estimate_us: float) -> int:
    n = int(settings.device_time_s * 1e6 / max(estimate_us, 1e-3))
    return max(settings.device_min_samples, min(settings.device_max_samples, n))


def _device_record(
    calls: list[dict[str, Any]], readings: list[dict[str, Any]], monitor, **fields: Any
) -> dict[str, Any]:
    rec = {**devicetime.summary(calls), **fields}
    if monitor is not None:
        rec["clocks"] = clocks.flag_samples(readings, monitor.steady_sm_mhz)
    return rec


def measure_device(
    fn: Callable[[], Any],
    settings: TimingSettings,
    flush: L2Flusher,
    estimate_us: float,
    monitor: clocks.ClockMonitor | None = None,
) -> dict[str, Any]:
    """Device time per call from CUPTI kernel records (:mod:`kernelscope.devicetime`), in the regime the
    event samples are taken in ("burst": batches behind a GPU sleep, the host synchronising between
    batches). ``estimate_us`` (the event median) sets how many calls make about ``device_time_s``."""
    if runtime.select_backend() != "cuda" or settings.device_time_s <= 0:
        return {"status": "skipped", "reason": "device timestamps need a CUDA device"}
    try:
        delimiter = _delimiter(flush)
        n = _device_calls(settings, estimate_us)
        calls, readings = devicetime.sample(
            fn,
            delimiter,
            n,
            max(1, settings.batch),
            lambda k: _gpu_sleep(settings.head_start_us_per_sample * k),
            torch.cuda.synchronize,
            monitor,
        )
        return _device_record(calls, readings, monitor, regime="burst", l2_flushed=delimiter.flushes)
    except Exception as exc:  # noqa: BLE001 - no CUPTI (a container without it), a record lost: recorded
        torch.cuda.synchronize()
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}


def measure_sustained(
    fn: Callable[[], Any], settings: TimingSettings, flush: L2Flusher, monitor: clocks.ClockMonitor | None = None
) -> dict[str, Any]:
    """Device time per call under sustained load: ``sustained_warm_s`` of back-to-back calls (so a
    power-bound kernel reaches the clock its power cap allows), then ``sustained_samples`` calls enqueued
    at once, with no idle between them. The clock and power at the end of the warm-up are recorded."""
    if runtime.select_backend() != "cuda" or settings.sustained_samples <= 0:
        return {"status": "skipped", "reason": "device timestamps need a CUDA device"}
    state: dict[str, Any] = {}

    def warm(_: int) -> None:  # inside the profiler session: its kernels come before the first delimiter
        t_end = time.perf_counter() + settings.sustained_warm_s
        while time.perf_counter() < t_end:
            for _ in range(5):
                flush()
                fn()
            torch.cuda.synchronize()
        state["after_warmup"] = monitor.read() if monitor is not None else {}

    try:
        delimiter = _delimiter(flush)
        n = settings.sustained_samples
        calls, readings = devicetime.sample(fn, delimiter, n, n, warm, torch.cuda.synchronize, monitor)
        return _device_record(
            calls,
            readings,
            monitor,
            regime="sustained",
            l2_flushed=delimiter.flushes,
            warm_s=settings.sustained_warm_s,
            after_warmup=state.get("after_warmup"),
        )
    except Exception as exc:  # noqa: BLE001 - as measure_device
        torch.cuda.synchronize()
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}


def seed_method(fn: Callable[[], Any], settings: TimingSettings) -> dict[str, Any]:
    """The seed document's own method (seed 000, ``benchmark_us``): ``seed_warmup`` calls, then
    ``seed_rounds`` samples, each an event pair around one call followed by a synchronisation, no L2
    flush. Each sample then holds the host's launch path as well as the kernel, with the L2 warm."""
    if runtime.select_backend() != "cuda":
        return {"status": "skipped", "reason": "the seed's method times CUDA events"}
    for _ in range(settings.seed_warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(settings.seed_rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return {
        "status": "ok",
        "method": "seed 000: per-sample synchronisation, warm L2",
        **stats.summarize(samples),
        "samples_us": [round(x, 4) for x in samples],
    }
