"""The published H200 report is exactly what the code renders from the committed raw results.

Every sentence of ``reports/nvidia-h200/report.md`` (and its HTML twin and tables) is re-rendered from
``reports/nvidia-h200/raw-results.tar.gz`` and compared byte for byte, so any change to what the report says
(a claim rule, a refusal, a number, a layout) is a visible diff in review: either the code change is wrong, or
the committed report is re-rendered in the same change with

    tar -xzf reports/nvidia-h200/raw-results.tar.gz -C /tmp/h200
    python -m kernelscope report --results /tmp/h200/results/nvidia-h200 --out reports/nvidia-h200

The failure prints the unified diff of report.md, so the reviewer sees which published sentences moved.
"""

from __future__ import annotations

import difflib
import shutil
import tarfile
from pathlib import Path

import pytest

from kernelscope import cli
from workflow_support import ROOT

PUBLISHED = ROOT / "reports" / "nvidia-h200"
# the published card-against-card comparison: a rerun, so every rule of the comparison has pairs to judge
COMPARED = "nvidia-h200-card2"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200-render")
    with tarfile.open(PUBLISHED / "raw-results.tar.gz") as tar:
        tar.extractall(root, filter="data")
    out = root / "out"
    # the published report links the comparisons beside it; a render next to the same ones lists them too
    shutil.copytree(PUBLISHED / "compare", out / "compare")
    cli.main(["report", "--results", str(root / "results" / "nvidia-h200"), "--out", str(out)])  # as documented
    return out


def _diff(published: Path, fresh: Path) -> str:
    return "".join(
        difflib.unified_diff(
            published.read_text().splitlines(keepends=True),
            fresh.read_text().splitlines(keepends=True),
            fromfile=f"committed {published.relative_to(ROOT)}",
            tofile="re-rendered",
        )
    )


def test_the_published_report_md_is_what_the_code_renders(rendered):
    diff = _diff(PUBLISHED / "report.md", rendered / "report.md")
    if diff:
        pytest.fail(
            "the committed H200 report differs from a fresh render (re-render it if the change is intended):\n" + diff,
            pytrace=False,
        )


def test_every_other_rendered_file_is_the_published_one(rendered):
    # report.html, tables/*.csv, run.json: whatever the renderer writes is published; the roofline PNG is left
    # out (its bytes depend on the matplotlib build, and it states nothing the tables do not)
    files = sorted(
        str(p.relative_to(rendered))
        for p in rendered.rglob("*")
        if p.is_file() and p.suffix != ".png" and p.name != "report.md" and "compare" not in p.parts
    )
    assert "report.html" in files and "tables/claims.csv" in files
    missing = [f for f in files if not (PUBLISHED / f).is_file()]
    stale = [f for f in files if f not in missing and (PUBLISHED / f).read_bytes() != (rendered / f).read_bytes()]
    assert not missing and not stale, f"not committed: {missing}; committed but differs from a fresh render: {stale}"


def test_the_fresh_render_escapes_kernel_names_and_is_a_gpu_report(rendered):
    """(Moved here from test_workflow, which rendered the same results a second time.)"""
    # what the byte comparison cannot judge: whether the committed report itself is right on these points
    html = (rendered / "report.html").read_text()
    md = (rendered / "report.md").read_text()
    # tables hold a shortened name (template arguments folded), the CSV the whole one
    assert "softmax_warp_forward&lt;…&gt;" in html and "softmax_warp_forward<" not in html
    assert "`void softmax_warp_forward<…>(…)`" in md
    assert (
        "void (anonymous namespace)::softmax_warp_forward<c10::Half"
        in (rendered / "tables" / "profile.csv").read_text()
    )
    assert "NVIDIA H200" in md and "INTERPRETER RUN" not in md and "WARM CACHE" not in md
    assert "compared by CUDA-graph replay" in md  # launch-bound pairs are not ranked by event medians


