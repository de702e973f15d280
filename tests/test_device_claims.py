"""The claim rules on the device-time basis, the rerun calibration they are judged by, and the sweep's
ranking by device time (issue 21). Each test names the planted bug it caught when it was written.

- device_basis_is_used_and_floored: claims on event medians although device time exists; the rerun floor
  left out of the threshold.
- no_calibration_no_claim: a claim made on the in-job A/A floor alone.
- sustained_basis_and_regime: claims on burst samples although both sides have sustained ones; opposite
  burst/sustained verdicts reported as a plain claim.
- launch_bound_needs_a_host_bound_record: a record starved by late launches called launch-bound however far
  its device time is above its host launch cost.
- rerun observations / floors: a pair of runs whose sweeps chose different configs counted as a rerun (or
  whose processes ran Inductor's kernel at different configs);
  kinds pooled; the pair floor as the larger side instead of the quadrature sum; a size class edge off by one.
- sweep_ranks_by_device_time: the sweep ranking configs by event medians; event samples taken although device
  time ran; no event fallback where CUPTI fails.
- sweep_ranks_by_time_over_placements: the sweep timing each config at one placement (``fn`` for the rotating
  closure). (Dropping the sweep's warm-up at every placement is not caught here.)
- sweep_starts_the_profiler_before_taking_the_gpu: the sweep job's CUPTI start-up left to the first config's
  sampling, inside the exclusive section; the start-up under the shared lock; the delimiter's first run
  under no lock.
- a_case_sweep_takes_the_card_once: an exclusive section (and a clock warm-up, inputs, a reference) per variant.
- a_case_sweep_leaves_what_it_has_for_the_watchdog: checked variants left out until final; a timed variant
  left "not_timed" until the sweep returns.
"""

import contextlib
import dataclasses
import json
import math

import pytest
import standin_device
import torch
from standin_device import SHAPE, StandinDevice, sampling_settings

from kernelscope import claims, devicetime, reruns, sweep, wording
from kernelscope.spec import Implementation, KernelSpec, Tolerance
from kernelscope.verdicts import Basis, Reason

standin_cuda = standin_device.standin_cuda

# a rerun calibration with one group per kind at 5-20 µs and 0-5 µs
CALIBRATION = {
    "kind": "rerun calibration",
    "runs": {"r1": {}, "r2": {}, "r3": {}},
    "summary": [
        {
            "basis": "device",
            "size_class": "5-20 us",
            "kind": "triton",
            "n": 40,
            "median_rel": 0.01,
            "p95_rel": 0.03,
            "max_rel": 0.05,
        },
        {
            "basis": "device",
            "size_class": "5-20 us",
            "kind": "eager",
            "n": 40,
            "median_rel": 0.01,
            "p95_rel": 0.04,
            "max_rel": 0.05,
        },
        {
            "basis": "sustained",
            "size_class": ">=1000 us",
            "kind": "triton",
            "n": 30,
            "median_rel": 0.01,
            "p95_rel": 0.02,
            "max_rel": 0.03,
        },
        {
            "basis": "sustained",
            "size_class": ">=1000 us",
            "kind": "eager",
            "n": 30,
            "median_rel": 0.01,
            "p95_rel": 0.02,
            "max_rel": 0.03,
        },
    ],
}


def _samples(median: float, n: int = 60, spread: float = 0.002) -> list[float]:
    return [median * (1 + spread * ((i % 7) - 3) / 3) for i in range(n)]


def _rec(name: str, kind: str, event_us: float, device_us: float | None, sustained_us: float | None = None, **kw):
    rec = {
        "implementation": name,
        "kind": kind,
        "status": "ok",
        "samples_us": _samples(event_us),
        "median_us": event_us,
        "n": 60,
        "enqueue": "batched:10",
        **kw,
    }
    if device_us is not None:
        rec["device"] = {"status": "ok", "samples_us": _samples(device_us), "median_us": device_us}
    if sustained_us is not None:
        rec["sustained"] = {"status": "ok", "samples_us": _samples(sustained_us), "median_us": sustained_us}
    return rec


