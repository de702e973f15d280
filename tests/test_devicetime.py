"""The device-time basis (kernelscope.devicetime and timing.measure_device / measure_sustained / seed_method),
driven on the CPU: hand-made device records for the splitting, stand-in profiler events for the reader,
and the stand-in device (tests/standin_device.py: its fake profiler hands out the simulated stream's kernel
records, its delimiter is a kernel of known length) for the measurements, so each rule is checked by what
it computes.

Each test was seen to fail with one bug planted in kernelscope/devicetime.py, timing.py or timing_stage.py
(then reverted):

- split_calls_by_hand: the delimiter's own record counted in its call (``records[bounds[j] : ...]``); the
  span from the first record's end; the span used as the sum; the records after an "end" delimiter kept
  as a call (``if kind != "call": continue`` dropped); the records before the first delimiter counted in
  call 0.
- split_calls_span_ends_at_the_last_end: the span to the last record's end (``mine[-1].end_ns``) instead
  of the latest end.
- split_calls_delimiter_count_must_match: the count check dropped.
- split_calls_call_without_device_work: the ``if not mine`` check dropped (``max()`` of nothing raises a
  ValueError that names no call).
- read_records_from_kineto_events: the CPU filter dropped; the annotation filter dropped; the sort dropped;
  ``_DEVICE_WORK`` ignored (a device-side sync kept).
- read_records_from_parsed_events: the CPU filter dropped; the µs left unconverted (``int(tr.start)``);
  ``is_user_annotation`` ignored (``flag = False``); the sort dropped.
- device_samples_are_the_kernel_durations: the delimiter counted in its call; the next call's delimiter
  counted in this one (``bounds[j + 1] + 1``); the records after "end" kept; ``_delimiter`` always over
  the small buffer.
- launch_cost_moves_events_not_device_time: each call timed from its delimiter's end, as an event pair
  would (``sum_us`` = latest end - the delimiter's end).
- device_multi_kernel_sum_and_span: ``sum_us`` = the span; the span from the first record's end; the
  summary's samples from the spans.
- device_calls_follow_the_time_budget: the clamp of ``_device_calls`` dropped.
- device_clocks_per_call: one clock reading per batch instead of one per call of it.
- device_l2_flushed_only_over_the_flush_buffer: ``Delimiter.flushes = True``; ``_delimiter`` always over
  the small buffer.
- device_profiler_failure_is_recorded: ``measure_device``'s ``except`` narrowed to ValueError.
- device_time_off: the ``device_time_s <= 0`` check dropped.
- sustained_samples_follow_the_warm_up: the warm-up's records counted in the first call (the records
  before the first delimiter); the sustained calls in batches of ``settings.batch`` (a warm-up per batch);
  one call fewer than ``sustained_samples``; the clock read before the warm-up instead of after it;
  ``after_warmup`` left out.
- seed_method_times_the_launch_path: the start event recorded after the call; no synchronisation after
  each sample; none after the warm-up; one warm-up call fewer; one round more.
- prepare_device_basis_runs_the_delimiter: the ``contextlib.suppress`` dropped.
- the_delimiter_compile_builds_its_launcher: ``Delimiter._triton_compile`` without ``load`` (the launcher left
  to the first launch, under the shared lock).
- time_case_device_basis_per_record: ``_add_device`` only for records that get a graph replay; ``>`` for
  ``>=`` against ``sustained_above_us``; the event median instead of the device median against it.
- time_case_seed_method_only_when_asked: ``seed_method`` passed to every block (A2 too); passed as True
  whatever the caller asked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types

import pytest
import standin_device
import torch
from standin_device import SHAPE, FakeMonitor, StandinDevice, sampling_settings, standin_spec
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from kernelscope import devicetime, timing, timing_stage
from kernelscope.devicetime import DELIMITER_NAME as D
from kernelscope.devicetime import DeviceRecord

standin_cuda = standin_device.standin_cuda  # the fixture


def _rec(name: str, start_us: float, end_us: float, stream: int = 0) -> DeviceRecord:
    return DeviceRecord(name, round(start_us * 1e3), round(end_us * 1e3), stream)


def _call(sum_us, span_us, names, streams=(0,)) -> dict:
    return {"sum_us": sum_us, "span_us": span_us, "kernels": len(names), "names": names, "streams": list(streams)}


def _device_settings(n: int = 10, **kw) -> timing.TimingSettings:
    """``n`` device-time calls whatever the estimate."""
    return sampling_settings(device_min_samples=n, device_max_samples=n, **kw)


# --- split_calls on hand-made records

#: two batches as measure_device enqueues them: a head start, "call" delimiters each followed by a call's
#: kernels, an "end" delimiter, the next batch's head start (times in us)
BATCHES = [
    _rec("sleep", 0, 100),  # the first batch's head start, before the first delimiter
    _rec(D, 100, 105),
    _rec("a", 105, 108),
    _rec("b", 110.5, 114),  # 2.5 us after a: in the span, not in the sum
    _rec(D, 114, 119),
    _rec("a", 119, 121.25),
    _rec(D, 121.25, 126.25),  # "end"
    _rec("sleep", 126.25, 226.25),  # the second batch's head start
    _rec(D, 226.25, 231.25),
    _rec("a", 231.25, 234),
    _rec(D, 234, 239),  # "end"
]
KINDS = ["call", "call", "end", "call", "end"]


def test_split_calls_by_hand():
    assert devicetime.split_calls(BATCHES, KINDS) == [
        _call(3 + 3.5, 114 - 105, ["a", "b"]),
        _call(2.25, 2.25, ["a"]),
        _call(2.75, 2.75, ["a"]),
    ]


def test_split_calls_span_ends_at_the_last_end():
    # a side-stream kernel starts before b and ends after it: the span reaches its end; the sum counts
    # every record whole, overlapping or not
    records = [_rec(D, 0, 1), _rec("a", 1, 11), _rec("side", 3, 21, stream=7), _rec("b", 12, 15), _rec(D, 21, 22)]
    assert devicetime.split_calls(records, ["call", "end"]) == [_call(10 + 18 + 3, 20, ["a", "side", "b"], (0, 7))]


@pytest.mark.parametrize(
    ("records", "counts"),
    [
        ([r for i, r in enumerate(BATCHES) if i != 4], "4 delimiter kernels on the device for 5 launched"),
        ([*BATCHES[:3], _rec(f"my_{D}", 108, 109), *BATCHES[3:]], "6 delimiter kernels on the device for 5 launched"),
    ],
    ids=["a record lost", "a closure's kernel of the delimiter's name"],
)
def test_split_calls_delimiter_count_must_match(records, counts):
    with pytest.raises(ValueError, match=counts):
        devicetime.split_calls(records, KINDS)


def test_split_calls_call_without_device_work():
    records = [_rec(D, 0, 1), _rec("a", 1, 2), _rec(D, 2, 3), _rec(D, 3, 4)]
    with pytest.raises(ValueError, match="call 1 ran no device work between its delimiters"):
        devicetime.split_calls(records, ["call", "call", "end"])


# --- read_records


@dataclasses.dataclass
class _KinetoEvent:
    """What kineto's raw events (torch._C._autograd._KinetoEvent) answer, by method; times in ns."""

    name_: str
    device: DeviceType
    start: int
    end: int
    activity: str | None = "kernel"
    stream: int = 7
    annotation: bool = False

    def name(self) -> str:
        return self.name_

    def device_type(self) -> DeviceType:
        return self.device

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def device_resource_id(self) -> int:
        return self.stream

    def is_user_annotation(self) -> bool:
        return self.annotation

    def activity_type(self) -> str | None:
        return self.activity


