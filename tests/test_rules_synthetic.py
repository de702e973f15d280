"""Every reading rule on synthetic records, at the edge that decides it (issue 22): the claim rules' floor,
target verdicts, orderings held or flipped between runs, the comparison's graph-replay floor, the run summary's
exclusive time, the supports / does-not-support lists, and that the lists, the refusal order and the comparison
decide by codes, not by their sentences. Each test caught the bugs named here when planted once:

- claim_floor_edge: the A/A floor left out of the threshold (only MIN_EFFECT); ``<=`` made ``<`` at the floor.
- claim_codes: the graph-replay basis recorded as the event basis; a missing rerun calibration not refusing.
- target_verdict_is_decided_by_the_interval: met / missed on the point estimate instead of the CI bound.
- target_ratio_interval: the ratio's CI bounds swapped (baseline low / Triton low as the lower bound).
- target_ratio_interval_holds_both_baseline_blocks: the baseline's A2 block left out of its interval (a miss
  inside the baseline's own drift read "missed").
- orderings_held_flipped_unresolved: two unresolved verdicts counted as held; opposite verdicts as held.
- comparison_graph_floor: the graph-replay comparison judged by the runs' graph A/A floors alone (the
  run-to-run floor of the kind left out).
- run_summary_exclusive_time: shared sections counted as exclusive; every stage's job (Nsight Compute's)
  counted into a case's exclusive time; touching sections counted as an overlap.
- supports_needs_every_control_rejected: "every negative control was rejected" while one was accepted.
- statements_sort_by_verdict_codes: a slower claim left out of the supports list (only "faster" filtered).
- refusals_are_ordered_by_topic: a mixed-commit refusal given the default topic.
- compare_decides_by_codes: the reproduced count read from the ``why`` text (a reworded reason changed it).
"""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from kernelscope import claims, compare, runsummary, scores, wording
from kernelscope.spec import Target
from kernelscope.verdicts import Basis, Reason, Statement, Topic, Verdict, topic_order

N = 60  # samples per side: enough for the test (stats.MIN_SAMPLES_FOR_TEST)


def _samples(median: float, spread: float = 1e-4) -> list[float]:
    """N samples evenly spread (relative width ``spread``) around ``median``."""
    return [median * (1 + spread * (i - (N - 1) / 2) / N) for i in range(N)]


def _rec(name: str, kind: str, median: float, **kw) -> dict:
    samples = _samples(median)
    rec = {"implementation": name, "kind": kind, "status": "ok", "samples_us": samples, "n": N, "enqueue": "batched:10"}
    return {**rec, "median_us": statistics.median(samples), **kw}


# --- the claim rules -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("effect", "verdict"), [(0.0302, Verdict.FASTER), (0.0298, Verdict.UNRESOLVED)])
def test_claim_floor_edge(effect, verdict):
    """A 3 % A/A floor: a difference just above it is claimed, just below it is not (the minimum effect, 1 %,
    would claim both)."""
    a, b = _rec("t", "triton", 10.0 * (1 - effect)), _rec("e", "eager", 10.0)
    c = claims.compare(a, b, 0.03, interpreter=False)
    assert c["verdict"] == verdict, c["why"]
    assert c["threshold_rel"] == 0.03 and c["effect_rel"] == pytest.approx(effect, rel=1e-3)
    assert c["reason"] == (Reason.ABOVE_FLOOR if verdict == Verdict.FASTER else Reason.BELOW_FLOOR)
    assert c["basis_key"] == Basis.EVENT and c["mannwhitney_p"] < claims.ALPHA
    # the other direction, the same edge
    slower = claims.compare(_rec("t", "triton", 10.0 * (1 + effect)), b, 0.03, interpreter=False)
    assert slower["verdict"] == (Verdict.SLOWER if verdict == Verdict.FASTER else Verdict.UNRESOLVED)


def test_claim_floor_is_inclusive():
    """An effect exactly at the floor is not claimed (the floor is "within the noise")."""
    a, b = _rec("t", "triton", 9.7), _rec("e", "eager", 10.0)
    effect = abs(a["median_us"] - b["median_us"]) / b["median_us"]
    c = claims.compare(a, b, effect, interpreter=False)
    assert c["effect_rel"] == c["threshold_rel"] and c["verdict"] == Verdict.UNRESOLVED
    assert c["reason"] == Reason.BELOW_FLOOR


