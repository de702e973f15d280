"""Run-against-run comparison on recorded data (the committed H200 results): what each kind of pair of runs
supports, and that a real difference is found while an identical rerun reproduces."""

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kernelscope import claims, compare, report, reruns, rundata
from kernelscope.verdicts import Basis, Reason, Verdict
from workflow_support import ROOT

CASE = Path("timing") / "softmax" / "float16" / "M8192_N8192.json"


@pytest.fixture(scope="module")
def h200(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200")
    # the run of 5f19e28 (30 of 37 cases timed), kept as fixture data
    with tarfile.open(ROOT / "reports" / "nvidia-h200-5f19e28" / "raw-results.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return root / "results" / "nvidia-h200"


@pytest.fixture(scope="module")
def h200_md(h200, tmp_path_factory) -> str:
    """The fixture run's own report, rendered by the code under test (not the committed file, which a
    regression in the renderer would leave untouched)."""
    out = tmp_path_factory.mktemp("h200-report")
    report.build(h200, out)
    return _pages(out)


def _pages(out: Path) -> str:
    """A rendered report's Markdown pages, one after the other: the first page, the details, each kernel's."""
    pages = [out / "report.md", out / "details.md", *sorted((out / "kernels").glob("*.md"))]
    return "\n".join(page.read_text() for page in pages)


def _copy(h200: Path, tmp_path: Path, label: str, remeasured: bool = True) -> Path:
    """A second run with the same numbers; ``remeasured``: its timing records carry their own timestamps, as a
    rerun's do (without it, the copy holds the very same measurements, as a resumed run's carried cases do)."""
    dest = tmp_path / label
    shutil.copytree(h200, dest)
    specs = json.loads((dest / "specs.json").read_text())
    (dest / "specs.json").write_text(json.dumps({**specs, "device": label}))
    if remeasured:
        for path in (dest / "timing").rglob("*.json"):
            _edit(path, lambda doc: doc.update(created=doc["created"].replace("2026", "2027")))
    return dest


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _document(a: Path, b: Path) -> dict:
    ca, cb = rundata.collect(a), rundata.collect(b)
    return compare.document(ca, cb, compare.comparability(ca, cb), compare.compare_cases(ca, cb))


def _rows(a: Path, b: Path):
    return compare.compare_cases(rundata.collect(a), rundata.collect(b))


def test_identical_rerun_reproduces_everywhere(h200, tmp_path):
    rerun = _copy(h200, tmp_path, "h200-rerun")
    a, b = rundata.collect(h200), rundata.collect(rerun)
    assert compare.comparability(a, b)["kind"] == compare.RERUN
    rows = compare.compare_cases(a, b)
    timed = rows[rows["verdict"] != compare.NOT_COMPARABLE]
    # an identical copy has p = 1 everywhere, so this only shows nothing is invented; test_compare_rules.py
    # compares against a remeasured copy, where the rules have real p-values and differences to judge
    assert len(timed) >= 70 and (timed["verdict"] == claims.UNRESOLVED).all()
    # what is left out is left out with a reason: untimed (unsupported), or launch-bound records of 5f19e28,
    # which have no graph replay and so cannot be compared by device time
    assert (
        rows.loc[rows["verdict"] == compare.NOT_COMPARABLE, "why"]
        .str.match(r"no timing in|not comparable by device time")
        .all()
    )


def test_a_real_slowdown_in_the_rerun_is_found_and_a_small_one_is_not(h200, tmp_path):
    rerun = _copy(h200, tmp_path, "h200-rerun")

    def slow(factor, impl):
        def fn(doc):
            for rec in doc["implementations"]:
                if rec["implementation"] == impl:
                    rec["samples_us"] = list(np.asarray(rec["samples_us"]) * factor)
                    rec["median_us"] *= factor

        return fn

    _edit(rerun / CASE, slow(1.10, "triton_row"))  # 10 %: far above the case's A/A floor (0.05 %) and 1 %
    _edit(rerun / CASE, slow(1.004, "triton_online"))  # 0.4 %: significant but under the 1 % minimum effect
    rows = _rows(h200, rerun).set_index(["kernel", "shape", "implementation"])
    row = rows.loc[("softmax", "M8192_N8192", "triton_row")]
    assert row["verdict"] == claims.SLOWER and row["b_time_over_a"] == pytest.approx(1.10, rel=1e-3)
    assert rows.loc[("softmax", "M8192_N8192", "triton_online"), "verdict"] == claims.UNRESOLVED
    assert rows.loc[("softmax", "M8192_N8192", "torch"), "verdict"] == claims.UNRESOLVED
    text = json.dumps(_document(h200, rerun))
    assert "triton_row: h200-rerun is slower than nvidia-h200" in text and "the rerun" not in text


def test_a_rerun_difference_is_claimed_only_above_the_run_to_run_floor(h200, tmp_path):
    # 3 %: far above the in-job A/A floor (0.05 %) but within what reruns of unchanged code have shown
    rerun = _copy(h200, tmp_path, "h200-rerun")
    _edit(
        rerun / CASE,
        lambda doc: [
            rec.update(samples_us=list(np.asarray(rec["samples_us"]) * 1.03), median_us=rec["median_us"] * 1.03)
            for rec in doc["implementations"]
            if rec["implementation"] == "triton_row"
        ],
    )
    rows = _rows(h200, rerun).set_index(["kernel", "shape", "implementation"])
    row = rows.loc[("softmax", "M8192_N8192", "triton_row")]
    assert row["verdict"] == claims.UNRESOLVED and row["floor"] == compare.RUN_TO_RUN_FLOOR["triton"]
    # torch.compile's floor is its own: Inductor may pick another kernel per process
    assert rows.loc[("softmax", "M8192_N8192", "torch_compile"), "floor"] == compare.RUN_TO_RUN_FLOOR["compile"]


def test_orderings_across_runs_held_or_flipped(h200, tmp_path):
    rerun = _copy(h200, tmp_path, "h200-rerun")
    a = rundata.collect(h200)
    held = compare.orderings(a, rundata.collect(rerun))
    assert (
        set(held["ordering"]) <= {compare.HELD, compare.ORDER_UNRESOLVED} and (held["ordering"] == compare.HELD).any()
    )
    # triton_row 10x slower in the rerun: its ordering against torch flips
    _edit(
        rerun / CASE,
        lambda doc: [
            rec.update(samples_us=list(np.asarray(rec["samples_us"]) * 10), median_us=rec["median_us"] * 10)
            for rec in doc["implementations"]
            if rec["implementation"] == "triton_row"
        ],
    )
    order = compare.orderings(a, rundata.collect(rerun)).set_index(["shape", "triton", "baseline"])
    assert order.loc[("M8192_N8192", "triton_row", "torch"), "ordering"] == compare.FLIPPED


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("torch", "2.13.0+cu130", "different torch: 2.11.0+cu130 (A) vs 2.13.0+cu130 (B)"),
        ("triton", "3.7.1", "different triton"),
        ("driver", "590.1", "different driver"),
    ],
)
def test_different_software_is_not_comparable_and_says_which(h200, tmp_path, field, value, named):
    other = _copy(h200, tmp_path, "other-gpu")

    def change(env):
        env["gpu"]["name"] = "NVIDIA H100 80GB HBM3"  # another GPU too: a cross-GPU ranking
        if field == "driver":
            env["gpu"]["driver"] = value
        else:
            env[field] = value

    _edit(other / "environment.json", change)
    verdict = compare.build(h200, other, tmp_path / "out")
    assert verdict["kind"] == compare.NOT_COMPARABLE
    assert any(r.startswith(named) for r in verdict["reasons"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "NOT COMPARABLE" in md and "Supports: no statement comparing these runs." in md
    assert "is faster than" not in md and "is slower than" not in md


def test_other_gpu_same_software_gives_cross_gpu_verdicts(h200, tmp_path):
    other = _copy(h200, tmp_path, "nvidia-h100")
    _edit(other / "environment.json", lambda env: env["gpu"].update(name="NVIDIA H100 80GB HBM3"))

    def faster(doc):
        for rec in doc["implementations"]:
            if rec.get("samples_us"):
                rec["samples_us"] = list(np.asarray(rec["samples_us"]) * 0.8)
                rec["median_us"] *= 0.8

    _edit(other / CASE, faster)
    a, b = rundata.collect(h200), rundata.collect(other)
    assert compare.comparability(a, b)["kind"] == compare.CROSS_GPU
    rows = compare.compare_cases(a, b)
    case = rows[(rows["shape"] == "M8192_N8192") & (rows["verdict"] != compare.NOT_COMPARABLE)]
    assert (case["verdict"] == claims.FASTER).all()
    text = json.dumps(compare.document(a, b, compare.comparability(a, b), rows))
    assert (
        "fastest correct implementation (by event median) is triton_row on nvidia-h200 and triton_row on nvidia-h100"
        in text
    )


def test_interpreter_and_method_differences_are_refused(h200, tmp_path):
    other = _copy(h200, tmp_path, "labelled")
    _edit(other / "specs.json", lambda s: s.update(interpreter=True))
    assert any(
        "interpreter" in r for r in compare.comparability(rundata.collect(h200), rundata.collect(other))["reasons"]
    )
    other2 = _copy(h200, tmp_path, "warm-cache")
    _edit(other2 / "specs.json", lambda s: s["timing"].update(flush_l2=False))
    reasons = compare.comparability(rundata.collect(h200), rundata.collect(other2))["reasons"]
    assert reasons and reasons[0].startswith("different timing method (timing settings)")


def test_compare_cli_names_a_missing_run(tmp_path, h200):
    from kernelscope import cli

    with pytest.raises(SystemExit, match="nosuch/specs.json does not exist"):
        cli.main(["compare", "--a", str(h200), "--b", str(tmp_path / "nosuch"), "--out", str(tmp_path / "o")])


def test_a_damaged_file_of_the_copied_run_says_to_copy_it_again_and_of_this_run_how_to_rebuild(tmp_path, h200):
    # no rule of this checkout produces results/<other>/...: the rebuild command is for this run's files only
    from kernelscope import cli

    other = _copy(h200, tmp_path, "other-run")
    (other / CASE).write_text("{")
    argv = ["compare", "--a", str(h200), "--b", str(other), "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as err:
        cli.main(argv)
    msg = str(err.value)
    assert f"{other / CASE} is not valid JSON" in msg and f"copy {other}/ again from the machine that ran it" in msg
    assert "snakemake" not in msg
    mine = _copy(h200, tmp_path, "this-run")
    (mine / CASE).write_text("{")
    with pytest.raises(SystemExit, match=f"snakemake --cores 1 --force {mine / CASE}"):
        cli.main(["compare", "--a", str(mine), "--b", str(h200), "--out", str(tmp_path / "o2")])


def test_warm_cache_runs_are_labelled_in_their_own_report(h200, h200_md, tmp_path):
    warm = _copy(h200, tmp_path, "warm")
    _edit(warm / "specs.json", lambda s: s["timing"].update(flush_l2=False))
    for path in (warm / "timing").rglob("*.json"):
        _edit(
            path,
            lambda doc: (
                [r.update(l2_flushed=False) for r in doc["implementations"] if r.get("status") == "ok"]
                + [doc["settings"].update(flush_l2=False)]
            ),
        )
    report.build(warm, tmp_path / "out")
    md = _pages(tmp_path / "out")
    assert "WARM CACHE: L2 was not flushed" in md and "Cold-cache times for 30 cases timed with a warm L2" in md
    assert "Cold-cache times" not in h200_md and "WARM CACHE" not in h200_md  # the flushed run: no such label


def test_a_changed_kernel_module_is_a_code_change_in_a_rerun_and_not_compared_across_gpus(h200, tmp_path):
    changed = _copy(h200, tmp_path, "h200-new-code")

    def new_code(doc):
        doc["kernel_module_sha256"] = "f" * 64
        for rec in doc["implementations"]:
            if rec.get("samples_us") and rec["implementation"] == "triton_row":
                rec["samples_us"] = list(np.asarray(rec["samples_us"]) * 0.5)
                rec["median_us"] *= 0.5

    _edit(changed / CASE, new_code)
    a, b = rundata.collect(h200), rundata.collect(changed)
    rows = compare.compare_cases(a, b)
    case = rows[rows["shape"] == "M8192_N8192"]
    assert (case["kernel_source"] == "changed").all() and (
        rows[rows["shape"] != "M8192_N8192"]["kernel_source"] == "same"
    ).all()
    row = case[case["implementation"] == "triton_row"].iloc[0]
    assert row["verdict"] == claims.FASTER and row["why"].startswith("kernel module changed between the runs")
    text = json.dumps(compare.document(a, b, compare.comparability(a, b), rows))
    assert "triton_row: h200-new-code's code is faster than nvidia-h200" in text
    assert "GPU UUID (which card; environment record)" in text and "GPU-315cd002-e974-3bdd-c635-f8e7f15b6430" in text
    # torch in the same module: library code, compared as a plain rerun
    torch_row = case[case["implementation"] == "torch"].iloc[0]
    assert not str(torch_row["why"]).startswith("kernel module changed")
    # on another GPU the Triton variants of the changed module are not compared at all
    _edit(changed / "environment.json", lambda env: env["gpu"].update(name="NVIDIA H100 80GB HBM3"))
    cross = compare.compare_cases(rundata.collect(h200), rundata.collect(changed))
    variants = cross[(cross["shape"] == "M8192_N8192") & (cross["kind"] == "triton")]
    assert (variants["verdict"] == compare.NOT_COMPARABLE).all()
    assert variants["why"].str.contains("GPU and code would be confounded").all()


def test_a_measurement_carried_into_both_runs_is_not_a_reproduction(h200, tmp_path):
    # A resumed run keeps the finished cases of the run it resumed: comparing the two, those cases hold one
    # measurement, which agrees with itself trivially and must not count as reproduced.
    carried = _copy(h200, tmp_path, "h200-resumed", remeasured=False)
    _edit(carried / CASE, lambda doc: doc.update(created="2027-01-01T00:00:00+0000"))  # one case re-timed
    a, b = rundata.collect(h200), rundata.collect(carried)
    rows = compare.compare_cases(a, b)
    same = rows["reason"] == Reason.SAME_MEASUREMENT
    assert (rows.loc[same, "verdict"] == compare.NOT_COMPARABLE).all()
    assert set(rows.loc[~same & (rows["verdict"] != compare.NOT_COMPARABLE), "shape"]) == {"M8192_N8192"}
    timed_cases = {(c["kernel"], c["shape"], c["dtype"]) for c in a["cases"] if c["timing"]}
    assert len({tuple(r) for r in rows.loc[same, ["kernel", "shape", "dtype"]].to_numpy()}) == len(timed_cases) - 1
    text = json.dumps(compare.document(a, b, compare.comparability(a, b), rows), ensure_ascii=False)
    assert f"Any run-to-run statement on {len(timed_cases) - 1} cases" in text
    # pairs timed in both runs, less the carried ones and those one run has no timing of (no test at all)
    untimed = rows["reason"] == Reason.NO_TIMING_IN_RUN
    measured = int((~same & ~untimed).sum())
    assert f"of {measured} implementation × case pairs timed in both runs" in text


def test_a_run_resumed_on_another_card_says_which_cases_ran_on_which(h200, h200_md, tmp_path):
    resumed = _copy(h200, tmp_path, "other-card")
    _edit(resumed / CASE, lambda doc: doc["nvml"].update(uuid="GPU-00000000-other"))
    data = rundata.collect(resumed)
    run_card = data["environment"]["gpu"]["uuid"]
    assert rundata.case_cards(data) == {run_card: 29, "GPU-00000000-other": 1}
    report.build(resumed, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert f"Reading every case as measured on one card: the timings come from 29 cases on {run_card}" in md
    assert "1 cases on GPU-00000000-other" in md
    # one card: no such statement
    assert rundata.case_cards(rundata.collect(h200)) == {run_card: 30}
    assert "measured on one card" not in h200_md
    # the comparison with a run spanning two cards lists, per case, which card timed it in each run
    base = rundata.collect(h200)

    def titles(b):
        verdict = compare.comparability(base, b)
        doc = compare.document(base, b, verdict, compare.compare_cases(base, b, verdict["kind"]))
        return {s["title"]: s for s in doc["sections"]}

    spans = titles(data)["Which commit and card timed each case"]
    cells = json.dumps(spans["blocks"][1]["rows"], default=str)
    assert "GPU-00000000-other" in cells and run_card in cells
    assert "Which commit and card timed each case" not in titles(rundata.collect(h200))


def test_a_run_resumed_across_commits_says_which_cases_ran_at_which(h200, tmp_path):
    resumed = _copy(h200, tmp_path, "resumed")
    _edit(resumed / CASE, lambda doc: doc.update(git={"commit": "abc1234", "dirty": False}))
    data = rundata.collect(resumed)
    assert rundata.case_commits(data) == {"5f19e282a9573e1426891affdce91e59913d4661": 29, "abc1234": 1}
    report.build(resumed, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Reading every case as one commit's code: the timings come from 29 cases at 5f19e28" in md
    assert "1 cases at abc1234" in md
    # one commit: no such statement
    assert rundata.case_commits(rundata.collect(h200)) == {"5f19e282a9573e1426891affdce91e59913d4661": 30}
    # compared with the run it resumed, whose environment record has the same commit: the case commits decide
    a = rundata.collect(h200)
    text = json.dumps(
        compare.document(a, data, compare.comparability(a, data), compare.compare_cases(a, data)), ensure_ascii=False
    )
    assert "the runs' cases were timed at different commits (5f19e282a9573e1426891affdce91e59913d4661 vs " in text
    assert "abc1234 (1 cases)" in text


def test_capped_measurements_reapply_min_samples_to_old_records(h200):
    # The 5f19e28 records include naive-attention baselines that stopped at the time cap with fewer than
    # min_samples (100) samples but were written as "target reached"; the report counts them as capped.
    data = rundata.collect(h200)
    written_false = sum(
        1
        for c in data["cases"]
        if c["timing"]
        for r in c["timing"]["implementations"]
        if r.get("status") == "ok" and not r.get("target_reached")
    )
    short = sum(
        1
        for c in data["cases"]
        if c["timing"]
        for r in c["timing"]["implementations"]
        if r.get("status") == "ok" and r.get("target_reached") and r["n"] < 100
    )
    assert short == 3
    assert rundata.capped_measurements(data) == written_false + short


def test_a_report_describes_only_the_implementations_its_run_recorded(h200, tmp_path):
    # triton_split was added after 5f19e28: re-rendering that run must not list it as if it had run
    report.build(h200, tmp_path / "out")
    md = _pages(tmp_path / "out")
    assert "triton_online (triton):" in md and "triton_split" not in md


def test_targets_are_scored_and_budget_refusals_are_not_called_failures(h200, tmp_path):
    from kernelscope import scores

    data = rundata.collect(h200)
    tbl = rundata.tables(data)
    targets = scores.targets(data, tbl)
    # every scored row names its verdict from the CI, and attention's bf16 D=128 S>=4096 target is among them
    assert set(targets["verdict"]) <= {scores.MET, scores.MISSED, scores.NOT_RESOLVED}
    assert targets["target"].str.startswith("triton_flash ≥ 0.8× sdpa; bfloat16").any()
    met = targets[targets["verdict"] == scores.MET]
    assert (met["ci_low"] >= met["at_least"]).all()
    # the naive attention baselines decline S=8192 by their memory budget: declined, not "failed the gate"
    corr = tbl["correctness"]
    declined = corr[corr["declined"] == True]  # noqa: E712 - pandas element-wise comparison
    assert len(declined) and declined["outcome"].str.startswith("declined: materialises").all()
    said = claims.statements(data, tbl)["does_not_support"]
    assert any("declined by its own budget" in s for s in said)
    assert not any("failed" in s and "materialises" in s for s in said)


def test_every_failed_or_crashed_record_and_every_dead_control_is_refused_by_name(h200):
    """The report's 'does not support' list names each implementation that failed or crashed (each crash kind of
    kernelscope.faults), and each negative control that crashed or was accepted, with the case and the reason."""
    data = rundata.collect(h200)
    case = next(
        c
        for c in data["cases"]
        if c["correctness"]
        and len(c["correctness"]["implementations"]) >= 5
        and len(c["correctness"]["negative_controls"]) >= 2
    )
    where = f"{case['kernel']} {case['shape']} {case['dtype']}"
    impls = case["correctness"]["implementations"]
    kinds = ["fail", "error", "timeout", "oom", "compile_error"]
    for rec, status in zip(impls, kinds, strict=False):
        rec.update(status=status, failure=f"planted {status}")
    controls = case["correctness"]["negative_controls"]
    controls[0].update(rejected=False, status="oom", control_error="OutOfMemoryError: planted")
    controls[1].update(rejected=False, status="pass", control_error=None)
    said = claims.statements(data, rundata.tables(data))["does_not_support"]
    for rec, status in zip(impls, kinds, strict=False):
        outcome = "failed the gate" if status == "fail" else f"crashed ({status})"
        assert f"Any timing of {rec['implementation']} on {where}: it {outcome}: planted {status}." in said
    assert (
        f"The correctness verdicts for {where}: the negative control {controls[0]['implementation']} crashed "
        "(OutOfMemoryError: planted), so it did not test the tolerance there." in said
    )
    assert (
        f"The correctness verdicts for {where}: the negative control {controls[1]['implementation']} was "
        "accepted, so the gate is too loose there." in said
    )


def test_the_claims_table_carries_codes_that_agree_with_its_words(h200):
    """claims.csv: every row's verdict, basis and reason are codes; a resolved claim's effect is above its floor
    and an unresolved one's at or below it (for that reason); the graph-replay reason is in ``why`` only where
    the basis code says graph replay, and never in the table's note. (Planted: floor_rel taken from the A/A
    floor alone; the graph reason left in the note.)"""
    df = rundata.tables(rundata.collect(h200))["claims"]
    assert set(df["verdict"]) <= set(Verdict) and set(df["reason"]) <= set(Reason)
    assert set(df["basis_key"].dropna()) <= set(Basis)
    above, below = df[df["reason"] == Reason.ABOVE_FLOOR], df[df["reason"] == Reason.BELOW_FLOOR]
    assert len(above) and set(above["verdict"]) <= {Verdict.FASTER, Verdict.SLOWER}
    assert (above["effect_rel"] > above["floor_rel"]).all() and (below["effect_rel"] <= below["floor_rel"]).all()
    graph = df["basis_key"] == Basis.GRAPH
    assert graph.any() and df.loc[graph, "why"].str.endswith(claims.GRAPH_BASIS_REASON).all()
    assert not df["why"][~graph].str.contains(claims.GRAPH_BASIS_REASON, regex=False).any()
    assert not df["note"].str.contains(claims.GRAPH_BASIS_REASON, regex=False).any()
    assert df.loc[graph, "why_noted"].str.contains("; by graph replay¹", regex=False).all()


def test_a_pair_no_calibrated_floor_can_judge_is_not_counted_as_reproduced(tmp_path):
    """Two H100 runs of c148df8 in separate processes on one host (published with their raw results): where a
    difference passed both tests but no rerun calibration of this card gives the floor to judge it by, the pair
    could not be judged. It was counted as reproduced until session 22; now it is listed apart, and the count of
    reproduced pairs holds only those the test found inside the floor or not significant."""
    runs = {}
    for name, label in (("nvidia-h100-gluon-c148df8", "gluon4"), ("nvidia-h100-gluon-c148df8-rerun", "gluon5")):
        with tarfile.open(ROOT / "reports" / name / "raw-results.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
        runs[label] = rundata.collect(tmp_path / "results" / label)
    a, b = runs["gluon4"], runs["gluon5"]
    assert compare.comparability(a, b)["kind"] == compare.RERUN
    rows = compare.compare_cases(a, b)
    unjudged = rows[rows["reason"] == Reason.NO_RERUN_CALIBRATION]
    agreed = rows[rows["reason"].isin([Reason.BELOW_FLOOR, Reason.NOT_SIGNIFICANT])]
    assert len(unjudged) and len(agreed) and (unjudged["verdict"] == claims.UNRESOLVED).all()
    measured = len(rows) - int(rows["reason"].isin([Reason.SAME_MEASUREMENT, Reason.NO_TIMING_IN_RUN]).sum())
    text = json.dumps(compare.document(a, b, compare.comparability(a, b), rows), ensure_ascii=False)
    assert f"{len(agreed)} of {measured} implementation × case pairs timed in both runs" in text
    assert f"Whether {len(unjudged)} of {measured} implementation × case pairs reproduced" in text


def test_a_calibration_given_to_the_comparison_judges_the_pairs_run_a_had_none_for(tmp_path):
    """The same two H100 runs, compared with the H100 rerun calibration made after them (``--calibration``): pairs
    whose size class and kinds have 20 or more rerun differences are judged by it; the others stay unjudged, and
    the document names the record it used."""
    for name in ("nvidia-h100-gluon-c148df8", "nvidia-h100-gluon-c148df8-rerun"):
        with tarfile.open(ROOT / "reports" / name / "raw-results.tar.gz") as tar:
            tar.extractall(tmp_path, filter="data")
    record = ROOT / "calibration" / "nvidia-h100-80gb-hbm3.json"
    out = tmp_path / "out"
    compare.build(tmp_path / "results" / "gluon4", tmp_path / "results" / "gluon5", out, calibration=record)
    rows = pd.read_csv(out / "comparison.csv")
    plain = compare.compare_cases(
        rundata.collect(tmp_path / "results" / "gluon4"), rundata.collect(tmp_path / "results" / "gluon5")
    )
    unjudged = lambda df: int((df["reason"] == Reason.NO_RERUN_CALIBRATION).sum())  # noqa: E731
    assert unjudged(rows) < unjudged(plain)
    assert f"{record}, {len(reruns.load_record(record)['runs'])} runs" in (out / "report.md").read_text()
