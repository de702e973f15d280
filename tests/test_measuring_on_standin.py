"""The CUDA-only rules of the measuring code (kernelscope.timing, kernelscope.timing_stage), driven on the
CPU through a stand-in device (tests/standin_device.py) whose kernels, flushes, head starts and host
launch costs take known times, so each rule is checked by what it computes.

Each test was seen to fail with one bug planted in the measuring code (then reverted):

- samples_bracket_the_kernel: the flush moved inside the event pair (after ``start.record()``).
- late_launches_counted_by_hand: ``>=`` for ``>`` in the late-launch count; the head start left out of
  when the GPU reaches a sample; the sample's own time counted in it (``np.cumsum(samples)`` unshifted);
  the launch time read before the call instead of after it.
- stops_by_the_ci_rule: ``_converged`` dropped from the stopping rule.
- stops_at_min_samples / stops_at_min_time: ``n >= min_samples`` / ``measured_s >= min_time_s`` dropped.
- stops_at_max_samples: ``n > max_samples`` for ``n >= max_samples``.
- stops_at_max_time: the ``max_time_s`` cap dropped.
- capped_before_min_samples_is_not_reached: ``target_reached = _converged(...)`` (the CI alone).
- l2_flushed_only_when_every_sample_was_flushed: ``l2_flushed`` from ``flush.count == len(samples)`` (a
  flusher used before fails), from ``flush.count > 0`` (a skipped flush passes).
- warmup_is_not_sampled: one warm-up call fewer.
- clocks_read_once_per_batch: one reading per batch instead of one per sample of it.
- warm_clocks_stops_at_the_steady_clock: the early return on the steady clock dropped.
- graph_subtracts_the_flushes: the flush replay subtracted twice; the main graph captured without
  the flush.
- graph_without_flush_is_warm: ``l2`` reported "flushed" whenever a flusher is passed.
- graph_capture_failure: the ``except`` of graph_replay_us narrowed so a capture error escapes.
- flusher_writes_and_counts: ``count`` not incremented; the fill left out; ``enabled`` ignored; a buffer
  of one L2 size instead of two.
- time_case_aa_blocks: A1/A2 labels swapped; the A/A floor from A1 and the second record; A2 keeping
  ``prepare_ms``/``first_call_ms``; the implementations' declaration order instead of the primary first.
- time_case_graph_for_short_records: ``>`` for ``<`` against ``graph_below_us``.
- time_case_graph_for_all_when_one_is_launch_bound: the launch-bound pass over all records dropped;
  ``graph_calls`` launches per graph for every record, however long.
- time_case_device_time_rotates_over_placements: the device-time closure not wrapped in the rotation
  (``prepared.fn`` measured); ``advance`` not advancing; the budget ignored (``copies_for`` returning
  ``copies``); the closures not warmed at every placement before the exclusive section.
- triton_compiles_before_the_shared_lock: the profile stage's Triton variants, or the correctness stage's
  Triton negative controls, compiled at their first call inside the shared section (their compile and
  launcher build held the card from samplers: docs/timing-basis.md, "Where the wall time goes").
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import standin_device
import torch
from standin_device import SHAPE, FakeMonitor, StandinDevice, sampling_settings, standin_spec

from kernelscope import clocks, correctness, gpus, profiling, stats, timing, timing_stage
from kernelscope.spec import Implementation

standin_cuda = standin_device.standin_cuda  # the fixture


def _alternating(i: int) -> float:
    """10 and 30 us in turn: the median's CI spans both, it never narrows."""
    return 10.0 if i % 2 == 0 else 30.0


# --- _sample_batch