def test_claim_codes():
    """Each path of the rules records its basis and reason as codes, and the words are rendered from them."""
    t, e = _rec("t", "triton", 8.0), _rec("e", "eager", 10.0)
    assert claims.compare(t, e, 0.0, interpreter=True)["reason"] == Reason.INTERPRETER
    broken = {**e, "status": "error", "reason": "boom"}
    c = claims.compare(t, broken, 0.0, interpreter=False)
    assert (c["verdict"], c["reason"], c["untimed"]["implementation"]) == (
        Verdict.NOT_COMPARABLE,
        Reason.UNTIMED,
        "e",
    )
    assert c["why"] == "e has no valid timing (error: boom)"
    # launch-bound on both sides (too many late launches, no device time): judged by graph replay
    starved = {"enqueue": "batched:10", "starved_samples": N // 2}
    tg = _rec("t", "triton", 20.0, graph={"status": "ok", "samples_us": _samples(8.0), "median_us": 8.0}, **starved)
    eg = _rec("e", "eager", 20.0, graph={"status": "ok", "samples_us": _samples(10.0), "median_us": 10.0}, **starved)
    c = claims.compare(tg, eg, 0.0, interpreter=False, aa_graph_rel=0.0)
    assert (c["verdict"], c["basis_key"], c["reason"]) == (Verdict.FASTER, Basis.GRAPH, Reason.ABOVE_FLOOR)
    assert c["why"].endswith(claims.GRAPH_BASIS_REASON) and wording.why(c, "¹").endswith("; by graph replay¹")
    assert claims.GRAPH_BASIS_REASON not in wording.note(c)
    no_graph = claims.compare(tg, {**eg, "graph": None}, 0.0, interpreter=False)
    assert (no_graph["reason"], no_graph["graph_sides"]) == (Reason.LAUNCH_BOUND_NO_GRAPH, 1)
    # device time without a rerun calibration: a resolved difference is not claimed
    td = {**t, "device": {"status": "ok", "samples_us": _samples(8.0), "median_us": 8.0}}
    ed = {**e, "device": {"status": "ok", "samples_us": _samples(10.0), "median_us": 10.0}}
    c = claims.compare(td, ed, 0.0, interpreter=False)
    assert (c["verdict"], c["basis_key"], c["reason"]) == (
        Verdict.UNRESOLVED,
        Basis.DEVICE,
        Reason.NO_RERUN_CALIBRATION,
    )
    assert c["size_class"] in c["why"]
    # a gate failure: no timing comparison, the gate's outcome as a code
    timing = {"implementations": [t, e]}
    gate = {"implementations": [{"implementation": "t", "status": "pass"}, {"implementation": "e", "status": "oom"}]}
    (c,) = claims.case_claims(timing, gate)
    assert (c["reason"], c["gate"][0]["gate"]) == (Reason.FAILED_GATE, "crashed")
    assert c["why"] == "e crashed in the correctness gate (oom: None)"


# --- targets ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "low", "high", "verdict"),
    [
        (1.30, 1.20, 1.40, scores.MET),  # the whole interval at or above the goal
        (1.25, 1.20, 1.30, scores.MET),  # the lower bound exactly at the goal
        (1.25, 1.19, 1.30, scores.NOT_RESOLVED),  # point estimate above, interval straddles
        (1.15, 1.10, 1.21, scores.NOT_RESOLVED),  # point estimate below, interval straddles
        (1.10, 1.00, 1.19, scores.MISSED),  # the whole interval below
        (1.30, None, None, scores.NOT_RESOLVED),  # no interval: nothing is decided
    ],
)
def test_target_verdict_is_decided_by_the_interval(value, low, high, verdict):
    assert scores._verdict(value, low, high, 1.20) == verdict


def _timing_row(name: str, kind: str, us: float, low: float, high: float) -> dict:
    return {
        "kernel": "k",
        "shape": "S",
        "dtype": "float16",
        "block": "A1" if kind == "eager" else "",
        "status": "ok",
        "implementation": name,
        "kind": kind,
        "bytes_moved": 1e9,
        "basis": "device",
        "basis_us": us,
        "basis_ci95_low_us": low,
        "basis_ci95_high_us": high,
        "device_us": us,
        "device_ci95_low_us": low,
        "device_ci95_high_us": high,
        "launch_bound": False,
        "graph_us": None,
        "median_us": us,
        "ci95_low_us": low,
        "ci95_high_us": high,
        "pct_copy_bw": 50.0 * 10.0 / us,
    }


