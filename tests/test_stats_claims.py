"""The statistics and the claim rules, on recorded (synthetic, seeded) sample sets."""

import math

import numpy as np
import pytest

from kernelscope import claims, clocks, stats


def _rec(name, kind, samples, flags=None):
    rec = {
        "implementation": name,
        "kind": kind,
        "status": "ok",
        "samples_us": list(samples),
        "n": len(samples),
        "median_us": float(np.median(samples)),
    }
    if flags is not None:
        rec["clocks"] = {"n_flagged": sum(1 for f in flags if f), "flags": flags}
    return rec


RNG = np.random.default_rng(7)
BASE = RNG.normal(100.0, 1.0, 200)


def test_clear_difference_is_claimed_with_direction():
    fast = RNG.normal(80.0, 1.0, 200)
    c = claims.compare(_rec("triton", "triton", fast), _rec("torch", "eager", BASE), aa_rel=0.005, interpreter=False)
    assert c["verdict"] == claims.FASTER
    assert c["mannwhitney_p"] < claims.ALPHA
    assert "faster" in claims.sentence(c)


def test_difference_inside_the_noise_is_not_resolved():
    same = RNG.normal(100.2, 1.0, 200)  # 0.2 % apart with 1 % spread
    c = claims.compare(_rec("triton", "triton", same), _rec("torch", "eager", BASE), aa_rel=0.01, interpreter=False)
    assert c["verdict"] == claims.UNRESOLVED


def test_significant_but_below_aa_floor_is_not_resolved():
    shifted = BASE * 0.97  # 3 % faster, but the A/A floor is 5 %
    c = claims.compare(_rec("triton", "triton", shifted), _rec("torch", "eager", BASE), aa_rel=0.05, interpreter=False)
    assert c["mannwhitney_p"] < claims.ALPHA
    assert c["verdict"] == claims.UNRESOLVED
    assert "A/A" in c["why"]


def test_too_few_samples_is_not_resolved():
    c = claims.compare(_rec("t", "triton", [1.0, 1.1, 0.9]), _rec("b", "eager", [5.0, 5.1, 4.9]), 0.0, False)
    assert c["verdict"] == claims.UNRESOLVED and "too few" in c["why"]


def test_interpreter_timings_support_nothing():
    c = claims.compare(_rec("t", "triton", BASE * 0.5), _rec("b", "eager", BASE), 0.0, interpreter=True)
    assert c["verdict"] == claims.NOT_COMPARABLE


def test_failed_correctness_blocks_claims():
    timing_doc = {
        "interpreter": False,
        "aa_floor": {"rel_diff": 0.001},
        "implementations": [_rec("torch", "eager", BASE), _rec("triton", "triton", BASE * 0.5)],
    }
    gate = {
        "implementations": [
            {"implementation": "torch", "status": "pass"},
            {"implementation": "triton", "status": "fail"},
        ]
    }
    [c] = claims.case_claims(timing_doc, gate)
    assert c["verdict"] == claims.NOT_COMPARABLE and "correctness" in c["why"]


def test_throttled_samples_are_flagged_and_disclosed():
    readings = [
        {"sm_mhz": 1980, "throttle": []},
        {"sm_mhz": 1980, "throttle": ["sw_power_cap"]},
        {"sm_mhz": 1200, "throttle": ["gpu_idle"]},
        {"sm_mhz": 1975, "throttle": ["gpu_idle"]},
    ]
    flagged = clocks.flag_samples(readings, steady_sm_mhz=1980)
    assert flagged["n_flagged"] == 2
    assert flagged["flags"][1].startswith("throttled:sw_power_cap")
    assert "steady" in flagged["flags"][2]
    assert flagged["flags"][0] == flagged["flags"][3] == ""
    text = claims.disclosures([(flagged["n_flagged"], 4), (0, 4)])
    assert text.startswith("2 of 8 timed samples (25.0%)")
    a = _rec("triton", "triton", RNG.normal(80, 1, 200), flags=["x"] * 5 + [""] * 195)
    c = claims.compare(a, _rec("torch", "eager", BASE), 0.0, False)
    assert c["flagged"]["triton"] == [5, 200]


def test_summary_and_cis_bracket_the_median():
    s = stats.summarize(BASE)
    assert s["ci95_low_us"] <= s["median_us"] <= s["ci95_high_us"]
    assert s["p20_us"] <= s["median_us"] <= s["p80_us"]
    lo, hi = stats.median_ci_order(BASE)
    assert lo <= s["median_us"] <= hi
    assert s["n"] == 200


