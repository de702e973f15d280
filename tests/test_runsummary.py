"""The run summary (``reports/<device>/run.json``, the report's run cost and the index's cases column) counts the
jobs of the plan the report describes only: ``results/<device>/`` also keeps what earlier runs, narrowed to other
kernels, computed there."""

import json
import tarfile

import pytest

from kernelscope import rundata, runsummary
from workflow_support import ROOT


def test_only_the_planned_cases_jobs_are_counted(tmp_path):
    with tarfile.open(ROOT / "reports" / "nvidia-h200" / "raw-results.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    results = tmp_path / "results" / "nvidia-h200"
    everything = runsummary.summarize(results)
    specs = json.loads((results / "specs.json").read_text())
    # the run this report describes was narrowed to softmax; the files of every other case stay from earlier runs
    specs["cases"] = [c for c in specs["cases"] if c["kernel"] == "softmax"]
    (results / "specs.json").write_text(json.dumps(specs))
    planned = len(specs["cases"])
    assert 0 < planned < everything["cases_planned"] == everything["cases_timed"]

    run = runsummary.summarize(results)
    assert run["cases_planned"] == run["cases_timed"] == planned
    for stage in ("correctness", "sweep", "timing", "profile"):
        assert run["stages"][stage]["jobs"] == planned, stage
    records = [
        json.loads((results / stage / c["kernel"] / c["dtype"] / f"{c['shape']}.json").read_text())
        for stage in ("correctness", "sweep", "timing", "profile")
        for c in specs["cases"]
    ] + [json.loads((results / "calibration.json").read_text())]
    assert run["wall_s"] == max(r["job_ended_at"] for r in records) - min(r["job_started_at"] for r in records)
    assert run["wall_s"] < everything["wall_s"]
    costs = rundata.collect(results)["job_costs"]
    assert set(costs["kernel"]) == {"softmax"} and len(costs) == 4 * planned
    assert run["stages"]["timing"]["job_wall_s"] == pytest.approx(costs.loc[costs["stage"] == "timing", "wall_s"].sum())