def test_samples_bracket_the_kernel(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernel(10.0, name="k", launch_us=9.0)  # the host launches faster than the kernel runs
    samples, late = timing._sample_batch(kernel, dev.flusher(), sampling_settings())
    assert samples == [10.0] * 10  # the 5 us flush before each sample is outside its events
    assert late == 0
    assert [r.name for r in dev.records] == ["sleep"] + ["l2_flush", "k"] * 10
    assert dev.records[0].us == 100.0  # the head start: 10 us per sample of the batch


@pytest.mark.parametrize(
    ("head_start_us", "samples", "late"),
    [(110.0, [10.0] * 6 + [15.0, 25.0, 25.0, 25.0], 5), (120.0, [10.0] * 7 + [20.0, 25.0, 25.0], 5)],
)
def test_late_launches_counted_by_hand(standin_cuda: StandinDevice, head_start_us, samples, late):
    """A host slower than the device: 30 us to launch a 10 us kernel (flush 5 us) behind a head start H.

    By hand, sample i is launched at 30 (i + 1) us on the host; the device is ready for kernel i at
    H + 15 i + 5 us (the sleep, then each earlier sample's flush and kernel), so a kernel waits for the
    host, and its sample grows, once 30 (i + 1) > H + 15 i + 5. The code's lower bound of when the GPU
    reaches sample i is H + the samples before it:

    - H = 110: 110 120 130 140 150 160 170 185 210 235 against launches 30 60 ... 300: late from i = 5 on
      (five); i = 4 is a tie (150 against 150), not late.
    - H = 120: 120 130 140 150 160 170 180 190 210 235: late from i = 5 on (five); counting each sample's
      own time in its bound would make i = 5 a tie (180 against 180) and give four."""
    dev = standin_cuda
    kernel = dev.kernel(10.0, name="k", launch_us=30.0)
    settings = sampling_settings(head_start_us_per_sample=head_start_us / 10)
    assert timing._sample_batch(kernel, dev.flusher(), settings) == (samples, late)


# --- measure: the stopping rules


def test_stops_by_the_ci_rule(standin_cuda: StandinDevice):
    # 10/30 alternating for the first batch (the median's CI spans 10-30), then 10 only: with 15 of 20
    # samples at 10, the order-statistic CI of the median (ranks 6-14 of 20) lies inside the 10s
    kernel = standin_cuda.kernel(lambda i: _alternating(i) if i < 10 else 10.0)
    r = timing.measure(kernel, sampling_settings(max_samples=1000), with_first_call=False)
    assert r["n"] == 20 and r["target_reached"] is True


def test_stops_at_min_samples(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0)  # converged from the first batch on
    r = timing.measure(kernel, sampling_settings(min_samples=30, max_samples=1000), with_first_call=False)
    assert r["n"] == 30 and r["target_reached"] is True


def test_stops_at_min_time(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0)
    r = timing.measure(kernel, sampling_settings(min_time_s=350e-6, max_samples=1000), with_first_call=False)
    assert r["n"] == 40 and r["target_reached"] is True  # 300 us of samples after 3 batches, 400 after 4


def test_stops_at_max_samples(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(_alternating)
    r = timing.measure(kernel, sampling_settings(max_samples=40), with_first_call=False)
    assert r["n"] == 40 and r["target_reached"] is False


def test_stops_at_max_time(standin_cuda: StandinDevice):
    # a batch takes 100 us of head start + 5 x 10 + 5 x 30 us of samples = 300 us of host time (the host
    # waits for its last event): 900 us after 3 batches, 1200 after 4, so a 1000 us cap stops at 40 samples
    kernel = standin_cuda.kernel(_alternating)
    settings = sampling_settings(max_samples=100_000, max_time_s=1000e-6, flush_l2=False)
    r = timing.measure(kernel, settings, with_first_call=False)
    assert r["n"] == 40 and r["target_reached"] is False
    assert r["batches"] == 4 and r["starved_samples"] == 0


def test_capped_before_min_samples_is_not_reached(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0)  # the CI is converged, but the cap comes before min_samples
    r = timing.measure(kernel, sampling_settings(min_samples=50, max_samples=20), with_first_call=False)
    assert r["n"] == 20 and r["target_reached"] is False


# --- measure: what a record says


class _SkipsOne:
    """A flusher that leaves out its third flush."""

    def __init__(self, inner: timing.L2Flusher) -> None:
        self.inner, self.calls = inner, 0

    active = property(lambda self: self.inner.active)
    count = property(lambda self: self.inner.count)

    def __call__(self) -> None:
        self.calls += 1
        if self.calls != 3:
            self.inner()


def test_l2_flushed_only_when_every_sample_was_flushed(standin_cuda: StandinDevice):
    dev = standin_cuda
    kernel = dev.kernel(10.0, name="k")
    r = timing.measure(kernel, sampling_settings(flush_l2=True), with_first_call=False)  # the default flusher
    assert r["l2_flushed"] is True
    assert [rec.name for rec in dev.records if rec.name != "sleep"] == ["l2_flush", "k"] * 10
    assert timing.measure(kernel, sampling_settings(flush_l2=False), with_first_call=False)["l2_flushed"] is False
    used = dev.flusher()
    for _ in range(7):
        used()  # flushes before this measurement do not count against it
    r = timing.measure(kernel, sampling_settings(), with_first_call=False, flush=used)
    assert r["l2_flushed"] is True and used.count == 17
    r = timing.measure(kernel, sampling_settings(), with_first_call=False, flush=_SkipsOne(dev.flusher()))
    assert r["l2_flushed"] is False


def test_warmup_is_not_sampled(standin_cuda: StandinDevice):
    # the first call "compiles" (1000 us), the three warm-ups take 500 us, samples 10 us
    kernel = standin_cuda.kernel(lambda i: 1000.0 if i == 0 else 500.0 if i <= 3 else 10.0)
    r = timing.measure(kernel, sampling_settings(warmup=3))
    assert r["samples_us"] == [10.0] * 10
    assert r["first_call_ms"] == pytest.approx(1.0)
    assert kernel.calls == 1 + 3 + 10


def test_clocks_read_once_per_batch(standin_cuda: StandinDevice):
    monitor = FakeMonitor([{"sm_mhz": 1980}, {"sm_mhz": 1500}, {"sm_mhz": 1980}], steady_sm_mhz=1980)
    kernel = standin_cuda.kernel(_alternating)
    r = timing.measure(kernel, sampling_settings(batch=5, max_samples=15), monitor, with_first_call=False)
    assert monitor.reads == 3
    assert r["clocks"]["sm_mhz"] == [1980] * 5 + [1500] * 5 + [1980] * 5
    assert r["clocks"]["flags"] == [""] * 5 + [f"sm_clock<{clocks.STEADY_FRACTION:.0%}_steady"] * 5 + [""] * 5
    assert r["clocks"]["n_flagged"] == 5


def test_warm_clocks_stops_at_the_steady_clock(standin_cuda: StandinDevice):
    # the clock reads steady at the third check: three rounds of 10 calls, not a whole second of them
    monitor = FakeMonitor([{"sm_mhz": 345}, {"sm_mhz": 1200}, {"sm_mhz": 1980}], steady_sm_mhz=1980)
    kernel = standin_cuda.kernel(10.0)
    timing.warm_clocks(kernel, 1.0, monitor)
    assert kernel.calls == 30 and monitor.reads == 3


# --- graph replay


def test_graph_subtracts_the_flushes(standin_cuda: StandinDevice):
    dev = standin_cuda
    dev.graph_launch_us = 3.0  # a replay's own launch, inside its events: it cancels in the difference
    kernel = dev.kernel(10.0, name="k")
    g = timing.graph_replay_us(kernel, calls=20, repeats=4, flush=dev.flusher())
    assert g["status"] == "ok" and g["l2"] == "flushed" and g["calls_per_graph"] == 20
    assert g["samples_us"] == [10.0] * 4 and g["median_us"] == 10.0  # (3 + 20 x 15 - (3 + 20 x 5)) / 20
    assert g["flush_us_per_call"] == pytest.approx((3 + 20 * 5) / 20)
    assert kernel.calls == 3 + 20  # three warm calls, one capture
    # the last repeat: a replay of flush + kernel per call, then one of the flushes alone
    assert [r.name for r in dev.records[-60:]] == ["l2_flush", "k"] * 20 + ["l2_flush"] * 20


def test_graph_without_flush_is_warm(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0, name="k")
    for flush in (None, standin_cuda.flusher(enabled=False)):
        g = timing.graph_replay_us(kernel, calls=20, repeats=3, flush=flush)
        assert g["l2"] == "warm" and g["samples_us"] == [10.0] * 3 and "flush_us_per_call" not in g
    assert not standin_cuda.named("l2_flush")


def test_graph_capture_failure(standin_cuda: StandinDevice):
    kernel = standin_cuda.kernel(10.0)

    def syncs():  # a hidden synchronisation: not allowed while capturing
        kernel()
        torch.cuda.synchronize()

    g = timing.graph_replay_us(syncs, calls=5, flush=standin_cuda.flusher())
    assert g["status"] == "failed" and "not permitted when stream is capturing" in g["reason"]
    assert standin_cuda.capturing is None


# --- the flush


def test_flusher_writes_and_counts(standin_cuda: StandinDevice):
    dev = standin_cuda
    flush = dev.flusher(l2_bytes=4096)
    assert flush.active and flush.buffer.numel() * flush.buffer.element_size() == 2 * 4096
    flush.buffer.zero_()
    for _ in range(3):
        flush()
    assert flush.count == 3 and bool((flush.buffer == 0x5A5A5A5A).all())
    assert [(r.name, r.us) for r in dev.records] == [("l2_flush", dev.flush_us)] * 3
    off = dev.flusher(enabled=False)
    off()
    assert not off.active and off.buffer is None and off.count == 0 and len(dev.records) == 3


# --- the timing stage's blocks


def test_time_case_aa_blocks(standin_cuda: StandinDevice):
    # torch's calls: 0 the first call, 1-2 A1's warm-ups, 3-12 A1's samples: 20 us; every later call
    # (A1's device-time calls, then, after the others, A2's warm-ups and samples): 22 us
    spec = standin_spec(standin_cuda, lambda i: 20.0 if i < 13 else 22.0)
    settings = sampling_settings(warmup=2, graph_below_us=0)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, settings)
    recs = doc["implementations"]
    assert [(r["implementation"], r.get("block")) for r in recs] == [
        ("torch", "A1"),
        ("torch_compile", None),
        ("triton_a", None),
        ("torch", "A2"),
    ]
    assert all(r["status"] == "ok" for r in recs)
    a1, a2 = recs[0], recs[-1]
    assert a1["samples_us"] == [20.0] * 10 and a2["samples_us"] == [22.0] * 10
    assert {"prepare_ms", "first_call_ms"} <= a1.keys()
    assert not {"prepare_ms", "first_call_ms", "compile_ms"} & a2.keys()
    assert "compile_ms" in recs[2]  # the Triton variant's
    assert doc["primary_baseline"] == "torch" and doc["steady_sm_mhz"] == 1980.0
    assert doc["aa_floor"] == stats.aa_floor([20.0] * 10, [22.0] * 10)
    assert doc["aa_floor"]["median_first_us"] == 20.0 and doc["aa_floor"]["median_second_us"] == 22.0
    assert doc["aa_floor"]["rel_diff"] == pytest.approx(2 / 22)
    assert not any("graph" in r for r in recs)


def test_time_case_graph_for_short_records(standin_cuda: StandinDevice):
    spec = standin_spec(standin_cuda, 20.0, compile_us=60.0, triton_us=80.0)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, sampling_settings(graph_below_us=50))
    with_graph = [(r["implementation"], r.get("block")) for r in doc["implementations"] if "graph" in r]
    assert with_graph == [("torch", "A1"), ("torch", "A2")]
    # every timed record has its host launch cost (long ones too: launch-bound is judged against it)
    assert all("host_wall_us" in rec for rec in doc["implementations"])
    graph = doc["implementations"][0]["graph"]
    assert graph["l2"] == "flushed" and graph["median_us"] == 20.0