@pytest.mark.parametrize(("at_least", "verdict"), [(1.1, scores.NOT_RESOLVED), (0.8, scores.MET), (1.3, scores.MISSED)])
def test_target_ratio_interval(monkeypatch, at_least, verdict):
    """Both sides 10 µs with CIs 9-11 µs: the speedup is 1, its interval 9/11 to 11/9; a goal inside it is not
    resolved (with the bounds swapped it would read "met")."""
    target = Target(variant="t", metric="speedup", at_least=at_least, reason="a goal", baseline="e")
    declared = {"label": target.label, "variant": "t", "baseline": "e", "metric": "speedup"}
    declared.update(at_least=at_least, reason="a goal")  # as KernelSpec.declaration records it
    timing = pd.DataFrame([_timing_row("t", "triton", 10.0, 9.0, 11.0), _timing_row("e", "eager", 10.0, 9.0, 11.0)])
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("t", "e")]}
    case = {"kernel": "k", "shape": "S", "dtype": "float16", "params": {"N": 1}, "correctness": gate}
    case["declaration"] = {"targets": [declared]}
    (row,) = scores.targets({"cases": [case]}, {"timing": timing}).to_dict("records")
    assert row["ci_low"] == pytest.approx(9 / 11) and row["ci_high"] == pytest.approx(11 / 9)
    assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["verdict"] == verdict


def test_target_ratio_interval_when_one_side_is_sustained():
    """A Triton record of 1 ms and more carries a sustained-load basis, its baseline under 1 ms not: the ratio
    falls back to both sides' burst device time, and keeps both sides' device intervals (it dropped them, and
    a clear miss read "not resolved")."""
    target = Target(variant="t", metric="speedup", at_least=0.95, reason="a goal", baseline="e")
    declared = {"label": target.label, "variant": "t", "baseline": "e", "metric": "speedup"}
    declared.update(at_least=0.95, reason="a goal")
    tri = _timing_row("t", "triton", 1100.0, 1090.0, 1110.0) | {"basis": "sustained", "basis_us": 1150.0}
    tri.update(device_ci95_low_us=1090.0, device_ci95_high_us=1110.0)
    base = _timing_row("e", "eager", 850.0, 845.0, 855.0) | {"device_ci95_low_us": 845.0, "device_ci95_high_us": 855.0}
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("t", "e")]}
    case = {"kernel": "k", "shape": "S", "dtype": "float16", "params": {"N": 1}, "correctness": gate}
    case["declaration"] = {"targets": [declared]}
    (row,) = scores.targets({"cases": [case]}, {"timing": pd.DataFrame([tri, base])}).to_dict("records")
    assert row["value"] == pytest.approx(850 / 1100)
    assert row["ci_low"] == pytest.approx(845 / 1110) and row["ci_high"] == pytest.approx(855 / 1090)
    assert row["verdict"] == scores.MISSED


@pytest.mark.parametrize(
    ("a2_us", "verdict"),
    [(11.0, scores.NOT_RESOLVED), (10.0, scores.MISSED)],
)
def test_target_ratio_interval_holds_both_baseline_blocks(a2_us, verdict):
    """The baseline timed before the variant (A1, 10 µs) and after it (A2): the variant (10.5 µs, goal 1.0×)
    misses against A1 alone, but where A2 took 11 µs the baseline at the variant's time lay anywhere between,
    so the goal is not resolved, and the note names both blocks. Where A2 agrees with A1 the miss stands."""
    declared = {"label": "t >= 1x e", "variant": "t", "baseline": "e", "metric": "speedup", "at_least": 1.0}
    declared["reason"] = "a goal"
    a2 = _timing_row("e", "eager", a2_us, a2_us - 0.1, a2_us + 0.1) | {"block": "A2"}
    tri = _timing_row("t", "triton", 10.5, 10.45, 10.55)
    timing = pd.DataFrame([tri, _timing_row("e", "eager", 10.0, 9.9, 10.1), a2])
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("t", "e")]}
    case = {"kernel": "k", "shape": "S", "dtype": "float16", "params": {"N": 1}, "correctness": gate}
    case.update(declaration={"targets": [declared]}, primary_baseline="e")
    (row,) = scores.targets({"cases": [case]}, {"timing": timing}).to_dict("records")
    assert row["value"] == pytest.approx(10.0 / 10.5) and row["verdict"] == verdict
    assert row["ci_high"] == pytest.approx(max(10.1, a2_us + 0.1) / 10.45)
    assert ("A2 11.0 µs" in row["note"]) == (a2_us == 11.0)
    (best,) = scores.best_ratios({"cases": [case]}, {"timing": timing, "claims": pd.DataFrame()}).to_dict("records")
    assert best["ci_high"] == pytest.approx(row["ci_high"]) and best["speedup"] == pytest.approx(row["value"])


