"""The index of published runs (reports/index.{md,html}): it lists the runs published with their raw results and
the comparisons between them, never a run of this checkout, and a local run of the workflow writes no file that
git tracks (the quick start leaves the checkout clean)."""

import json
import shutil
import subprocess

import pytest

from kernelscope import index
from workflow_support import ROOT, copy_workflow, snakemake


def test_the_committed_index_is_the_published_runs_whatever_else_is_under_reports(tmp_path):
    reports = tmp_path / "reports"
    # what the index reads of each published run: its run.json, its comparisons' report.md and comparison.csv, its
    # raw results
    for run in sorted((ROOT / "reports").glob("*/run.json")):
        name = run.parent.name
        (reports / name).mkdir(parents=True)
        shutil.copy(run, reports / name / "run.json")
        assert (run.parent / index.PUBLISHED).is_file(), f"reports/{name} has no {index.PUBLISHED}"
        (reports / name / index.PUBLISHED).touch()
        for compared in run.parent.glob("compare/*/report.md"):
            (reports / name / "compare" / compared.parent.name).mkdir(parents=True)
            for kept in ("report.md", "comparison.csv"):
                if (compared.parent / kept).is_file():
                    shutil.copy(compared.parent / kept, reports / name / "compare" / compared.parent.name / kept)
    # beside them, a run of this checkout (make run) with a comparison against a published run
    local = reports / "cpu-interpreter"
    (local / "compare" / "nvidia-h200").mkdir(parents=True)
    doc = json.loads((ROOT / "reports" / "nvidia-h200" / "run.json").read_text())
    (local / "run.json").write_text(json.dumps({**doc, "device": "cpu-interpreter", "interpreter": True}))
    (local / "compare" / "nvidia-h200" / "report.md").write_text("# cpu-interpreter vs nvidia-h200\n\nNOT COMPARABLE\n")
    index.build(reports)
    for name in ("index.md", "index.html"):
        assert (reports / name).read_text() == (ROOT / "reports" / name).read_text(), name


@pytest.mark.workflow
def test_a_local_run_writes_no_file_that_git_tracks(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    work = copy_workflow(tmp_path)
    summary = snakemake(work, "--summary")
    assert summary.returncode == 0, summary.stderr[-3000:]
    written = [line.split("\t")[0] for line in summary.stdout.splitlines()[1:] if "\t" in line]
    assert "reports/cpu-interpreter/report.md" in written and len(written) > 100
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(written),
        capture_output=True,
        text=True,
    ).stdout.split()
    assert sorted(set(written) - set(ignored)) == []