def test_time_case_graph_for_all_when_one_is_launch_bound(standin_cuda: StandinDevice):
    # torch_compile (60 us) takes 300 us to launch: with a 1000 us head start per batch of 10, its samples
    # from the fifth on are launched late, so it is launch-bound and every record needs a graph replay,
    # the long triton_a (80 us, launched in time) too
    spec = standin_spec(standin_cuda, 20.0, compile_us=60.0, triton_us=80.0, compile_launch_us=300.0)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, sampling_settings(graph_below_us=50))
    recs = {(r["implementation"], r.get("block")): r for r in doc["implementations"]}
    assert recs[("torch_compile", None)]["starved_samples"] > 0.05 * recs[("torch_compile", None)]["n"]
    assert recs[("triton_a", None)]["starved_samples"] == 0
    assert all(r["graph"]["status"] == "ok" for r in recs.values())
    assert recs[("triton_a", None)]["graph"]["median_us"] == 80.0
    assert recs[("torch_compile", None)]["graph"]["median_us"] == 60.0  # graph replay has no launch gaps
    # a graph holds 20 launches of a record under 50 us, else about 20 x 50 us of its time
    calls = {key: r["graph"]["calls_per_graph"] for key, r in recs.items()}
    assert calls[("torch", "A1")] == 20 and calls[("triton_a", None)] == 12
    assert calls[("torch_compile", None)] == max(1, min(20, int(1000 // recs[("torch_compile", None)]["median_us"])))


def test_time_case_names_a_case_whose_reference_failed(standin_cuda: StandinDevice):
    # planted: every excluded implementation called "failed the correctness gate", also where nothing was checked
    spec = standin_spec(standin_cuda, 20.0)
    failed = {"triton_a": "not checked: RuntimeError in reference() (seed 0)", "torch_compile": "max error 3.1"}
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, sampling_settings(), failed)
    reasons = {r["implementation"]: r.get("reason") for r in doc["implementations"] if r["status"] == "not_timed"}
    assert reasons == {
        "triton_a": "not checked: RuntimeError in reference() (seed 0)",
        "torch_compile": "failed the correctness gate: max error 3.1",
    }


# --- placements: the device-time calls rotate over copies of the case's tensors


def _placement_spec(dev: StandinDevice, slow_us: float = 20.0, fast_us: float = 10.0):
    """torch (eager) and one Triton variant whose kernel takes ``fast_us`` on the tensor as allocated and
    ``slow_us`` at any other address: how a placement-dependent kernel looks to the device basis."""
    calls: list[tuple[str, bool]] = []

    def impl(name, kind):
        def prepare(inputs, out, config):
            x, home = inputs["x"], inputs["x"].data_ptr()

            def run():
                calls.append((name, x.data_ptr() == home))
                dev.launch(name, fast_us if x.data_ptr() == home else slow_us)
                return out

            return run

        extra = {"configs": lambda s, d: [{}], "default_config": lambda s, d: {}} if kind == "triton" else {}
        return Implementation(name, kind, prepare, **extra)

    spec = standin_spec(dev, 10.0)
    spec = dataclasses.replace(spec, implementations=[impl("triton_a", "triton"), impl("torch", "eager")])
    return spec, calls


def test_time_case_device_time_rotates_over_placements(standin_cuda: StandinDevice):
    spec, calls = _placement_spec(standin_cuda)
    settings = sampling_settings(graph_below_us=0, placements=4, device_min_samples=40, device_max_samples=40)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, settings)
    recs = {r["implementation"]: r for r in doc["implementations"] if r.get("block") != "A2"}
    # one call in four at the tensors' own address (10 us), three at copies (20 us): the median is 20 us
    for name in ("torch", "triton_a"):
        dev = recs[name]["device"]
        assert dev["placements"] == 4
        assert sorted(dev["samples_us"]) == [10.0] * 10 + [20.0] * 30
        assert dev["median_us"] == 20.0
    # every closure was called once at each placement before the samples, ending at the first
    # triton_a's calls: compile, first call (at home), the warm-up at the three copies and back home, then
    # the event samples at home
    first = [home for name, home in calls if name == "triton_a"]
    assert first[:7] == [True, True, False, False, False, True, True]


def test_time_case_placements_one_measures_the_tensors_as_allocated(standin_cuda: StandinDevice):
    spec, _ = _placement_spec(standin_cuda)
    settings = sampling_settings(graph_below_us=0, placements=1, device_min_samples=40, device_max_samples=40)
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, settings)
    for rec in doc["implementations"]:
        assert rec["device"]["median_us"] == 10.0 and "placements" not in rec["device"]