def test_device_basis_is_used_and_floored():
    # events say the Triton kernel is 30 % slower (host launch path); device time says 10 % faster
    a, b = _rec("triton_x", "triton", 13.0, 9.0), _rec("torch", "eager", 10.0, 10.0)
    claim = claims.compare(a, b, 0.001, interpreter=False, calibration=CALIBRATION, aa_device={"device": 0.002})
    assert claim["verdict"] == claims.FASTER and claim["basis_key"] == Basis.DEVICE
    assert claim["median_a_us"] == pytest.approx(9.0)
    floor = claim["rerun_floor"]
    assert floor["rel"] == pytest.approx(math.hypot(0.03, 0.04)) and floor["trials"] == 3
    assert claim["threshold_rel"] == pytest.approx(0.05)
    # 4 % apart: above the A/A floor, below the calibrated rerun floor of 5 %
    close = claims.compare(_rec("triton_x", "triton", 13.0, 9.6), b, 0.001, False, calibration=CALIBRATION)
    assert close["verdict"] == claims.UNRESOLVED and "rerun floor 5.0%" in close["why"]


def test_no_calibration_no_claim():
    a, b = _rec("triton_x", "triton", 13.0, 8.0), _rec("torch", "eager", 10.0, 10.0)
    claim = claims.compare(a, b, 0.001, interpreter=False, calibration=None)
    assert claim["verdict"] == claims.UNRESOLVED and "no rerun calibration" in claim["why"]
    # a size class the calibration did not measure is the same as none
    tiny = claims.compare(_rec("t", "triton", 3, 2.0), _rec("torch", "eager", 3, 3.0), 0.0, False, CALIBRATION)
    assert tiny["verdict"] == claims.UNRESOLVED and "0-5 us" in tiny["why"]


def test_sustained_basis_and_regime():
    # burst: Triton 10 % faster; sustained: 10 % slower -> regime-dependent, not a claim
    a = _rec("triton_x", "triton", 1500, 1400, sustained_us=1760)
    b = _rec("torch", "eager", 1600, 1560, sustained_us=1600)
    cal = {
        **CALIBRATION,
        "summary": CALIBRATION["summary"]
        + [
            {
                "basis": "device",
                "size_class": ">=1000 us",
                "kind": k,
                "n": 30,
                "median_rel": 0.01,
                "p95_rel": 0.03,
                "max_rel": 0.05,
            }
            for k in ("triton", "eager")
        ],
    }
    claim = claims.compare(a, b, 0.0, False, calibration=cal)
    assert claim["verdict"] == claims.REGIME_DEPENDENT
    assert "sustained" in claim["why"] and "burst" in claim["why"]
    # the same direction in both regimes: a claim on the sustained samples
    a2 = _rec("triton_x", "triton", 1500, 1400, sustained_us=1450)
    agree = claims.compare(a2, b, 0.0, False, calibration=cal)
    assert agree["verdict"] == claims.FASTER and agree["basis_key"] == Basis.SUSTAINED
    assert agree["median_a_us"] == pytest.approx(1450)


def test_launch_bound_needs_a_host_bound_record():
    starved = {"starved_samples": 30, "n": 100}  # 30 % of samples launched late
    long_kernel = _rec("t", "triton", 900.0, 880.0, host_wall_us=12.0, **starved)
    assert not claims.launch_bound(long_kernel)
    short_kernel = _rec("t", "triton", 9.0, 3.0, host_wall_us=12.0, **starved)
    assert claims.launch_bound(short_kernel)
    old_record = _rec("t", "triton", 900.0, None, **starved)  # no device time: the late-launch count decides
    assert claims.launch_bound(old_record)


def _run(tmp_path, label: str, recs: list[dict], **doc_fields) -> "object":
    path = tmp_path / label / "timing" / "k" / "float16"
    path.mkdir(parents=True)
    doc = {
        "device": label,
        "kernel": "k",
        "shape": "S",
        "dtype": "float16",
        "primary_baseline": "torch",
        "implementations": recs,
        **doc_fields,
    }
    (path / "S.json").write_text(json.dumps(doc))
    return tmp_path / label