def test_target_blocks_note_is_on_the_ratios_basis():
    """A baseline of 1 ms and more (sustained load in both blocks, 1000 and 1100 µs there) against a variant under
    1 ms: the ratio falls back to device time, so the two blocks are widened and named on device time (A1 990,
    A2 1050 µs), never by their sustained-load medians (the note printed those while the interval was on device
    time)."""
    declared = {"label": "t >= 1x e", "variant": "t", "baseline": "e", "metric": "speedup", "at_least": 1.0}
    declared["reason"] = "a goal"
    sustained = {"basis": "sustained", "basis_ci95_low_us": None, "basis_ci95_high_us": None}
    a1 = _timing_row("e", "eager", 990.0, 985.0, 995.0) | sustained | {"basis_us": 1000.0}
    a2 = _timing_row("e", "eager", 1050.0, 1045.0, 1055.0) | sustained | {"basis_us": 1100.0, "block": "A2"}
    tri = _timing_row("t", "triton", 980.0, 975.0, 985.0)
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("t", "e")]}
    case = {"kernel": "k", "shape": "S", "dtype": "float16", "params": {"N": 1}, "correctness": gate}
    case.update(declaration={"targets": [declared]}, primary_baseline="e")
    (row,) = scores.targets({"cases": [case]}, {"timing": pd.DataFrame([tri, a1, a2])}).to_dict("records")
    assert row["value"] == pytest.approx(990 / 980) and row["ci_high"] == pytest.approx(1055 / 975)
    assert "basis: device time" in row["note"] and "A1 990.0 µs, A2 1050.0 µs" in row["note"]
    assert row["verdict"] == scores.MET  # [985/985, 1055/975]: at the goal from below


def test_ratio_without_device_time_on_one_side_takes_both_event_medians():
    """A baseline with device time (5 µs) and an event median of 10 µs against a variant that has only its event
    median (10 µs): the claim rules compare them on event medians, so the ratio is 1, not the baseline's device
    time over the variant's event median (0.5, as it was)."""
    base = pd.Series(_timing_row("e", "eager", 10.0, 9.0, 11.0) | {"basis_us": 5.0, "device_us": 5.0})
    tri = pd.Series(_timing_row("t", "triton", 10.0, 9.0, 11.0) | {"basis": "event", "device_us": None})
    r = scores.ratio(base, tri)
    assert r["basis"] == "event median" and r["speedup"] == pytest.approx(1.0)
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(9 / 11), pytest.approx(11 / 9))


def test_targets_of_variants_the_run_did_not_select_are_not_scored():
    """A config narrowed to some variants (config/kernels-next.yaml runs triton_persistent, not
    triton_grouped) has no gate record for the others: their targets are not 'not resolved', they are not
    this run's (they were counted as not resolved, and the front page's tally with them)."""
    declared = [
        {"label": f"{v} >= 1x e", "variant": v, "baseline": "e", "metric": "speedup", "at_least": 1.0, "reason": "r"}
        for v in ("t", "absent")
    ]
    timing = pd.DataFrame([_timing_row("t", "triton", 10.0, 9.9, 10.1), _timing_row("e", "eager", 12.0, 11.9, 12.1)])
    gate = {"implementations": [{"implementation": n, "status": "pass"} for n in ("t", "e")]}
    case = {"kernel": "k", "shape": "S", "dtype": "float16", "params": {"N": 1}, "correctness": gate}
    case["declaration"] = {"targets": declared}
    rows = scores.targets({"cases": [case]}, {"timing": timing}).to_dict("records")
    assert [r["variant"] for r in rows] == ["t"] and rows[0]["verdict"] == scores.MET


# --- two runs: orderings and the comparison's floors ------------------------------------------------------------


def _gate(*names: str) -> dict:
    return {"implementations": [{"implementation": n, "status": "pass"} for n in names]}