def test_read_records_from_kineto_events():
    cuda, cpu = DeviceType.CUDA, DeviceType.CPU
    events = [
        _KinetoEvent("aten::add", cpu, 0, 50, "cpu_op"),
        _KinetoEvent("cudaLaunchKernel", cpu, 10, 20, "cuda_runtime"),
        _KinetoEvent("aten::empty", cpu, 30, 40, activity=None),  # no activity named: its device type drops it
        _KinetoEvent("k2", cuda, 300, 400),
        _KinetoEvent("my_region", cuda, 90, 500, "gpu_user_annotation", annotation=True),
        _KinetoEvent("k1", cuda, 100, 250),
        _KinetoEvent("Event Sync", cuda, 260, 270, "cuda_sync"),  # on the device, but no work
        _KinetoEvent("Memset (Device)", cuda, 100, 120, "gpu_memset", stream=8),  # starts with k1, ends first
    ]
    kineto = types.SimpleNamespace(events=lambda: events)
    prof = types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=kineto))
    assert devicetime.read_records(prof) == [
        DeviceRecord("Memset (Device)", 100, 120, 8),
        DeviceRecord("k1", 100, 250, 7),
        DeviceRecord("k2", 300, 400, 7),
    ]


def test_read_records_from_parsed_events():
    # a torch without kineto's raw events: the parsed FunctionEvents, times in microseconds
    def event(name, start_us, end_us, device=DeviceType.CUDA, **kw):
        return FunctionEvent(0, name, 1, start_us, end_us, device_type=device, device_resource_id=7, **kw)

    events = [
        event("k2", 3.0, 4.5, activity_type="kernel"),
        event("aten::mul", 0.0, 9.0, device=DeviceType.CPU),  # no activity type: its device type drops it
        event("region", 0.5, 8.0, is_user_annotation=True),  # no activity type: the flag alone says so
        event("k1", 1.25, 2.5, activity_type="kernel"),
    ]
    prof = types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=None), events=lambda: events)
    assert devicetime.read_records(prof) == [DeviceRecord("k1", 1250, 2500, 7), DeviceRecord("k2", 3000, 4500, 7)]