def test_rerun_observations_skip_changed_configs_and_group_by_kind(tmp_path):
    r1 = _run(
        tmp_path,
        "r1",
        [
            _rec("torch", "eager", 10, 10.0),
            _rec("tri", "triton", 8, 8.0, config={"w": 4}),
            _rec("tc", "compile", 8, 8.0, compiled_config={"k0": "XBLOCK=256, num_warps=4"}),
            _rec("tc2", "compile", 8, 8.0, compiled_config={"k0": "XBLOCK=256, num_warps=4"}),
        ],
    )
    r2 = _run(
        tmp_path,
        "r2",
        [
            _rec("torch", "eager", 10, 10.2),
            _rec("tri", "triton", 8, 6.0, config={"w": 8}),
            _rec("tc", "compile", 8, 8.8, compiled_config={"k0": "XBLOCK=256, num_warps=4"}),
            _rec("tc2", "compile", 8, 12.0, compiled_config={"k0": "XBLOCK=1024, num_warps=4"}),
        ],
    )
    rows = reruns.observations({"r1": r1, "r2": r2})
    device = {r["implementation"]: r for r in rows if r["basis"] == "device"}
    # tri's sweeps chose different configs, tc2's processes compiled its kernel at different configs: no rerun
    assert set(device) == {"torch", "tc"}
    assert device["torch"]["rel_diff"] == pytest.approx(0.02) and device["tc"]["rel_diff"] == pytest.approx(0.1)
    summary = {(s["basis"], s["kind"]): s for s in reruns.summarise(rows)}
    assert summary[("device", "eager")]["p95_rel"] == pytest.approx(0.02)
    assert summary[("device", "compile")]["p95_rel"] == pytest.approx(0.1)
    assert ("event", "eager") in summary and all(s["size_class"] == "5-20 us" for s in summary.values())
    assert summary[("device", "eager")]["cases"] == 1  # torch's one case, in one pair of runs


def test_rerun_observations_pair_only_the_same_code_on_the_same_stack(tmp_path):
    # A Triton variant whose kernel code changed between two runs is two kernels: its difference is the change's,
    # not the machines'. Its baseline calls the same library code and still counts; a pair of runs on another
    # torch or Triton counts for nothing.
    recs = lambda tri_us: [_rec("torch", "eager", 10, 10.0), _rec("tri", "triton", 8, tri_us)]  # noqa: E731
    old = {"kernel_sources_sha256": "aaa", "torch": "2.11.0", "triton": "3.6.0"}
    r1 = _run(tmp_path, "r1", recs(8.0), **old)
    r2 = _run(tmp_path, "r2", recs(6.0), **{**old, "kernel_sources_sha256": "bbb"})
    r3 = _run(tmp_path, "r3", recs(8.4), **old)
    r4 = _run(tmp_path, "r4", recs(8.0), **{**old, "triton": "3.7.1"})
    rows = [r for r in reruns.observations({"r1": r1, "r2": r2, "r3": r3, "r4": r4}) if r["basis"] == "device"]
    pairs = {(r["runs"], r["implementation"]) for r in rows}
    assert ("r1 vs r2", "torch") in pairs and ("r1 vs r2", "tri") not in pairs
    assert ("r1 vs r3", "tri") in pairs and ("r2 vs r3", "tri") not in pairs
    assert not any("r4" in run for run, _ in pairs)
    # records from before kernel_sources_sha256 compare by the module's own hash
    legacy = {"kernel_module_sha256": "m1", "torch": "2.11.0", "triton": "3.6.0"}
    r5 = _run(tmp_path, "r5", recs(8.0), **legacy)
    r6 = _run(tmp_path, "r6", recs(7.0), **{**legacy, "kernel_module_sha256": "m2"})
    legacy_pairs = {r["implementation"] for r in reruns.observations({"r5": r5, "r6": r6}) if r["basis"] == "device"}
    assert legacy_pairs == {"torch"}