def _run(device: str, cases: dict[str, dict[str, float]], created: str, **rec_kw) -> dict:
    """A collected run (``rundata.collect``'s shape) of cases ``shape -> implementation -> median``."""
    kinds = {"t": "triton", "e": "eager"}
    out = []
    for shape, medians in cases.items():
        recs = [_rec(n, kinds[n], us, **(rec_kw.get(n) or {})) for n, us in medians.items()]
        recs[1]["block"] = "A1"
        timing = {"created": created, "implementations": recs}
        out.append(
            {"kernel": "k", "shape": shape, "dtype": "float16", "timing": timing, "correctness": _gate(*medians)}
        )
    env = {"git": {"commit": "c0ffee"}, "gpu": {"uuid": "GPU-1"}}
    return {"specs": {"device": device, "timing": {}}, "environment": env, "cases": out}


def test_orderings_held_flipped_unresolved():
    a = _run("A", {"held": {"t": 8, "e": 10}, "flipped": {"t": 8, "e": 10}, "same": {"t": 10, "e": 10}}, "2026")
    b = _run("B", {"held": {"t": 8, "e": 10}, "flipped": {"t": 12, "e": 10}, "same": {"t": 10, "e": 10}}, "2027")
    got = compare.orderings(a, b).set_index("shape")
    assert got.loc["held", "ordering"] == compare.HELD
    assert got.loc["flipped", "ordering"] == compare.FLIPPED
    assert (got.loc["flipped", "verdict_a"], got.loc["flipped", "verdict_b"]) == (Verdict.FASTER, Verdict.SLOWER)
    assert got.loc["same", "ordering"] == compare.ORDER_UNRESOLVED
    assert got.loc["same", "verdict_a"] == got.loc["same", "verdict_b"] == Verdict.UNRESOLVED