def test_time_case_placements_within_the_budget(standin_cuda: StandinDevice):
    # the stand-in's tensors: x (16 bytes) and two outputs (16 each): 48 bytes a copy; 100 bytes hold 2 more
    spec, _ = _placement_spec(standin_cuda)
    settings = sampling_settings(
        graph_below_us=0, placements=16, placement_bytes=100, device_min_samples=30, device_max_samples=30
    )
    doc = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_a": {}}, settings)
    dev = doc["implementations"][0]["device"]
    assert dev["placements"] == 3 and sorted(dev["samples_us"]) == [10.0] * 10 + [20.0] * 20


@pytest.mark.parametrize("stage", ["correctness", "profile"])
def test_triton_compiles_before_the_shared_lock(standin_cuda: StandinDevice, monkeypatch, stage):
    """Every Triton closure (variant or negative control) is compiled with no GPU lock held, before the
    shared section that runs it; torch.compile's closures are not (their first call is the compile)."""
    events: list[str] = []
    held: list[str] = []
    shared = gpus.shared

    @contextlib.contextmanager
    def tracked(what=""):
        held.append(what)
        events.append(f"lock {what}")
        try:
            with shared(what):
                yield
        finally:
            held.pop()

    def compile_only(fn):
        events.append(f"compile under {held or 'no lock'}")
        return 0.0

    monkeypatch.setattr(gpus, "shared", tracked)
    monkeypatch.setattr(timing, "compile_only", compile_only)
    monkeypatch.setattr(profiling, "kernels_launched", lambda fn, calls: [])
    spec = standin_spec(standin_cuda, 10.0)
    control = dataclasses.replace(spec.implementations[0], name="triton_wrong", rejected_for="stand-in")
    spec = dataclasses.replace(spec, negative_controls=[control])
    if stage == "correctness":
        correctness.check_case(spec, SHAPE, torch.float32, [0])
        expected = [
            "lock correctness inputs triton_a",
            "compile under no lock",
            "lock correctness triton_a",
            "lock correctness torch_compile",
            "lock correctness torch",
            "lock correctness inputs triton_wrong",
            "compile under no lock",
            "lock correctness triton_wrong",
        ]
    else:
        profiling.profile_case(spec, SHAPE, torch.float32, {"triton_a": {}})
        expected = [
            "lock profile inputs",
            "compile under no lock",
            "lock profile triton_a",
            "lock profile torch_compile",
            "lock profile torch",
        ]
    assert events == expected