def test_rerun_floor_and_size_classes():
    assert reruns.size_class(4.999) == "0-5 us" and reruns.size_class(5.0) == "5-20 us"
    assert reruns.size_class(1000.0) == ">=1000 us"
    floor = reruns.floor(CALIBRATION, "device", 12.0, ["triton", "eager"])
    assert floor["rel"] == pytest.approx(0.05) and floor["n"] == 40 and floor["size_class"] == "5-20 us"
    assert reruns.floor(CALIBRATION, "device", 12.0, ["triton", "compile"]) is None
    assert reruns.floor(None, "device", 12.0, ["triton", "eager"]) is None
    # a group of fewer than 20 differences has no 95th percentile of its own: no floor from it
    thin = {**CALIBRATION, "summary": [{**g, "n": reruns.MIN_OBSERVATIONS - 1} for g in CALIBRATION["summary"]]}
    assert reruns.MIN_OBSERVATIONS == 20
    assert reruns.floor(thin, "device", 12.0, ["triton", "eager"]) is None
    enough = {**CALIBRATION, "summary": [{**g, "n": reruns.MIN_OBSERVATIONS} for g in CALIBRATION["summary"]]}
    assert reruns.floor(enough, "device", 12.0, ["triton", "eager"])["n"] == 20


def test_a_floor_needs_differences_from_several_implementation_cases():
    """Nine runs of one kernel give 36 run pairs, so one case in two dtypes makes 72 differences: counted alone,
    that kernel's stability became the floor of every kernel of its kind and size. A group needs its differences
    from MIN_CASES implementation-cases; a record written before the count (no ``cases``) is read as before."""
    assert reruns.MIN_CASES == 3
    one_kernel = {**CALIBRATION, "summary": [{**g, "n": 72, "cases": 2} for g in CALIBRATION["summary"]]}
    assert reruns.floor(one_kernel, "device", 12.0, ["triton", "eager"]) is None
    several = {**CALIBRATION, "summary": [{**g, "n": 72, "cases": 3} for g in CALIBRATION["summary"]]}
    assert reruns.floor(several, "device", 12.0, ["triton", "eager"])["n"] == 72
    assert "cases" not in CALIBRATION["summary"][0]
    assert reruns.floor(CALIBRATION, "device", 12.0, ["triton", "eager"]) is not None
    assert reruns.counts_cases(several) and not reruns.counts_cases(CALIBRATION) and not reruns.counts_cases(None)


def test_the_missing_floor_names_the_case_count_where_the_record_counts_cases():
    claim = {"reason": Reason.NO_RERUN_CALIBRATION, "size_class": "0-5 us"}
    assert "implementation-cases" not in wording._reason(claim)
    assert "with 20 or more rerun differences, from 3 or more implementation-cases, of each side's kind" in (
        wording._reason({**claim, "min_cases": 3})
    )


def test_rerun_record_is_checked(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(CALIBRATION))
    assert reruns.load_record(good)["summary"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "rerun calibration", "summary": [{"basis": "device"}]}))
    with pytest.raises(ValueError, match="not a rerun calibration record"):
        reruns.load_record(bad)
    assert reruns.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "o.json")]) == 2


def _two_config_spec(dev: StandinDevice) -> tuple[KernelSpec, Implementation]:
    """A spec of one Triton variant with two configs. Config "a": 2 µs on the device, but launched 40 µs late
    (a slow host path); config "b": 3 µs on the device, launched at once. By events b wins; by device time a does."""
    kernels = {"a": dev.kernel(2.0, name="k_a", launch_us=40.0), "b": dev.kernel(3.0, name="k_b")}

    def prepare(inputs, out, config):
        kernel = kernels[config["c"]]

        def run():
            kernel()
            out.copy_(inputs["x"])
            return out

        return run

    impl = Implementation(
        "triton_x",
        "triton",
        prepare,
        configs=lambda s, d: [{"c": "a"}, {"c": "b"}],
        default_config=lambda s, d: {"c": "b"},
    )
    spec = KernelSpec(
        name="standin",
        description="two configs",
        implementations=[impl, Implementation("torch", "eager", prepare)],
        make_inputs=lambda shape, dtype, device, seed: {"x": torch.ones(4, dtype=dtype)},
        make_output=lambda inputs: torch.zeros_like(inputs["x"]),
        reference=lambda inputs: inputs["x"],
        tolerances={torch.float32: Tolerance(0, 0, "exact")},
        flops=lambda s: 0.0,
        bytes_moved=lambda s, d: 0.0,
        shape_sets={"cpu": [SHAPE]},
    )
    return spec, impl