# --- measure_device on the stand-in


def test_device_samples_are_the_kernel_durations(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernel(lambda i: 10.0 + i % 3, name="k")
    r = timing.measure_device(kernel, _device_settings(25), dev.flusher(), estimate_us=10.0)
    assert r["status"] == "ok" and r["regime"] == "burst"
    assert r["samples_us"] == r["span_samples_us"] == [10.0 + i % 3 for i in range(25)]
    assert r["n"] == 25 and r["median_us"] == 11.0 and kernel.calls == 25
    assert r["kernels_per_call"] == 1 and r["kernel_names"] == ["k"] and r["streams"] == [0]
    # on the stream: per batch of 10 (10, 10, 5) a head start, then a delimiter (5 us: it flushes) before
    # each call and one after the batch; none of them is in a sample
    assert [rec.us for rec in dev.named("sleep")] == [100.0, 100.0, 50.0]
    assert [rec.us for rec in dev.named(D)] == [dev.flush_us] * (25 + 3)


@pytest.mark.parametrize(
    ("kernel_us", "launch_us", "flush_l2", "event_samples"),
    [
        (10.0, 0.0, True, [10.0] * 10),
        # a host that starves the GPU: 30 us to launch, 15 us of flush + kernel. Sample i's start event is
        # reached at the end of its flush, its kernel starts when launched, at 30 (i + 1); the flush of
        # sample i >= 1 runs right after kernel i - 1 (30 i + 10 to + 15): 25 us each, the first 35 us
        (10.0, 30.0, True, [35.0] + [25.0] * 9),
        (2.0, 0.0, False, [2.0] * 10),
        # +3 us of launch cost per call and no flush: the first sample holds it whole, then the GPU waits
        # for each launch (the host is 1 us a call slower than the kernel): 3 us each
        (2.0, 3.0, False, [5.0] + [3.0] * 9),
    ],
)
def test_launch_cost_moves_events_not_device_time(
    standin_cuda: StandinDevice, kernel_us, launch_us, flush_l2, event_samples
):
    dev = standin_cuda
    # no head start: nothing hides the host's launches
    settings = _device_settings(head_start_us_per_sample=0.0, flush_l2=flush_l2)
    kernel = dev.kernel(kernel_us, launch_us=launch_us)
    events = timing.measure(kernel, settings, with_first_call=False)
    assert events["samples_us"] == event_samples
    device = timing.measure_device(kernel, settings, dev.flusher(flush_l2), estimate_us=events["median_us"])
    assert device["samples_us"] == device["span_samples_us"] == [kernel_us] * 10
    assert device["median_us"] == kernel_us


def test_device_multi_kernel_sum_and_span(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernels(("a", 3.0), ("b", 4.0, 7), launch_us=20.0)  # b on side stream 7
    # no head start: each kernel starts when launched, 20 us after the one before, so b starts 17 us
    # after a ends: span 20 + 4, sum 3 + 4
    r = timing.measure_device(kernel, _device_settings(head_start_us_per_sample=0.0), dev.flusher(), 10.0)
    assert r["samples_us"] == [7.0] * 10 and r["median_us"] == 7.0
    assert r["span_samples_us"] == [24.0] * 10 and r["span_median_us"] == 24.0
    assert r["kernels_per_call"] == 2 and r["kernel_names"] == ["a", "b"] and r["streams"] == [0, 7]
    # a head start longer than the host's launches: the kernels run back to back, the span is the sum
    r = timing.measure_device(kernel, _device_settings(head_start_us_per_sample=100.0), dev.flusher(), 10.0)
    assert r["samples_us"] == r["span_samples_us"] == [7.0] * 10


@pytest.mark.parametrize(
    ("estimate_us", "n"),
    [(10.0, 100), (100.0, 20), (1000.0, 20), (5.0, 150), (0.0, 150)],
    ids=["1 ms / 10 us", "below the minimum", "far below", "above the maximum", "no estimate"],
)
def test_device_calls_follow_the_time_budget(standin_cuda: StandinDevice, estimate_us, n):
    kernel = standin_cuda.kernel(10.0)
    settings = sampling_settings(device_time_s=1e-3, device_min_samples=20, device_max_samples=150)
    r = timing.measure_device(kernel, settings, standin_cuda.flusher(), estimate_us)
    assert r["n"] == len(r["samples_us"]) == kernel.calls == n


def test_device_clocks_per_call(standin_cuda: StandinDevice):
    monitor = FakeMonitor([{"sm_mhz": 1980}, {"sm_mhz": 1500}, {"sm_mhz": 1980}], steady_sm_mhz=1980)
    kernel = standin_cuda.kernel(10.0)
    r = timing.measure_device(kernel, _device_settings(25), standin_cuda.flusher(), 10.0, monitor)
    assert monitor.reads == 3  # once per batch, after it ran
    assert r["clocks"]["sm_mhz"] == [1980] * 10 + [1500] * 10 + [1980] * 5
    assert r["clocks"]["n_flagged"] == 10


def test_device_l2_flushed_only_over_the_flush_buffer(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernel(10.0)
    flushed = timing.measure_device(kernel, _device_settings(), dev.flusher(), 10.0)
    assert flushed["l2_flushed"] is True and {r.us for r in dev.named(D)} == {dev.flush_us}
    dev.records.clear()
    warm = timing.measure_device(kernel, _device_settings(), dev.flusher(enabled=False), 10.0)
    assert warm["l2_flushed"] is False and {r.us for r in dev.named(D)} == {dev.delimiter_us}
    assert flushed["samples_us"] == warm["samples_us"] == [10.0] * 10


def test_device_profiler_failure_is_recorded(standin_cuda: StandinDevice, monkeypatch: pytest.MonkeyPatch):
    dev = standin_cuda
    kernel = dev.kernel(10.0)
    dev.profiler_error = RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
    r = timing.measure_device(kernel, _device_settings(), dev.flusher(), 10.0)
    assert r == {"status": "failed", "reason": "RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"}
    dev.profiler_error = None
    monkeypatch.setattr(devicetime, "read_records", lambda prof: [])  # a profiler that saw no device work
    r = timing.measure_device(kernel, _device_settings(), dev.flusher(), 10.0)
    assert r["status"] == "failed"
    assert r["reason"].startswith("ValueError: 0 delimiter kernels on the device for 11 launched")


def test_device_time_off(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0)
    r = timing.measure_device(kernel, _device_settings(device_time_s=0), standin_cuda.flusher(), 10.0)
    assert r["status"] == "skipped" and kernel.calls == 0


# --- measure_sustained


class _MonitorAt(FakeMonitor):
    """A monitor whose readings say when (in host time) they were taken."""

    def __init__(self, dev: StandinDevice) -> None:
        super().__init__([{"sm_mhz": 1410, "power_w": 700}])
        self.dev = dev

    def read(self) -> dict:
        return {**super().read(), "host_us": self.dev.host_us}


def test_sustained_samples_follow_the_warm_up(standin_cuda: StandinDevice):
    dev = standin_cuda
    # warm-up rounds of 5 x (5 us flush + 95 us): 500 us each, so 900 us of warm-up take two rounds (10 calls)
    kernel = dev.kernel(lambda i: 95.0 if i < 10 else 300.0, name="k")
    monitor = _MonitorAt(dev)
    settings = sampling_settings(sustained_warm_s=900e-6, sustained_samples=30)
    r = timing.measure_sustained(kernel, settings, dev.flusher(), monitor)
    assert r["status"] == "ok" and r["regime"] == "sustained" and r["warm_s"] == 900e-6
    assert r["samples_us"] == [300.0] * 30 and r["n"] == 30 and kernel.calls == 10 + 30
    assert r["after_warmup"] == {"sm_mhz": 1410, "power_w": 700, "host_us": 1000.0}
    assert r["l2_flushed"] is True and r["clocks"]["power_w"] == [700] * 30
    # the 30 calls run back to back from the first delimiter to the last: no idle between them
    first = next(i for i, rec in enumerate(dev.records) if rec.name == D)
    sampled = dev.records[first:]
    assert len(sampled) == 2 * 30 + 1 and all(b.start_us == a.end_us for a, b in zip(sampled, sampled[1:]))


# --- seed_method


def test_seed_method_times_the_launch_path(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernel(6.0, name="k", launch_us=40.0)
    r = timing.seed_method(kernel, sampling_settings(seed_warmup=3, seed_rounds=7))
    # each sample: the start event, the 40 us launch the idle GPU waits for, the kernel
    assert r["status"] == "ok" and r["samples_us"] == [46.0] * 7 and r["n"] == 7
    assert kernel.calls == 3 + 7
    assert [rec.name for rec in dev.records] == ["k"] * 10  # no flush, no delimiter: the L2 stays warm


def test_prepare_device_basis_runs_the_delimiter(standin_cuda: StandinDevice):
    timing.prepare_device_basis()  # an empty closure: no sample, and no error
    assert [(r.name, r.us) for r in standin_cuda.records] == [(D, standin_cuda.delimiter_us)] * 2


def test_prepare_device_basis_compiles_before_taking_the_lock(standin_cuda: StandinDevice, monkeypatch):
    """The delimiter's buffer and compile launch nothing, so they happen before the shared lock is taken;
    only its run is inside (a compile under the lock kept samplers off the card: docs/timing-basis.md)."""
    events: list[str] = []
    monkeypatch.setattr(devicetime.Delimiter, "_triton_compile", lambda self, buffer: events.append("compile"))

    @contextlib.contextmanager
    def lock():
        events.append("lock")
        yield
        events.append(f"unlock after {len(standin_cuda.records)} launches")

    timing.prepare_device_basis(lock)
    assert events == ["compile", "lock", "unlock after 2 launches"]


def test_the_delimiter_compile_builds_its_launcher(monkeypatch):
    """Compiling the delimiter also loads its binary and builds its launcher (Triton 3.6 compiles a C launcher
    with the host's compiler at a kernel's first launch, in a cold cache directory: about a second inside the
    sweep's and the timing stage's shared "device basis" section, docs/timing-basis.md)."""
    events: list[str] = []

    class Compiled:
        def _init_handles(self):
            events.append("launcher built")

    class Kernel:
        def warmup(self, *args, grid, **kwargs):
            events.append(f"compiled for {args[1]} words on {grid[0]} programs")
            return Compiled()

    monkeypatch.setattr(devicetime, "_delimiter_kernel", Kernel)
    devicetime.Delimiter(torch.zeros(devicetime.Delimiter.SMALL, dtype=torch.int32)).compile()
    assert events == ["compiled for 16 words on 1 programs", "launcher built"]
    devicetime.load(object())  # a kernel without the hook (another Triton): nothing to build, no error


# --- the timing stage


def _stage_settings(**kw) -> timing.TimingSettings:
    return sampling_settings(
        device_time_s=1e-3,
        device_min_samples=5,
        device_max_samples=20,
        sustained_above_us=80.0,
        sustained_warm_s=1e-4,
        sustained_samples=4,
        seed_warmup=2,
        seed_rounds=3,
        graph_below_us=0,
        **kw,
    )


def test_time_case_device_basis_per_record(standin_cuda: StandinDevice):
    # triton_a's 80 us is at the sustained threshold; torch_compile's 300 us launches put its event median
    # above it, its device time (60 us) is below
    spec = standin_spec(standin_cuda, 20.0, compile_us=60.0, triton_us=80.0, compile_launch_us=300.0)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, _stage_settings())
    recs = {(r["implementation"], r.get("block")): r for r in doc["implementations"]}
    assert recs[("torch_compile", None)]["median_us"] >= 80.0
    device = {key: (r["status"], r["device"]["status"], r["device"]["median_us"]) for key, r in recs.items()}
    assert device == {
        ("torch", "A1"): ("ok", "ok", 20.0),
        ("torch_compile", None): ("ok", "ok", 60.0),
        ("triton_a", None): ("ok", "ok", 80.0),
        ("torch", "A2"): ("ok", "ok", 20.0),
    }
    assert [key for key, r in recs.items() if "sustained" in r] == [("triton_a", None)]
    assert recs[("triton_a", None)]["sustained"]["samples_us"] == [80.0] * 4


def test_time_case_prepares_triton_variants_before_the_baselines(standin_cuda: StandinDevice, monkeypatch):
    """The Triton variants are compiled, loaded and first called before any baseline is prepared (as in the sweep,
    where no baseline runs before they load: docs/timing-basis.md, "The sweep and the timing stage on one wide-row
    config"); the samples keep the order A1, baselines, variants, A2."""
    prepared = []
    original = timing_stage._Prepared.__init__

    def spy(self, spec, impl, inputs, config):
        prepared.append(impl.name)
        original(self, spec, impl, inputs, config)

    monkeypatch.setattr(timing_stage._Prepared, "__init__", spy)
    spec = standin_spec(standin_cuda, 20.0)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, _stage_settings())
    assert prepared == ["triton_a", "torch", "torch_compile"]
    sampled = [(r["implementation"], r.get("block")) for r in doc["implementations"]]
    assert sampled == [("torch", "A1"), ("torch_compile", None), ("triton_a", None), ("torch", "A2")]
    assert all(r["status"] == "ok" for r in doc["implementations"])


@pytest.mark.parametrize("seed_method", [True, False])
def test_time_case_seed_method_only_when_asked(standin_cuda: StandinDevice, seed_method):
    spec = standin_spec(standin_cuda, 20.0)
    doc = timing_stage.time_case(
        spec, SHAPE, torch.float32, {"triton_a": {}}, _stage_settings(), seed_method=seed_method
    )
    with_seed = [(r["implementation"], r.get("block")) for r in doc["implementations"] if "seed_method" in r]
    assert with_seed == ([("torch", "A1"), ("torch_compile", None), ("triton_a", None)] if seed_method else [])
    if seed_method:
        assert doc["implementations"][0]["seed_method"]["samples_us"] == [20.0] * 3


def test_sweep_and_timing_stage_keep_each_configs_kernel_resources(standin_cuda: StandinDevice, monkeypatch):
    """What compile_only reports for a config's kernels lands in its sweep record and in the timing stage's
    record of the variant; the sweep table takes the most of them."""
    from kernelscope import rundata, sweep

    def compile_only(fn, kernels=None):
        if kernels is not None:
            kernels += [{"kernel": "a", "registers": 64, "local_bytes": 0, "shared_bytes": 512}]
            kernels += [{"kernel": "b", "registers": 32, "local_bytes": 16, "shared_bytes": None}]
        return 1.0

    monkeypatch.setattr(timing, "compile_only", compile_only)
    spec = standin_spec(standin_cuda, 20.0)
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=5, device_max_samples=5)
    swept = sweep.sweep_variants(spec, spec.triton_variants, SHAPE, torch.float32, settings)[0]
    assert [k["kernel"] for k in swept["configs"][0]["kernels"]] == ["a", "b"]
    timed = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, settings)
    (rec,) = [r for r in timed["implementations"] if r["implementation"] == "triton_a"]
    assert [k["registers"] for k in rec["kernels"]] == [64, 32]
    assert "kernels" not in timed["implementations"][0]  # a baseline's closure is not compiled ahead
    most = {"registers": 64, "local_bytes": 16, "shared_bytes": 512}
    assert rundata.config_resources(swept["configs"][0]) == most
    assert rundata.config_resources({"status": "failed"}) == dict.fromkeys(most)
