"""The report's shape (issue 22): a first page within its line budget that opens with the headline figure, a
page per kernel linked from it and back, a roofline whose labels never collide, and a tooltip on every point.

Planted bugs each test caught when it was written (then reverted):
- first_page_fits: the kernels' case sections left on the first page (over 5,000 lines);
- kernel pages linked both ways: the back link dropped from the kernel pages;
- headline values: the headline drawn against every baseline, not the primary one;
- labels never collide: the overlap check in ``plots.place_labels`` skipped; the points left out of what
  labels must avoid;
- tooltips: ``plots.with_titles`` given no titles; the kernel pages' speedup figure saved without its titles.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from kernelscope import firstpage, plots, report, rundata, scores
from workflow_support import archived_results

#: an archived run of the default configuration (85 cases, 6 kernels)
RUN = "nvidia-h200-6df3c14"
#: the synthetic change: every Triton record of this kernel twice as fast as measured, and given device time
#: (Triton's 0.6 of its event times, the baselines' 0.9): 3x on the claims' basis, 2x by event medians
FASTER_KERNEL = "vector_add"
DEVICE_SHARE = {"triton": 0.6, "eager": 0.9, "compile": 0.9}
SVG = "{http://www.w3.org/2000/svg}"


def _scale(rec: dict, factor: float) -> None:
    """Every time of a timing record (and of its bases) multiplied by ``factor``."""
    for key, value in rec.items():
        if isinstance(value, dict):
            _scale(value, factor)
        elif key.endswith("_us") and isinstance(value, list):
            rec[key] = [v * factor for v in value]
        elif key.endswith("_us") and isinstance(value, (int, float)) and not isinstance(value, bool):
            rec[key] = value * factor


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    """The archived run with the Triton variants of one kernel made twice as fast, and its rendered report."""
    root = tmp_path_factory.mktemp("pages")
    results = archived_results(RUN, root)
    for path in sorted((results / "timing" / FASTER_KERNEL).rglob("*.json")):
        doc = json.loads(path.read_text())
        for rec in doc["implementations"]:
            if rec["kind"] == "triton":
                _scale(rec, 0.5)
            if rec.get("status") == "ok":
                share = DEVICE_SHARE[rec["kind"]]
                rec["device"] = {
                    "status": "ok",
                    **{k: rec[k] for k in ("samples_us", "median_us", "ci95_low_us", "ci95_high_us")},
                }
                _scale(rec["device"], share)
        path.write_text(json.dumps(doc))
    report.build(results, root / "out")
    return results, root / "out"


def test_first_page_fits_the_line_budget_and_opens_with_the_headline(run):
    _, out = run
    md = (out / "report.md").read_text()
    assert len(md.splitlines()) <= 400
    answer = md.split('<a id="answer"></a>', 1)[1]
    assert answer.index("](plots/headline.svg)") < answer.index("| kernel | baseline |")
    assert "### " not in md  # no case section on the first page


def test_kernel_pages_exist_and_are_linked_both_ways(run):
    results, out = run
    kernels = {c["kernel"] for c in json.loads((results / "specs.json").read_text())["cases"]}
    assert len(kernels) == 6
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for kernel in kernels:
        page_md, page_html = out / "kernels" / f"{kernel}.md", out / "kernels" / f"{kernel}.html"
        assert f"](kernels/{kernel}.md)" in md and f'href="kernels/{kernel}.html"' in html, kernel
        assert "](../report.md)" in page_md.read_text() and 'href="../report.html"' in page_html.read_text(), kernel
        assert f"### {kernel} · " in page_md.read_text()  # its cases are there
    assert {p.stem for p in (out / "kernels").glob("*.md")} == kernels


def test_headline_values_are_the_claims_ratios(run):
    results, _ = run
    data = rundata.collect(results)
    tbl = rundata.tables(data)
    rows = firstpage.headline_rows(scores.best_ratios(data, tbl))
    fig, ax, titles = plots.headline_figure(rows)
    claims = tbl["claims"]
    primary = {(c["kernel"], c["shape"], c["dtype"]): c["primary_baseline"] for c in data["cases"] if c["timing"]}
    points = [line for line in ax.lines if re.fullmatch(r"headline-\d+", str(line.get_gid()))]
    assert len(points) == len(rows) > 80
    drawn = {}
    for line in points:
        kernel, shape, dtype = titles[line.get_gid()].split(":", 1)[0].split(" ")
        drawn[(kernel, shape, dtype)] = line.get_ydata()[0]
    for (kernel, shape, dtype), value in drawn.items():
        best = rows[(rows["kernel"] == kernel) & (rows["case"] == f"{shape} {dtype}")]["best_triton"].iloc[0]
        claim = claims[
            (claims["kernel"] == kernel)
            & (claims["shape"] == shape)
            & (claims["dtype"] == dtype)
            & (claims["a"] == best)
            & (claims["b"] == primary[(kernel, shape, dtype)])
        ]
        assert len(claim) == 1, (kernel, shape, dtype)
        # the figure divides the records' medians, the claims the medians of their samples: the two agree to
        # the recorded medians' float32 rounding (a few parts in 1e8 on this run)
        assert value == pytest.approx(claim["speedup"].iloc[0], rel=1e-6), (kernel, shape, dtype)
    # the synthetic change shows, on the device basis: 3x the measured ratios (0.72-1.01 on this run), where
    # event medians would give 2x (at most 2.02)
    planted = rows[rows["kernel"] == FASTER_KERNEL]
    assert len(planted) == 12 and set(planted["basis"]) == {"device time"}, planted["basis"]
    values = sorted(v for (k, _, _), v in drawn.items() if k == FASTER_KERNEL)
    assert all(2.1 < v < 3.1 for v in values), values
    plots.plt.close(fig)


def _bunched() -> pd.DataFrame:
    """60 memory-bound points within a factor of 2 of each other, the cluster that made labels unreadable."""
    rows = []
    for i in range(60):
        rows.append(
            {
                "kernel": f"k{i % 3}",
                "shape": f"M{1000 + i}_N{4096 + i}",
                "dtype": "float16",
                "implementation": f"impl{i % 4}",
                "status": "ok",
                "block": "B",
                "intensity_flop_per_byte": 0.5 + (i % 10) * 0.05,
                "tflops": 1.0 + (i // 10) * 0.1,
            }
        )
    return pd.DataFrame(rows)


CALIBRATION = {"copy": {"gbps": 4000.0}, "matmul": {"float16": {"tflops": 700.0}}}


def test_roofline_labels_never_collide(tmp_path):
    fig, ax, _, labels = plots.roofline_figure(_bunched(), CALIBRATION, "bunched")
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert [t for t in ax.texts] == labels  # what was not placed was removed
    for a, b in combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    assert 3 <= len(labels) < 60  # some labels fit, the cluster does not get all of them
    timing = _bunched()
    for x, y in ax.transData.transform(timing[["intensity_flop_per_byte", "tflops"]].to_numpy(dtype=float)):
        assert not any(b.contains(x, y) for b in boxes), (x, y)  # no label covers a point's centre
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    plots.plt.close(fig)


def _tooltips(svg: Path, prefix: str) -> dict[str, str]:
    groups = [g for g in ET.parse(svg).iter(f"{SVG}g") if re.fullmatch(prefix + r"-\d+", g.get("id", ""))]
    return {g.get("id"): (g.find(f"{SVG}title").text if g.find(f"{SVG}title") is not None else None) for g in groups}


def test_every_roofline_point_has_a_tooltip(tmp_path):
    timing = _bunched()
    assert plots.roofline(timing, CALIBRATION, "bunched", tmp_path / "roofline.svg")
    tips = _tooltips(tmp_path / "roofline.svg", "roofline")
    assert len(tips) == len(timing)
    names = {f"{r['kernel']} {r['shape']} {r['dtype']} · {r['implementation']}" for _, r in timing.iterrows()}
    assert {t.split(":", 1)[0] for t in tips.values() if t} == names


def test_every_headline_and_kernel_speedup_point_has_a_tooltip(run):
    _, out = run
    tips = _tooltips(out / "plots" / "headline.svg", "headline")
    assert len(tips) > 80 and all(tips.values())
    ratios = pd.read_csv(out / "tables" / "ratios.csv")
    for kernel, rows in ratios[ratios["speedup"].notna()].groupby("kernel"):
        per_kernel = _tooltips(out / "plots" / f"speedup-{kernel}.svg", "speedup")
        assert len(per_kernel) == len(rows) and all(per_kernel.values()), kernel
    html = (out / "report.html").read_text()
    assert html.count("<title>") - 1 >= len(tips)  # inline in the HTML (one more: the page's own)


def test_first_page_counts_orderings_by_topic_not_by_wording():
    """The first page folds the per-ordering supports into one count and the unresolved pairs into one line,
    choosing them by their topic (kernelscope.verdicts.Topic), whatever their words. Planted: matching the
    claims' sentences again (the reworded ordering below stayed listed), and the unresolved pairs not folded."""
    import pandas as pd

    from kernelscope import claims, firstpage
    from kernelscope.verdicts import Statement, Topic

    supports = [
        "The orderings below, on a GPU:",
        Statement("k S float16: reworded, t is faster than e.", Topic.ORDERING),
        Statement("k S float32: t is slower than e.", Topic.ORDERING),
        "Correctness of every passing implementation.",
    ]
    refusals = [
        Statement("Any timing of t on 1 case: unsupported.", Topic.UNTIMED_IMPLEMENTATION),
        Statement("An ordering of t and e for k S2 float16: within the floor.", Topic.UNRESOLVED_ORDERING),
        Statement("An ordering of t and e for k S3 float16: within the floor.", Topic.UNRESOLVED_ORDERING),
    ]
    claim_df = pd.DataFrame(
        [{"verdict": claims.FASTER, "sentence_noted": "x"}, {"verdict": claims.SLOWER, "sentence_noted": "y"}]
    )
    section = firstpage.supports_section(supports, refusals, claim_df)
    items = [i for b in section["blocks"] if b["type"] == "bullets" for i in b["items"]]
    assert "2 orderings (1 faster, 1 slower)" in items[1] and not any("reworded" in i for i in items)
    assert "Any timing of t on 1 case: unsupported." in items
    assert not any(i.startswith("An ordering of t and e") for i in items)
    assert any(i.startswith("An ordering of 2 pairs the claim rules did not resolve") for i in items)