@pytest.fixture(scope="module")
def rendered_comparison(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h200-compare")
    for name in ("nvidia-h200", COMPARED):
        with tarfile.open(ROOT / "reports" / name / "raw-results.tar.gz") as tar:
            tar.extractall(root / name, filter="data")
    out = root / "out"
    # as scripts/publish-reports.sh renders it
    cli.main(
        [
            "compare",
            "--a",
            str(root / "nvidia-h200" / "results" / "nvidia-h200"),
            "--b",
            str(root / COMPARED / "results" / COMPARED),
            "--out",
            str(out),
            "--label-a",
            "nvidia-h200",
            "--label-b",
            COMPARED,
        ]
    )
    return out


def test_the_published_comparison_is_what_the_code_renders(rendered_comparison):
    """Every sentence and row of the published run-vs-run comparison, like the report's: a change to a
    comparison rule, a refusal, a floor or an ordering shows as a diff of committed files."""
    published = PUBLISHED / "compare" / COMPARED
    diff = _diff(published / "report.md", rendered_comparison / "report.md")
    if diff:
        pytest.fail("the committed comparison differs from a fresh render:\n" + diff, pytrace=False)
    files = sorted(p.name for p in rendered_comparison.iterdir() if p.is_file())
    assert files == ["comparison.csv", "orderings.csv", "report.html", "report.md"]
    stale = [f for f in files if (published / f).read_bytes() != (rendered_comparison / f).read_bytes()]
    assert not stale, f"committed but differs from a fresh render: {stale}"


# an archived run resumed across commits and cards (092144d over 93b7ea7): the report's per-case commit and card
# statements, which a single-commit run never reaches
ARCHIVED = ROOT / "reports" / "nvidia-h200-092144d"


def test_the_archived_resumed_run_is_what_the_code_renders(tmp_path):
    with tarfile.open(ARCHIVED / "raw-results.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    out = tmp_path / "out"
    shutil.copytree(ARCHIVED / "compare", out / "compare")
    cli.main(["report", "--results", str(tmp_path / "results" / "nvidia-h200"), "--out", str(out)])
    diff = _diff(ARCHIVED / "report.md", out / "report.md")
    if diff:
        pytest.fail("the archived report differs from a fresh render:\n" + diff, pytrace=False)
    assert "(a run resumed across commits; each " in (out / "report.md").read_text()
    files = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.suffix in (".csv", ".json", ".html")]
    stale = [f for f in files if "compare" not in f and (ARCHIVED / f).read_bytes() != (out / f).read_bytes()]
    assert "report.html" in files and not stale, stale


def test_the_published_refused_comparison_is_what_the_code_renders(tmp_path):
    """A refused comparison (fb2e875's default run against 092144d's session overlay: the timing settings
    differ) keeps its reasons and its empty comparison.csv, byte for byte."""
    a, b = "nvidia-h200-fb2e875", "nvidia-h200-092144d"
    for name in (a, b):
        with tarfile.open(ROOT / "reports" / name / "raw-results.tar.gz") as tar:
            tar.extractall(tmp_path / name, filter="data")
    out = tmp_path / "out"
    run = [str(tmp_path / name / "results" / "nvidia-h200") for name in (a, b)]
    cli.main(["compare", "--a", run[0], "--b", run[1], "--out", str(out), "--label-a", a, "--label-b", b])
    published = ROOT / "reports" / a / "compare" / b
    diff = _diff(published / "report.md", out / "report.md")
    if diff:
        pytest.fail("the committed refused comparison differs from a fresh render:\n" + diff, pytrace=False)
    assert "Does not support any ranking of A against B, because:" in (out / "report.md").read_text()
    files = sorted(p.name for p in out.iterdir() if p.is_file())
    assert files == ["comparison.csv", "report.html", "report.md"]
    assert all((published / f).read_bytes() == (out / f).read_bytes() for f in files)