def test_sweep_ranks_by_device_time(standin_cuda: StandinDevice):
    spec, impl = _two_config_spec(standin_cuda)
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=10, device_max_samples=10)
    result = sweep.sweep_variants(spec, [impl], SHAPE, torch.float32, settings)[0]
    by_key = {r["key"]: r for r in result["configs"]}
    assert by_key["c=a"]["median_us"] == pytest.approx(2.0) and by_key["c=a"]["basis"] == "device"
    assert by_key["c=b"]["median_us"] == pytest.approx(3.0) and "samples_us" not in by_key["c=b"]
    assert result["best"]["config"] == {"c": "a"}
    # with no CUPTI (the profiler fails to start), events rank the configs, and the record says so
    standin_cuda.profiler_error = RuntimeError("no CUPTI here")
    result = sweep.sweep_variants(spec, [impl], SHAPE, torch.float32, settings)[0]
    by_key = {r["key"]: r for r in result["configs"]}
    assert {r["basis"] for r in result["configs"]} == {"event"}
    assert "no CUPTI here" in by_key["c=a"]["device_failure"]
    assert by_key["c=a"]["median_us"] > by_key["c=b"]["median_us"] >= 3.0
    assert result["best"]["config"] == {"c": "b"}


def test_sweep_ranks_by_time_over_placements(standin_cuda: StandinDevice):
    """Config "a" takes 2 us on the tensors as allocated and 4 us anywhere else; "b" 3 us everywhere. Rotating
    over four placements a's median is 4 us and b wins; at one placement a would."""
    dev = standin_cuda

    def prepare(inputs, out, config):
        x, home = inputs["x"], inputs["x"].data_ptr()

        def run():
            us = 3.0 if config["c"] == "b" else (2.0 if x.data_ptr() == home else 4.0)
            dev.launch(f"k_{config['c']}", us)
            out.copy_(x)
            return out

        return run

    spec, _ = _two_config_spec(dev)
    impl = dataclasses.replace(spec.implementations[0], prepare=prepare)
    spec = dataclasses.replace(spec, implementations=[impl, *spec.implementations[1:]])
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=12, device_max_samples=12, placements=4)
    result = sweep.sweep_variants(spec, [impl], SHAPE, torch.float32, settings)[0]
    by_key = {r["key"]: r for r in result["configs"]}
    assert by_key["c=a"]["median_us"] == 4.0 and by_key["c=a"]["placements"] == 4
    assert sorted(by_key["c=a"]["device_samples_us"]) == [2.0] * 3 + [4.0] * 9
    assert result["best"]["config"] == {"c": "b"}
    one = sweep.sweep_variants(spec, [impl], SHAPE, torch.float32, dataclasses.replace(settings, placements=1))[0]
    assert one["best"]["config"] == {"c": "a"} and "placements" not in one["configs"][0]