@pytest.mark.parametrize("n", [10, 100, 1000])
@pytest.mark.parametrize("ties", [False, True])
def test_order_statistic_median_ci_is_scipys_quantile_test_interval(n, ties):
    from scipy.stats import quantile_test

    x = np.random.default_rng(n).lognormal(3, 0.2, n)
    x = np.round(x) if ties else x  # timings at a timer's resolution repeat
    for confidence in (0.9, 0.95, 0.99):
        ci = quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence)
        assert stats.median_ci_order(x, confidence) == (float(ci.low), float(ci.high))


def test_the_bootstrap_median_ci_is_seeded_and_is_scipys_percentile_interval():
    # a re-render must give the same interval (the published report is compared byte for byte), and the
    # interval must be that of the median: the same call to scipy, written out here independently
    from scipy.stats import bootstrap

    x = np.random.default_rng(3).lognormal(3, 0.3, 60)
    first = stats.bootstrap_median_ci(x)
    assert first == stats.bootstrap_median_ci(x)
    # the seed is used, not a fixed or a fresh draw (few resamples, so that two draws give other end points)
    few = [stats.bootstrap_median_ci(x, resamples=50, seed=seed) for seed in (0, 0, 1)]
    assert few[0] == few[1] != few[2]
    seeded = {stats._BOOTSTRAP_RNG: np.random.default_rng(0)}  # scipy's name for it, as stats detects it
    ref = bootstrap((x,), np.median, confidence_level=0.95, n_resamples=2000, method="percentile", **seeded)
    ref = ref.confidence_interval
    assert first == (float(ref.low), float(ref.high))
    lo, hi = stats.bootstrap_median_ci(np.full(10, 5.0))  # no spread: the range, not a bootstrap
    assert lo == hi == 5.0


def test_compare_samples_of_sub_microsecond_kernels_and_tiny_sample_sets():
    # medians below 1 µs are still divided (a relative difference, never NaN), and two samples a side still
    # get a p-value (reported, but not testable: claims need MIN_SAMPLES_FOR_TEST)
    a, b = [0.50, 0.51, 0.49] * 10, [0.60, 0.61, 0.59] * 10
    cmp = stats.compare_samples(a, b)
    assert cmp["median_a_us"] == 0.5 and cmp["median_b_us"] == 0.6
    assert cmp["rel_diff"] == pytest.approx(-1 / 6) and cmp["testable"] is True and cmp["mannwhitney_p"] < 1e-6
    two = stats.compare_samples([1.0, 1.1], [2.0, 2.1])
    assert two["testable"] is False and two["mannwhitney_p"] == pytest.approx(1 / 3)
    assert stats.compare_samples([1.0], [2.0])["mannwhitney_p"] == 1.0
    assert math.isnan(stats.compare_samples([1.0, 1.0], [0.0, 0.0])["rel_diff"])  # nothing to divide by


def test_aa_floor_of_identical_distributions_is_small():
    aa = stats.aa_floor(BASE[:100], BASE[100:])
    assert aa["rel_diff"] < 0.01


@pytest.mark.parametrize("bad", [{"atol": -1.0, "rtol": 0.0, "reason": "x"}, {"atol": 0.0, "rtol": 0.0, "reason": " "}])
def test_tolerance_validation(bad):
    from kernelscope.spec import Tolerance

    with pytest.raises(ValueError):
        Tolerance(**bad)


def test_launch_bound_pairs_are_compared_by_graph_replay():
    host_bound = _rec("triton", "triton", RNG.normal(30.0, 1.0, 200))  # event median = launch latency
    host_bound["graph"] = {"status": "ok", "samples_us": list(RNG.normal(6.0, 0.05, 20)), "median_us": 6.0}
    eager = _rec("torch", "eager", RNG.normal(12.0, 0.5, 200))
    eager["graph"] = {"status": "ok", "samples_us": list(RNG.normal(9.0, 0.05, 20)), "median_us": 9.0}
    assert claims.launch_bound(host_bound) and not claims.launch_bound(eager)
    c = claims.compare(host_bound, eager, aa_rel=0.01, interpreter=False)
    assert c["basis"].startswith("CUDA-graph")
    assert c["verdict"] == claims.FASTER  # 6 us vs 9 us of device time, though its event median is 2x slower
    del eager["graph"]
    assert claims.compare(host_bound, eager, 0.01, False)["verdict"] == claims.NOT_COMPARABLE
    del host_bound["graph"]  # per-sample synchronisation and no graph: launch-bound cannot be told
    assert not claims.launch_bound(host_bound)


