"""The published H200 report is exactly what the code renders from the committed raw results.

Every sentence of ``reports/nvidia-h200/report.md`` (and its HTML twin and tables) is re-rendered from
``reports/nvidia-h200/raw-results.tar.gz`` and compared byte for byte (the plots' SVG coordinates to 1e-4 px,
whose last digit differs between CPUs: ``_same_plot_text``), so any change to what the report says
(a claim rule, a refusal, a number, a layout) is a visible diff in review: either the code change is wrong, or
the committed report is re-rendered in the same change with

    tar -xzf reports/nvidia-h200/raw-results.tar.gz -C /tmp/h200
    python -m kernelscope report --results /tmp/h200/results/nvidia-h200 --out reports/nvidia-h200

The failure prints the unified diff of report.md, so the reviewer sees which published sentences moved.
"""

from __future__ import annotations

import difflib
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from kernelscope import cli
from workflow_support import ROOT

PUBLISHED = ROOT / "reports" / "nvidia-h200"


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


# matplotlib's SVG coordinates (6 decimals) and the clip-path ids hashed from them
_SVG_NUMBER = re.compile(r"-?\d+\.\d{5,}")
_CLIP_ID = re.compile(r"(?<=[\"#])p[0-9a-f]{10}\b")


def _same_plot_text(published: str, fresh: str) -> bool:
    """Equal but for the last digits of SVG coordinates: every other character the same, every coordinate within
    1e-4 px. A legend placed at x = 476.7840625 printed as ...062 on one CPU and ...063 on another (the
    arithmetic's last bit differs between numpy builds' SIMD paths), and the clip-path ids, hashes of such
    coordinates, change with it; nothing a reader sees does."""
    pub, new = _CLIP_ID.sub("p", published), _CLIP_ID.sub("p", fresh)
    if _SVG_NUMBER.split(pub) != _SVG_NUMBER.split(new):
        return False
    pairs = zip(_SVG_NUMBER.findall(pub), _SVG_NUMBER.findall(new), strict=False)
    return len(_SVG_NUMBER.findall(pub)) == len(_SVG_NUMBER.findall(new)) and all(
        abs(float(a) - float(b)) <= 1e-4 for a, b in pairs
    )


def _same_file(published: Path, fresh: Path) -> bool:
    if published.read_bytes() == fresh.read_bytes():
        return True
    # plots, and the kernel pages that embed them: the same text but for SVG coordinates' last digits
    return published.suffix in (".svg", ".html") and _same_plot_text(published.read_text(), fresh.read_text())


def test_every_other_rendered_file_is_the_published_one(rendered):
    # report.html, tables/*.csv, run.json: whatever the renderer writes is published (plots to their
    # coordinates' last digits, _same_plot_text); the roofline PNG is left out (its bytes depend on the
    # matplotlib build, and it states nothing the tables do not)
    files = sorted(
        str(p.relative_to(rendered))
        for p in rendered.rglob("*")
        if p.is_file() and p.suffix != ".png" and p.name != "report.md" and "compare" not in p.parts
    )
    assert "report.html" in files and "tables/claims.csv" in files
    missing = [f for f in files if not (PUBLISHED / f).is_file()]
    stale = [f for f in files if f not in missing and not _same_file(PUBLISHED / f, rendered / f)]
    assert not missing and not stale, f"not committed: {missing}; committed but differs from a fresh render: {stale}"


def test_plot_text_differs_only_in_coordinates_last_digits():
    svg = '<g clip-path="url(#pe325283983)"><text x="476.784062" y="233.074063">config</text></g>'
    assert _same_plot_text(svg, svg.replace("476.784062", "476.784063").replace("pe325283983", "p334be9b790"))
    assert not _same_plot_text(svg, svg.replace("476.784062", "476.794062"))  # a coordinate moved 0.01 px
    assert not _same_plot_text(svg, svg.replace("config", "configs"))  # the text changed
    assert not _same_plot_text(svg, svg.replace("476.784062", "476.784062 1.000000"))  # a number more