def test_sweep_starts_the_profiler_before_taking_the_gpu(standin_cuda: StandinDevice, monkeypatch):
    """CUPTI's first start in a process takes seconds of host time (docs/timing-basis.md): a sweep job starts
    it holding no lock (it runs no device work; under the shared lock it kept the samplers waiting), and runs
    the delimiter's first launch under the shared lock, so neither is inside an exclusive section."""
    held: list[str] = []
    sessions: list[list[str]] = []

    def tracking(mode, original):
        @contextlib.contextmanager
        def section(what=""):
            held.append(mode)
            try:
                with original(what):
                    yield
            finally:
                held.pop()

        return section

    monkeypatch.setattr(sweep.gpus, "shared", tracking("shared", sweep.gpus.shared))
    monkeypatch.setattr(sweep.gpus, "exclusive", tracking("exclusive", sweep.gpus.exclusive))
    profile = devicetime._default_profile
    monkeypatch.setattr(devicetime, "_default_profile", lambda: (sessions.append(list(held)), profile())[1])
    spec, _ = _two_config_spec(standin_cuda)
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=10, device_max_samples=10)
    doc = sweep.sweep_case(spec, SHAPE, torch.float32, settings)
    assert doc["variants"][0]["best"]["config"] == {"c": "a"}
    # CUPTI's start (no device work, no lock), the delimiter's first run (shared), then one per config
    assert sessions == [[], ["shared"], ["exclusive"], ["exclusive"]]


def _two_variant_spec(dev: StandinDevice, calls: list[str]) -> KernelSpec:
    """The two-config spec with a second Triton variant ("triton_y", the same two configs); ``calls`` gets a
    line per input set and per fp64 reference made."""
    spec, impl = _two_config_spec(dev)

    def make_inputs(shape, dtype, device, seed):
        calls.append("inputs")
        return {"x": torch.ones(4, dtype=dtype)}

    def reference(inputs):
        calls.append("reference")
        return inputs["x"]

    return dataclasses.replace(
        spec,
        implementations=[impl, dataclasses.replace(impl, name="triton_y"), *spec.implementations[1:]],
        make_inputs=make_inputs,
        reference=reference,
    )


def test_a_case_sweep_takes_the_card_once(standin_cuda: StandinDevice, monkeypatch):
    """Every variant of a case is checked first and then timed in one exclusive section, on one set of inputs
    and one reference: each exclusive section waits for the shared holders already on the card to leave
    (1.3 s median in the 6ae207e default run, docs/timing-basis.md), and the clock warms once. Planted: a section
    per variant (two exclusive sections, two clock warm-ups, inputs and reference made per variant)."""
    calls: list[str] = []
    sections: list[str] = []
    exclusive = sweep.gpus.exclusive

    @contextlib.contextmanager
    def tracked(what=""):
        sections.append(what)
        with exclusive(what):
            yield

    warm = sweep.timing.warm_clocks
    monkeypatch.setattr(sweep.gpus, "exclusive", tracked)
    monkeypatch.setattr(sweep.timing, "warm_clocks", lambda *a, **k: (calls.append("warm"), warm(*a, **k))[1])
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=10, device_max_samples=10)
    doc = sweep.sweep_case(_two_variant_spec(standin_cuda, calls), SHAPE, torch.float32, settings)
    assert [v["implementation"] for v in doc["variants"]] == ["triton_x", "triton_y"]
    assert all(v["best"]["config"] == {"c": "a"} and v["counts"]["ok"] == 2 for v in doc["variants"])
    assert sections == ["sweep"] and calls == ["inputs", "reference", "warm"]


def test_a_case_sweep_leaves_what_it_has_for_the_watchdog(standin_cuda: StandinDevice, monkeypatch):
    """While the second variant is being timed, what a hang would leave (``results_so_far``) holds the first
    variant's final result and the second's checked configs, marked as not timed: nothing checked is lost.
    Planted: checked variants left out until final; a timed variant left "not_timed" until the sweep returns."""
    seen: list[list[dict]] = []
    slots: list = []
    time_config = sweep._time_config

    def spying(fn, settings, flush, first_call_us):
        if len(seen) < 3:
            seen.append(json.loads(json.dumps(sweep.results_so_far(slots, 0.0), default=str)))
        return time_config(fn, settings, flush, first_call_us)

    monkeypatch.setattr(sweep, "_time_config", spying)
    spec = _two_variant_spec(standin_cuda, [])
    settings = sampling_settings(device_time_s=1e-4, device_min_samples=10, device_max_samples=10)
    final = sweep.sweep_variants(spec, spec.triton_variants, SHAPE, torch.float32, settings, slots=slots)
    first, _, third = seen  # the first config of each variant, then the second variant's first
    assert [(v["implementation"], v["status"]) for v in first] == [("triton_x", "not_timed"), ("triton_y", "not_timed")]
    assert [(v["implementation"], v["status"]) for v in third] == [("triton_x", "ok"), ("triton_y", "not_timed")]
    assert third[0]["best"]["config"] == {"c": "a"}
    assert {c["status"] for c in third[1]["configs"]} == {"not_timed"} and third[1]["reason"] == sweep.ABANDONED
    assert [(v["implementation"], v["status"]) for v in final] == [("triton_x", "ok"), ("triton_y", "ok")]