def test_batched_samples_are_device_time_unless_many_samples_starved():
    # Batched enqueue: a cold-L2 event median of 10 us against a warm back-to-back graph replay of 6 us
    # is a cache-state difference, not launch latency; the event medians are compared.
    batched = _rec("triton", "triton", RNG.normal(10.0, 0.1, 200))
    batched.update(
        {
            "enqueue": "batched:10",
            "batches": 20,
            "starved_batches": 1,
            "starved_samples": 2,
            "graph": {"status": "ok", "samples_us": list(RNG.normal(6.0, 0.05, 20)), "median_us": 6.0},
        }
    )
    eager = _rec("torch", "eager", RNG.normal(14.0, 0.1, 200))
    eager.update(
        {
            "enqueue": "batched:10",
            "batches": 20,
            "starved_batches": 0,
            "starved_samples": 0,
            "graph": {"status": "ok", "samples_us": list(RNG.normal(9.0, 0.05, 20)), "median_us": 9.0},
        }
    )
    assert not claims.launch_bound(batched)  # 1% of samples may hold a gap: the median stands
    c = claims.compare(batched, eager, aa_rel=0.01, interpreter=False)
    assert c["basis"] == "event median" and c["verdict"] == claims.FASTER
    # More than 5% of samples launched after the GPU could have reached them: back to graph replay.
    batched["starved_samples"] = 30
    assert claims.launch_bound(batched)
    assert claims.compare(batched, eager, 0.01, False)["basis"].startswith("CUDA-graph")
    # Records without a per-sample count fall back to the (over-counting) per-batch share.
    del batched["starved_samples"]
    batched["starved_batches"] = 2
    assert claims.starved_fraction(batched) == 0.1 and claims.launch_bound(batched)
    # Starvation makes a record launch-bound whatever its median: a long one without graph replay is not
    # compared by device time at all.
    long = _rec("triton", "triton", RNG.normal(1500.0, 1.0, 50))
    long.update({"enqueue": "batched:10", "batches": 5, "starved_batches": 5})
    assert claims.launch_bound(long)
    other = {
        **_rec("torch", "eager", RNG.normal(1700.0, 1.0, 50)),
        "enqueue": "batched:10",
        "batches": 5,
        "starved_batches": 0,
    }
    refused = claims.compare(long, other, 0.01, False)
    assert refused["verdict"] == claims.NOT_COMPARABLE and "not comparable by device time" in refused["why"]


def _late_launched_compile_case():
    """layernorm M32_N4096 bf16 as published at 092144d: torch.compile's ~100 us event median is host launch
    delay (two thirds of its samples launched late) while its kernel runs for about 1 us; its median is
    above graph_below_us, so the old rule recorded no graph and compared the event medians (a 20x claim)."""
    triton = {
        **_rec("triton_row", "triton", RNG.normal(5.0, 0.05, 200)),
        "enqueue": "batched:10",
        "batches": 20,
        "starved_samples": 0,
        "host_wall_us": 9.0,
        "graph": {"status": "ok", "samples_us": list(RNG.normal(1.2, 0.01, 30)), "median_us": 1.2},
    }
    compiled = {
        **_rec("torch_compile", "compile", RNG.normal(100.0, 3.0, 300)),
        "enqueue": "batched:10",
        "batches": 30,
        "starved_samples": 200,
        "host_wall_us": 95.0,
    }
    torch_a1 = {
        **_rec("torch", "eager", RNG.normal(6.0, 0.05, 200)),
        "block": "A1",
        "enqueue": "batched:10",
        "batches": 20,
        "starved_samples": 0,
        "graph": {"status": "ok", "samples_us": list(RNG.normal(1.5, 0.01, 30)), "median_us": 1.5},
    }
    torch_a2 = {**torch_a1, "block": "A2"}
    doc = {"implementations": [torch_a1, compiled, triton, torch_a2], "aa_floor": {"rel_diff": 0.002}}
    gate = {
        "implementations": [{"implementation": n, "status": "pass"} for n in ("triton_row", "torch", "torch_compile")]
    }
    return doc, gate


def test_late_launches_never_make_a_device_speed_claim():
    doc, gate = _late_launched_compile_case()
    by_pair = {(c["a"], c["b"]): c for c in claims.case_claims(doc, gate)}
    refused = by_pair[("triton_row", "torch_compile")]
    assert refused["verdict"] == claims.NOT_COMPARABLE
    assert "torch_compile" in refused["why"] and "device time" in refused["why"]
    # the late launches count even though the median is above graph_below_us; with a graph on both sides
    # the pair is compared by device time per call: 1.2 us vs 1.0 us, not 5 us vs 100 us
    compiled = doc["implementations"][1]
    compiled["graph"] = {"status": "ok", "samples_us": list(RNG.normal(1.0, 0.01, 30)), "median_us": 1.0}
    judged = {(c["a"], c["b"]): c for c in claims.case_claims(doc, gate)}[("triton_row", "torch_compile")]
    assert judged["basis"].startswith("CUDA-graph") and judged["verdict"] == claims.SLOWER


