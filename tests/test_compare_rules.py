"""Run-against-run comparison rules on the recorded 5f19e28 H200 run, against a *remeasured* copy of it.

A copy with the very same samples proves little: every p-value is 1 and every difference 0, so a comparison
that ignored p, the A/A floors or the gate would still say "reproduced". Here the second run is the first
one's samples resampled with replacement (a stand-in for timing it again: same distributions, fresh noise), so
p-values and median differences are those of a real rerun; then single changes are planted into it: a slowdown
(10 % is found, 0.4 % is not), an A/A floor above the minimum effect on either side, a gate failure on either
side, and each environment or method field that must refuse the comparison outright.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from kernelscope import claims, compare, rundata, stats
from workflow_support import ROOT

CASE = Path("softmax") / "float16" / "M8192_N8192.json"


@pytest.fixture(scope="module")
def run_a(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200")
    with tarfile.open(ROOT / "reports" / "nvidia-h200-5f19e28" / "raw-results.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return root / "results" / "nvidia-h200"


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _resample(rec: dict, rng: np.random.Generator) -> None:
    x = rng.choice(np.asarray(rec["samples_us"]), size=len(rec["samples_us"]), replace=True)
    rec.update(samples_us=x.tolist(), median_us=float(np.median(x)))


def _remeasure(doc: dict, rng: np.random.Generator) -> None:
    doc["created"] = doc["created"].replace("2026", "2027")  # a second measurement, not a carried one
    for rec in doc["implementations"]:
        if rec.get("samples_us"):
            _resample(rec, rng)
        if (rec.get("graph") or {}).get("samples_us"):
            _resample(rec["graph"], rng)
    blocks = {r.get("block"): r for r in doc["implementations"] if r.get("block") in ("A1", "A2")}
    if all(b.get("samples_us") for b in blocks.values()) and len(blocks) == 2:
        doc["aa_floor"] = stats.aa_floor(blocks["A1"]["samples_us"], blocks["A2"]["samples_us"])


@pytest.fixture(scope="module")
def rerun_template(run_a, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("rerun") / "h200-rerun"
    shutil.copytree(run_a, dest)
    _edit(dest / "specs.json", lambda s: s.update(device="h200-rerun"))
    rng = np.random.default_rng(2026)
    for path in sorted((dest / "timing").rglob("*.json")):
        _edit(path, lambda doc: _remeasure(doc, rng))
    return dest


@pytest.fixture()
def rerun(rerun_template, tmp_path) -> Path:
    dest = tmp_path / "h200-rerun"
    shutil.copytree(rerun_template, dest)
    return dest


def _scale(impl: str, factor: float):
    def fn(doc):
        for rec in doc["implementations"]:
            if rec["implementation"] == impl and rec.get("samples_us"):
                rec["samples_us"] = list(np.asarray(rec["samples_us"]) * factor)
                rec["median_us"] *= factor

    return fn


def _rows(a: Path, b: Path):
    ca, cb = rundata.collect(a), rundata.collect(b)
    assert compare.comparability(ca, cb)["kind"] == compare.RERUN
    return compare.compare_cases(ca, cb).set_index(["kernel", "shape", "dtype", "implementation"])


ROW = ("softmax", "M8192_N8192", "float16")


def test_a_remeasured_run_reproduces(run_a, rerun):
    rows = _rows(run_a, rerun)
    timed = rows[rows["verdict"] != compare.NOT_COMPARABLE]
    assert len(timed) >= 70 and (timed["verdict"] == claims.UNRESOLVED).all(), timed[
        timed["verdict"] != claims.UNRESOLVED
    ]
    # a real second measurement, unlike an identical copy (p = 1 everywhere): the p-values spread over (0, 1)
    p = timed["why"].str.extract(r"^Mann-Whitney p = ([0-9.e-]+)")[0].astype(float)
    assert p.notna().all() and (p < 0.5).sum() >= 10 and (p < 1).all()
    # what is left out is left out with a reason: untimed, or launch-bound with no graph replay in these records
    untimed = rows[rows["verdict"] == compare.NOT_COMPARABLE]
    assert untimed["why"].str.match(r"no timing in|not comparable by device time").all()


def test_a_planted_10_percent_slowdown_is_found_and_0_4_percent_is_not(run_a, rerun):
    _edit(rerun / "timing" / CASE, _scale("triton_row", 1.10))
    _edit(rerun / "timing" / CASE, _scale("triton_online", 1.004))
    rows = _rows(run_a, rerun)
    row = rows.loc[(*ROW, "triton_row")]
    assert row["verdict"] == claims.SLOWER and row["b_time_over_a"] == pytest.approx(1.10, abs=0.01)
    assert rows.loc[(*ROW, "triton_online"), "verdict"] == claims.UNRESOLVED
    assert (rows.drop(index=(*ROW, "triton_row"))["verdict"] != claims.SLOWER).all()
    ca, cb = rundata.collect(run_a), rundata.collect(rerun)
    doc = json.dumps(compare.document(ca, cb, compare.comparability(ca, cb), compare.compare_cases(ca, cb)))
    assert "softmax M8192_N8192 float16 triton_row: h200-rerun is slower than nvidia-h200" in doc


@pytest.mark.parametrize("side", ["A", "B"])
def test_an_aa_floor_above_the_effect_in_either_run_refuses_it(run_a, rerun, tmp_path, side):
    _edit(rerun / "timing" / CASE, _scale("triton_row", 1.10))
    a = run_a
    if side == "A":
        a = tmp_path / "a"
        shutil.copytree(run_a, a)
    noisy = (a if side == "A" else rerun) / "timing" / CASE
    _edit(noisy, lambda doc: doc["aa_floor"].update(rel_diff=0.12))  # far above MIN_EFFECT and the slowdown
    row = _rows(a, rerun).loc[(*ROW, "triton_row")]
    assert row["verdict"] == claims.UNRESOLVED and "within the A/A noise floor / minimum effect 12.0%" in row["why"]
    _edit(noisy, lambda doc: doc["aa_floor"].update(rel_diff=0.08))  # above MIN_EFFECT, below the slowdown
    assert _rows(a, rerun).loc[(*ROW, "triton_row"), "verdict"] == claims.SLOWER


@pytest.mark.parametrize("side", ["A", "B"])
def test_a_gate_failure_in_either_run_gives_no_verdict(run_a, rerun, tmp_path, side):
    _edit(rerun / "timing" / CASE, _scale("triton_row", 1.10))  # a real slowdown that must not be reported
    a = run_a
    if side == "A":
        a = tmp_path / "a"
        shutil.copytree(run_a, a)

    def fail(doc):
        for rec in doc["implementations"]:
            if rec["implementation"] == "triton_row":
                rec.update(status="fail", ok=False, failure="seed 0: 3 elements outside atol=0 rtol=0")

    _edit((a if side == "A" else rerun) / "correctness" / CASE, fail)
    rows = _rows(a, rerun)
    row = rows.loc[(*ROW, "triton_row")]
    assert row["verdict"] == compare.NOT_COMPARABLE and row["why"] == "did not pass the correctness gate in both runs"
    # the other implementations of the case are still compared
    assert rows.loc[(*ROW, "torch"), "verdict"] == claims.UNRESOLVED


def test_a_gate_failure_changes_the_fastest_correct_implementation_across_gpus(run_a, rerun):
    _edit(rerun / "environment.json", lambda env: env["gpu"].update(name="NVIDIA H100 80GB HBM3"))
    _edit(
        rerun / "correctness" / CASE,
        lambda doc: [r.update(status="fail") for r in doc["implementations"] if r["implementation"] == "triton_row"],
    )
    ca, cb = rundata.collect(run_a), rundata.collect(rerun)
    verdict = compare.comparability(ca, cb)
    assert verdict["kind"] == compare.CROSS_GPU
    text = json.dumps(compare.document(ca, cb, verdict, compare.compare_cases(ca, cb, verdict["kind"])))
    assert (
        "softmax M8192_N8192 float16: fastest correct implementation (by event median) is triton_row on "
        "nvidia-h200 and triton_persistent on h200-rerun (different;"
    ) in text


def _set_env(key):
    def fn(env):
        if key == "driver":
            env["gpu"]["driver"] = "999.1"
        else:
            env[key] = {"backend": "rocm", "cuda_runtime": "12.8", "torch": "2.12.0+cu130", "triton": "3.7.1"}[key]

    return fn


# field -> (file to edit, edit, the one reason the comparison must give)
REFUSALS = {
    "backend": ("environment.json", _set_env("backend"), "different backend: cuda (A) vs rocm (B)"),
    "torch": ("environment.json", _set_env("torch"), "different torch: 2.11.0+cu130 (A) vs 2.12.0+cu130 (B)"),
    "triton": ("environment.json", _set_env("triton"), "different triton: 3.6.0 (A) vs 3.7.1 (B)"),
    "cuda_runtime": ("environment.json", _set_env("cuda_runtime"), "different cuda_runtime: 13.0 (A) vs 12.8 (B)"),
    "driver": ("environment.json", _set_env("driver"), "different driver: 580.159.04 (A) vs 999.1 (B)"),
    "interpreter": (
        "specs.json",
        lambda s: s.update(interpreter=True),
        "run B (h200-rerun) timed Triton's CPU interpreter, not a GPU",
    ),
    "timing settings": (
        "specs.json",
        lambda s: s["timing"].update(flush_l2=False),
        "different timing method (timing settings): ",
    ),
    "enqueue": (
        Path("timing") / CASE,
        lambda doc: [r.update(enqueue="per-sample-sync") for r in doc["implementations"]],
        "different timing method (enqueue): ['batched:10'] (A) vs ['batched:10', 'per-sample-sync'] (B)",
    ),
}


@pytest.mark.parametrize("field", list(REFUSALS))
def test_each_refusal_field_alone_makes_the_runs_not_comparable(run_a, rerun, tmp_path, field):
    path, fn, reason = REFUSALS[field]
    _edit(rerun / path, fn)
    ca, cb = rundata.collect(run_a), rundata.collect(rerun)
    verdict = compare.comparability(ca, cb)
    assert verdict["kind"] == compare.NOT_COMPARABLE
    assert len(verdict["reasons"]) == 1 and verdict["reasons"][0].startswith(reason), verdict["reasons"]
    compare.build(run_a, rerun, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Supports: no statement comparing these runs." in md and reason in md
    assert " is faster than " not in md and " is slower than " not in md


def test_the_comparison_names_the_floor_it_used():
    """A run with a rerun calibration is judged on device time by the calibrated floors, and the comparison
    says so (it once named only the per-kind constants, which no device-time pair used)."""
    from kernelscope import compare

    calibrated = compare._rerun_floor_sentence({"source": "calibration/x.json", "runs": {"a": {}, "b": {}}})
    assert "quadrature sum" in calibrated and "calibration/x.json, 2 runs" in calibrated
    assert "eager 4%" in calibrated  # still named, for the other bases
    plain = compare._rerun_floor_sentence(None)
    assert "calibration" not in plain and "eager 4%" in plain