def test_inductor_choices_name_each_kernels_config():
    import types

    from kernelscope import baselines

    def launcher(**kw):
        return types.SimpleNamespace(config=types.SimpleNamespace(kwargs=kw, num_warps=4, num_stages=1))

    module = types.SimpleNamespace(
        triton_poi_fused_add_silu_0=types.SimpleNamespace(launchers=[launcher(XBLOCK=1024)]),
        triton_red_fused_1=types.SimpleNamespace(launchers=[launcher(XBLOCK=1), launcher(XBLOCK=8)]),
        helper=types.SimpleNamespace(launchers=[]),
        call=lambda: None,
    )
    assert baselines.inductor_choices([module]) == {
        "triton_poi_fused_add_silu_0": "XBLOCK=1024, num_warps=4, num_stages=1",
        "triton_red_fused_1": "2 candidates",
    }
    assert isinstance(baselines._loaded_inductor_modules(), list)  # this torch's code cache, by feature


def test_time_case_records_inductors_choice_for_compile_only(standin_cuda: StandinDevice, monkeypatch):
    import types

    from kernelscope import baselines, timing_stage

    chosen = types.SimpleNamespace(
        k0=types.SimpleNamespace(
            launchers=[types.SimpleNamespace(config=types.SimpleNamespace(kwargs={"XBLOCK": 256}, num_warps=8))]
        )
    )
    earlier = types.SimpleNamespace(k_old=chosen.k0)  # a module of an earlier compile in the process
    loaded = [earlier]

    def first_call(fn):  # the compile's first call loads its module into Inductor's cache
        if fn is compile_fn:
            loaded.append(chosen)
        fn()
        return 0.1

    monkeypatch.setattr(baselines, "_loaded_inductor_modules", lambda: list(loaded))
    monkeypatch.setattr(timing_stage.timing, "first_call", first_call)
    spec = standin_device.standin_spec(standin_cuda, 10.0)
    compile_fn = None

    def capturing(impl):
        def prepare(inputs, out, config):
            nonlocal compile_fn
            fn = impl.prepare(inputs, out, config)
            if impl.kind == "compile":
                compile_fn = fn
            return fn

        return dataclasses.replace(impl, prepare=prepare)

    inputs = spec.make_inputs(SHAPE, torch.float32, torch.device("cpu"), 0)
    recs = {i.kind: timing_stage._Prepared(spec, capturing(i), inputs, {}).rec for i in spec.implementations}
    assert recs["compile"]["compiled_config"] == {"k0": "XBLOCK=256, num_warps=8"}  # only the new module's
    assert "compiled_config" not in recs["eager"] and "compiled_config" not in recs["triton"]


@pytest.mark.parametrize("cupti", [True, False])
def test_a_sweep_config_is_warmed_once(standin_cuda: StandinDevice, cupti):
    """Inside the sweep's exclusive section a config runs its warm-up once, then its samples: on the device
    basis, and on the event fallback where CUPTI fails (its warm-up was run twice once, planted back: fails)."""
    kernel = standin_cuda.kernel(3.0, name="k")
    standin_cuda.profiler_error = None if cupti else RuntimeError("no CUPTI here")
    settings = sampling_settings(warmup=7, device_time_s=1e-4, device_min_samples=10, device_max_samples=10)
    rec = sweep._time_config(kernel, settings, standin_cuda.flusher(), 3.0)
    assert rec["basis"] == ("device" if cupti else "event")
    assert kernel.calls == 7 + rec["n"]