def test_host_cost_is_its_own_finding():
    doc, _ = _late_launched_compile_case()
    costs = {r["implementation"]: r for r in claims.host_costs(doc)}
    assert costs["torch_compile"]["host_wall_us"] == 95.0 and costs["torch_compile"]["launch_bound"]
    assert costs["triton_row"]["host_bound"] and costs["triton_row"]["device_us"] == 1.2
    assert "torch" not in costs  # no host timing recorded for it: nothing claimed


def test_claim_sentences_name_the_tuned_launch_config():
    triton = {**_rec("triton_row", "triton", RNG.normal(10.0, 0.1, 200)), "config": {"num_warps": 4}}
    torch_rec = {**_rec("torch", "eager", RNG.normal(14.0, 0.1, 200)), "block": "A1", "config": {}}
    again = {**_rec("torch", "eager", RNG.normal(14.0, 0.1, 200)), "block": "A2", "config": {}}
    doc = {"implementations": [torch_rec, triton, again], "aa_floor": {"rel_diff": 0.002}}
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("triton_row", "torch")]}
    (claim,) = claims.case_claims(doc, gate)
    assert claim["verdict"] == claims.FASTER
    assert claims.sentence(claim).startswith("triton_row [num_warps=4] is faster than torch")


def test_two_modes_finds_a_regime_shift_and_not_a_tail():
    """The power-capped shape seen on the H200 (docs/timing-basis.md, "Samples in two modes"): 39 samples near
    1384 µs, then 29 near 1527 µs, is two modes with both medians; a skewed unimodal set, a 5 % tail of
    outliers and a set of fewer than 10 samples are not."""
    rng = np.random.default_rng(3)
    shift = np.r_[rng.normal(1384.0, 4.0, 39), rng.normal(1527.0, 5.0, 29)]
    modes = stats.two_modes(shift)
    assert modes["upper"] == 29 and modes["n"] == 68
    assert modes["low_us"] == pytest.approx(1384.0, abs=3) and modes["high_us"] == pytest.approx(1527.0, abs=3)
    assert stats.two_modes(rng.lognormal(np.log(10.0), 0.05, 200)) is None  # skewed, one mode
    assert stats.two_modes(np.r_[rng.normal(10.0, 0.05, 190), rng.normal(14.0, 0.05, 10)]) is None  # a 5 % tail
    assert stats.two_modes(np.r_[rng.normal(10.0, 0.05, 180), rng.normal(14.0, 0.05, 20)])["upper"] == 20
    assert stats.two_modes([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) is None  # too few to say
    close = np.r_[rng.normal(100.0, 0.05, 50), rng.normal(103.0, 0.05, 50)]  # tight, but 3 % apart: under 5 %
    assert stats.two_modes(close) is None
    wide = np.r_[np.linspace(50.0, 150.0, 60), np.linspace(160.0, 260.0, 40)]  # a 10 µs gap in a 100 µs spread
    assert stats.two_modes(wide) is None


def test_a_two_mode_sample_set_is_refused_a_single_time():
    """A device-time sample set in two modes is named in does-not-support with both modes; the same set in the
    A/A repeat block, a unimodal set and an interpreter run's are not."""
    rng = np.random.default_rng(5)
    split = list(np.r_[rng.normal(1384.0, 4.0, 39), rng.normal(1527.0, 5.0, 29)])
    one = list(rng.normal(1384.0, 4.0, 68))

    def case(records):
        return {"kernel": "matmul", "shape": "M8192", "dtype": "bfloat16", "timing": {"implementations": records}}

    recs = [
        {"implementation": "triton_persistent", "status": "ok", "device": {"samples_us": split}},
        {"implementation": "torch", "status": "ok", "block": "A2", "device": {"samples_us": split}},
        {"implementation": "torch", "status": "ok", "block": "A1", "device": {"samples_us": one}},
    ]
    (named,) = claims.two_mode_records({"cases": [case(recs)]})
    assert named.startswith("matmul M8192 bfloat16 triton_persistent (device time: ")
    assert "29 of 68 samples in the slower mode" in named
    assert claims.two_mode_records({"cases": [case(recs[1:])]}) == []