@pytest.mark.parametrize(("slowdown", "verdict"), [(1.025, Verdict.UNRESOLVED), (1.06, Verdict.SLOWER)])
def test_comparison_graph_floor(slowdown, verdict):
    """A launch-bound eager record compared run to run by graph replay: the floor is the eager kind's run-to-run
    floor (4 %), not the runs' graph A/A floors (none here, so 1 %)."""
    starved = {"enqueue": "batched:10", "starved_samples": N // 2}

    def graphed(us: float) -> dict:
        return {**starved, "graph": {"status": "ok", "samples_us": _samples(us), "median_us": us}}

    a = _run("A", {"S": {"t": 20, "e": 20}}, "2026", t=graphed(8.0), e=graphed(10.0))
    b = _run("B", {"S": {"t": 20, "e": 20}}, "2027", t=graphed(8.0), e=graphed(10.0 * slowdown))
    rows = compare.compare_cases(a, b).set_index("implementation")
    e = rows.loc["e"]
    assert e["basis"] == wording.BASIS_NAMES[Basis.GRAPH] and e["verdict"] == verdict, e["why"]
    assert e["floor"] == compare.RUN_TO_RUN_FLOOR["eager"]
    assert e["b_time_over_a"] == pytest.approx(slowdown, rel=1e-3)


def test_compare_decides_by_codes(monkeypatch):
    """The comparison's statements count pairs by their reason codes: a rewording of every reason (here: each
    row's why made to read like a carried measurement) changes no count."""
    a = _run("A", {"S": {"t": 8, "e": 10}, "U": {"t": 8, "e": 10}}, "2026")
    b = _run("B", {"S": {"t": 8, "e": 10}, "U": {"t": 8, "e": 10}}, "2027")
    b["cases"][1]["timing"]["implementations"][0].update(status="error", reason="boom")
    monkeypatch.setattr(compare.wording, "comparison_why", lambda row, claim: "the same measurement in both runs")
    rows = compare.compare_cases(a, b)
    assert list(rows["reason"]).count(Reason.NO_TIMING_IN_RUN) == 1
    said = compare._statements(compare.RERUN, rows, a, b)["supports"]
    assert any(s.startswith("3 of 3 implementation × case pairs timed in both runs") for s in said), said


# --- the run summary -------------------------------------------------------------------------------------------


def _job(stage: str, shape: str, sections: list[tuple[str, float, float]]) -> dict:
    exclusive = sum(e - s for m, s, e in sections if m == "exclusive")
    shared = sum(e - s for m, s, e in sections if m == "shared")
    gpu = {
        "uuid": "GPU-1",
        "exclusive_s": exclusive,
        "shared_s": shared,
        "lock_wait_s": 0.0,
        "sections": [{"mode": m, "start": s, "end": e} for m, s, e in sections],
    }
    return {"kernel": "k", "dtype": "float16", "shape": shape, "gpu": gpu, "job_started_at": 0.0, "job_ended_at": 100.0}


def test_run_summary_exclusive_time(tmp_path, monkeypatch):
    """Two cases: sweep, timing and Nsight Compute hold the GPU exclusively, correctness and profile share it.
    Exclusive time is the exclusive sections' length, per case the sweep's and timing's; sections that touch do
    not overlap."""
    jobs = {
        ("correctness", "A"): [("shared", 0, 5)],
        ("sweep", "A"): [("exclusive", 5, 7)],
        ("timing", "A"): [("exclusive", 7, 10), ("shared", 10, 11)],
        ("profile", "A"): [("shared", 11, 20)],
        ("ncu", "A"): [("exclusive", 20, 26)],  # exclusive, but no part of a case's measuring cost
        ("correctness", "B"): [("shared", 0, 1)],
        ("sweep", "B"): [("exclusive", 10, 11)],
        ("timing", "B"): [("exclusive", 11, 15)],
    }
    for (stage, shape), sections in jobs.items():
        path = tmp_path / stage / "k" / "float16" / f"{shape}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_job(stage, shape, sections)))
    cases = [{"kernel": "k", "dtype": "float16", "shape": s} for s in ("A", "B")]
    specs = {"device": "d", "interpreter": False, "config_hash": "h", "cases": cases}
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    monkeypatch.setattr(runsummary.results_io, "load", lambda path: json.loads(path.read_text()))  # no schemas
    run = runsummary.summarize(tmp_path)
    assert run["gpu_exclusive_s"] == pytest.approx(2 + 3 + 1 + 4 + 6)
    assert run["exclusive_s_per_case_median"] == pytest.approx((5 + 5) / 2)  # A: 2 + 3, B: 1 + 4
    assert run["exclusive_overlaps"] == 0
    assert runsummary.overlapping_exclusive_sections([("g", 0, 2), ("g", 1, 3), ("h", 1, 3)]) == 1


# --- supports / does not support -------------------------------------------------------------------------------


def _statement_inputs(controls_rejected: list[bool], claim_rows: list[dict] | None = None, commits=("c0ffee",)):
    cases = [
        {
            "kernel": "k",
            "shape": f"S{i}",
            "dtype": "float16",
            "timing": {"git": {"commit": commit}, "implementations": []},
            "ncu": {"ran": True},
        }
        for i, commit in enumerate(commits)
    ]
    data = {
        "environment": {"git": {"commit": commits[0]}, "gpu": {"uuid": "GPU-1"}},
        "specs": {"interpreter": False, "config_hash": "h", "seeds": [0], "timing": {}},
        "cases": cases,
    }
    corr = pd.DataFrame(
        [
            {
                "kernel": "k",
                "shape": "S0",
                "dtype": "float16",
                "implementation": f"control_{i}",
                "role": "negative control",
                "status": "pass",
                "declined": None,
                "outcome": "rejected" if rejected else "pass",
                "rejected": rejected,
                "control_error": None,
                "failure": None,
            }
            for i, rejected in enumerate(controls_rejected)
        ]
    )
    tbl = {"claims": pd.DataFrame(claim_rows or []), "correctness": corr, "timing": pd.DataFrame()}
    return data, tbl


def _fingerprint(monkeypatch):
    fields = ("gpu", "torch", "triton", "cuda_runtime", "driver")
    monkeypatch.setattr(claims, "fingerprint", lambda env: dict.fromkeys(fields, "x"))


def test_supports_needs_every_control_rejected(monkeypatch):
    _fingerprint(monkeypatch)
    every = "every negative control"
    said = claims.statements(*_statement_inputs([True, True]))
    assert any(every in s and "(2 kinds, 2 runs) was rejected" in s for s in said["supports"])
    said = claims.statements(*_statement_inputs([True, False]))
    assert not any(every in s for s in said["supports"]), said["supports"]
    (dead,) = [s for s in said["does_not_support"] if s.topic == Topic.DEAD_CONTROL]
    assert "control_1 was accepted, so the gate is too loose there" in dead


def _claim_row(verdict: Verdict, reason: Reason, **kw) -> dict:
    claim = {"a": "t", "b": "e", "verdict": verdict, "reason": reason, "median_a_us": 8.0, "median_b_us": 10.0}
    claim |= {"effect_rel": 0.2, "threshold_rel": 0.03, "mannwhitney_p": 1e-9, "basis_key": Basis.EVENT, **kw}
    views = {"why": wording.why(claim), "why_noted": wording.why(claim, "¹"), "sentence": wording.sentence(claim)}
    return {"kernel": "k", "shape": "S0", "dtype": "float16", **claim, **views, "sentence_noted": views["sentence"]}


def test_statements_sort_by_verdict_codes(monkeypatch):
    _fingerprint(monkeypatch)
    rows = [
        _claim_row(Verdict.FASTER, Reason.ABOVE_FLOOR),
        _claim_row(Verdict.SLOWER, Reason.ABOVE_FLOOR, median_a_us=12.0),
        _claim_row(Verdict.UNRESOLVED, Reason.BELOW_FLOOR, effect_rel=0.01),
        _claim_row(Verdict.NOT_COMPARABLE, Reason.INTERPRETER),
    ]
    said = claims.statements(*_statement_inputs([True], rows))
    orderings = [s for s in said["supports"] if s.startswith("k S0 float16:")]
    assert [" is faster than " in s for s in orderings] == [True, False]
    assert " is slower than " in orderings[1]
    refused = [s for s in said["does_not_support"] if s.startswith("An ordering of t and e")]
    assert refused == ["An ordering of t and e for k S0 float16: " + rows[2]["why_noted"] + "."]


def test_refusals_are_ordered_by_topic(monkeypatch):
    """A run resumed at another commit, with a case missing: those refusals come before the standing ones, each
    with its topic; the order within a topic is kept."""
    _fingerprint(monkeypatch)
    data, tbl = _statement_inputs([True], commits=("c0ffee", "beef"))
    data["cases"].append({"kernel": "k", "shape": "S9", "dtype": "float16", "timing": None, "ncu": {"ran": True}})
    ordered = topic_order(claims.statements(data, tbl)["does_not_support"])
    assert [s.topic for s in ordered[:2]] == [Topic.MIXED_RUN, Topic.MISSING]
    assert ordered[0].startswith("Reading every case as one commit's code") and ordered[1].startswith("Anything")
    assert all(s.topic == Topic.OTHER for s in ordered[2:])
    mixed = [Statement("b", Topic.OTHER), "c", Statement("a", Topic.INTERPRETER), Statement("d", Topic.OTHER)]
    assert topic_order(mixed) == ["a", "b", "c", "d"]


def test_two_mode_samples_reach_does_not_support(monkeypatch):
    """The refusal is made from the cases' records (a GPU run), under the clocks topic, and not for an
    interpreter run."""
    _fingerprint(monkeypatch)
    data, tbl = _statement_inputs([True])
    samples = [1384.0 + 0.1 * i for i in range(39)] + [1527.0 + 0.1 * i for i in range(29)]
    data["cases"][0]["timing"]["implementations"] = [
        {"implementation": "t", "status": "ok", "sustained": {"samples_us": samples}}
    ]
    (said,) = [s for s in claims.statements(data, tbl)["does_not_support"] if "two modes" in s]
    assert said.startswith("A single time for 1 sample set whose samples fall in two modes;")
    assert said.topic == Topic.CLOCKS
    assert "k S0 float16 t (sustained load: 1385.9 and 1528.4 µs, 29 of 68 samples in the slower mode)" in said
    data["specs"]["interpreter"] = True
    assert not [s for s in claims.statements(data, tbl)["does_not_support"] if "two modes" in s]


def _stage_case(sweep_us: float, timing_us: float, basis: str = "device", block: str | None = None) -> dict:
    """One case whose sweep timed triton_p's chosen config at ``sweep_us`` and whose timing stage timed it at
    ``timing_us`` (device time)."""
    chosen = {"key": "num_stages=2", "status": "ok", "median_us": sweep_us, "basis": basis}
    other = {"key": "num_stages=1", "status": "ok", "median_us": sweep_us * 1.1, "basis": basis}
    rec = {"implementation": "triton_p", "status": "ok", "device": {"status": "ok", "median_us": timing_us}}
    if block:
        rec["block"] = block
    return {
        "kernel": "softmax",
        "shape": "M1024_N65536",
        "dtype": "float16",
        "sweeps": [{"implementation": "triton_p", "best": {"key": "num_stages=2"}, "configs": [other, chosen]}],
        "timing": {"implementations": [rec]},
    }


def test_a_config_the_timing_stage_times_apart_from_the_sweep_is_named():
    """A timed config whose timing-stage device time lies more than STAGE_AGREEMENT from the sweep's time of the
    same config is named with both times; one within it, an event-basis sweep and an A2 record are not; a rerun
    calibration wider than the limit for that size widens it."""
    (named,) = claims.stage_disagreements({"cases": [_stage_case(136.0, 156.5)]})
    assert named == (
        "softmax M1024_N65536 float16 triton_p [num_stages=2]: 136.0 µs in the sweep, 156.5 µs in the timing stage "
        "(+15.1%)"
    )
    assert claims.stage_disagreements({"cases": [_stage_case(136.0, 128.0)]})[0].endswith("(-5.9%)")
    spilling = _stage_case(136.0, 156.5)
    spilling["sweeps"][0]["configs"][1]["kernels"] = [{"kernel": "p", "registers": 255, "local_bytes": 376}]
    (named,) = claims.stage_disagreements({"cases": [spilling]})
    assert named.endswith("(+15.1%), its kernel using 376 bytes of local memory a thread")
    assert claims.stage_disagreements({"cases": [_stage_case(136.0, 141.0)]}) == []  # 3.7 %
    assert claims.stage_disagreements({"cases": [_stage_case(136.0, 156.5, basis="event")]}) == []
    assert claims.stage_disagreements({"cases": [_stage_case(136.0, 156.5, block="A2")]}) == []
    wide = {"status": "ok", "summary": [{"basis": "device", "size_class": "100-1000 us", "kind": "triton"}]}
    wide["summary"][0].update(p95_rel=0.2, n=30)
    assert claims.stage_disagreements({"cases": [_stage_case(136.0, 156.5)], "reruns": wide}) == []
    wide["summary"][0]["p95_rel"] = 0.1
    assert len(claims.stage_disagreements({"cases": [_stage_case(136.0, 156.5)], "reruns": wide})) == 1


def test_stage_disagreement_reaches_does_not_support(monkeypatch):
    """The refusal is made from the cases' records on a GPU run, and not for an interpreter run."""
    _fingerprint(monkeypatch)
    data, tbl = _statement_inputs([True])
    data["cases"] = [_stage_case(136.0, 156.5)]
    (said,) = [s for s in claims.statements(data, tbl)["does_not_support"] if "sweep's choice" in s]
    assert said.startswith("The sweep's choice of launch config for 1 timed Triton variant whose timing-stage")
    assert said.endswith("156.5 µs in the timing stage (+15.1%).")
    data["specs"]["interpreter"] = True
    assert not [s for s in claims.statements(data, tbl)["does_not_support"] if "sweep's choice" in s]


def _short_case(faults_of_configs: list[str | None], best: dict | None = None) -> dict:
    """One case whose sweep of triton_p ended its configs with these faults (None: timed)."""
    configs = [
        {"key": f"c{i}", "status": "failed", "fault": f} if f else {"key": f"c{i}", "status": "ok", "median_us": 10.0}
        for i, f in enumerate(faults_of_configs)
    ]
    sweep = {"implementation": "triton_p", "best": best, "configs": configs}
    return {"kernel": "softmax", "shape": "M1024_N65536", "dtype": "float32", "sweeps": [sweep], "timing": {}}


def test_a_sweep_lost_to_gpu_memory_is_named_with_its_faults():
    """A variant whose sweep found no valid config with any config out of GPU memory is named, its faults counted in
    words; one with a valid config, or whose configs failed otherwise, is not."""
    (named,) = claims.sweeps_lost_to_memory({"cases": [_short_case(["oom", "oom", "error"])]})
    assert named == "softmax M1024_N65536 float32 triton_p (3 configs: 2 out of GPU memory, 1 raised)"
    assert claims.sweeps_lost_to_memory({"cases": [_short_case(["error", "compile_error"])]}) == []
    assert claims.sweeps_lost_to_memory({"cases": [_short_case(["oom", None], best={"key": "c1"})]}) == []


def test_a_sweep_lost_to_gpu_memory_reaches_does_not_support(monkeypatch):
    _fingerprint(monkeypatch)
    data, tbl = _statement_inputs([True])
    data["cases"] = [_short_case(["oom"] * 8)]
    (said,) = [s for s in claims.statements(data, tbl)["does_not_support"] if "out of GPU memory" in s]
    assert said.startswith("Any time of 1 variant whose sweep found no valid config, some or all of them out of GPU")
    assert said.endswith("triton_p (8 configs: 8 out of GPU memory).") and said.topic == Topic.UNTIMED_IMPLEMENTATION
    data["specs"]["interpreter"] = True
    assert not [s for s in claims.statements(data, tbl)["does_not_support"] if "out of GPU memory" in s]