def test_the_fresh_render_escapes_kernel_names_and_is_a_gpu_report(rendered):
    """(Moved here from test_workflow, which rendered the same results a second time.)"""
    # what the byte comparison cannot judge: whether the committed report itself is right on these points
    html = (rendered / "kernels" / "softmax.html").read_text()  # the case tables are on the kernel's page
    md = (rendered / "report.md").read_text()
    # tables hold a shortened name (template arguments folded), the CSV the whole one
    assert "softmax_warp_forward&lt;…&gt;" in html and "softmax_warp_forward<" not in html
    assert "`void softmax_warp_forward<…>(…)`" in (rendered / "kernels" / "softmax.md").read_text()
    assert (
        "void (anonymous namespace)::softmax_warp_forward<c10::Half"
        in (rendered / "tables" / "profile.csv").read_text()
    )
    assert "NVIDIA H200" in md and "INTERPRETER RUN" not in md and "WARM CACHE" not in md
    # launch-bound pairs are not ranked by event medians (the statements are on the details page)
    assert "compared by CUDA-graph replay" in (rendered / "details.md").read_text()


def _results(name: str, dest: Path) -> Path:
    """Unpack reports/<name>/raw-results.tar.gz into ``dest``; its one results/<key> directory."""
    with tarfile.open(ROOT / "reports" / name / "raw-results.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    [results] = (dest / "results").iterdir()
    return results


def _same_bytes(published: Path, fresh: Path, files: list[str], what: str) -> None:
    """report.md as a readable diff first, then every other file byte for byte."""
    diff = _diff(published / "report.md", fresh / "report.md")
    if diff:
        pytest.fail(f"the committed {what} differs from a fresh render:\n" + diff, pytrace=False)
    stale = [f for f in files if (published / f).read_bytes() != (fresh / f).read_bytes()]
    assert not stale, f"committed but differs from a fresh render: {stale}"


@pytest.mark.parametrize(
    ("a", "b", "files", "says"),
    [
        # a rerun on another machine, on the device-time basis, so every rule of the comparison has pairs to judge
        (
            "nvidia-h200",
            "nvidia-h200-machine2",
            ["comparison.csv", "orderings.csv", "report.html", "report.md"],
            "reproduced: no difference resolved",
        ),
        # refused (fb2e875's default run against 092144d's session overlay: the timing settings differ): the
        # reasons, and a comparison.csv with its header only
        (
            "nvidia-h200-fb2e875",
            "nvidia-h200-092144d",
            ["comparison.csv", "report.html", "report.md"],
            "Does not support any ranking of A against B, because:",
        ),
    ],
    ids=["rerun", "refused"],
)
def test_the_published_comparisons_are_what_the_code_renders(tmp_path, a, b, files, says):
    """Every sentence and row of a published run-vs-run comparison, like the report's: a change to a comparison
    rule, a refusal, a floor or an ordering shows as a diff of committed files."""
    out = tmp_path / "out"
    run_a, run_b = _results(a, tmp_path / a), _results(b, tmp_path / b)
    # as scripts/publish-reports.sh renders it
    cli.main(["compare", "--a", str(run_a), "--b", str(run_b), "--out", str(out), "--label-a", a, "--label-b", b])
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == files
    _same_bytes(ROOT / "reports" / a / "compare" / b, out, files, "comparison")
    assert says in (out / "report.md").read_text()


def test_the_archived_resumed_run_is_what_the_code_renders(tmp_path):
    """An archived run resumed across commits and cards (092144d over 93b7ea7): the report's per-case commit and
    card statements, which a single-commit run never reaches."""
    archived = ROOT / "reports" / "nvidia-h200-092144d"
    out = tmp_path / "out"
    shutil.copytree(archived / "compare", out / "compare")
    cli.main(["report", "--results", str(_results(archived.name, tmp_path)), "--out", str(out)])
    files = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.suffix in (".csv", ".json", ".html")]
    assert "report.html" in files
    _same_bytes(archived, out, [f for f in files if "compare" not in f], "archived report")
    assert "(a run resumed across commits; each " in (out / "report.md").read_text()
