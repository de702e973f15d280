"""The report's figures, written as SVG with matplotlib: the headline (every kernel's cases, best Triton
variant against the primary baseline), speedup per case with CIs, the roofline, and the spread of the sweep's
launch configs. Each returns False (and writes nothing) when there is nothing to draw.

SVGs keep their text as text (smaller, searchable) and carry no date, so re-rendering unchanged data gives
unchanged files. Points of the headline and the roofline carry an SVG ``<title>`` (a tooltip in a browser)
naming what they are; the roofline labels a point only where the label collides with no other label.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
import pandas as pd  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from kernelscope import results  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "kernelscope", "font.size": 8})

#: one marker per implementation and one colour per kernel, so no two implementations share a symbol
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p", "d", "8", "H", "1", "2", "3", "4", "+"]
COLOURS = plt.get_cmap("tab10").colors


def _save(fig: Any, path: Path, titles: dict[str, str] | None = None) -> bool:
    """Write ``fig`` as SVG; ``titles`` maps an artist's gid to the tooltip its group carries."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(path, with_titles(buf.getvalue(), titles or {}))
    return True


def with_titles(svg: str, titles: dict[str, str]) -> str:
    """Each ``<g id="gid">`` of ``titles`` given a ``<title>`` as its first child (SVG's tooltip)."""
    for gid, title in titles.items():
        opening = f'<g id="{gid}">'
        if svg.count(opening) != 1:
            raise ValueError(f"the figure has {svg.count(opening)} groups {opening!r}, expected one")
        svg = svg.replace(opening, f"{opening}<title>{escape(title)}</title>")
    return svg


#: colour of each claim verdict in the headline figure
VERDICT_COLOURS = {"faster": "#1a7f37", "slower": "#c0392b", "no difference resolved": "#7f7f7f"}
#: a point whose pair has no such verdict (not comparable, regime-dependent, no claim)
OTHER_COLOUR = "#b8860b"


#: minor ticks of the headline's log axis that carry a label
_MINOR = (0.5, 2, 3, 5, 20, 30, 50)


def headline_figure(rows: pd.DataFrame) -> tuple[Any, Any, dict[str, str]]:
    """Every case's speedup of the best Triton variant over the primary baseline (``rows``: kernel, case,
    speedup, ci_low, ci_high, basis, verdict, best_triton, baseline), cases grouped by kernel along x, a log
    y axis; the figure, its axes and the tooltip of each point (gid → text)."""
    kernels = list(dict.fromkeys(rows["kernel"]))
    fig, ax = plt.subplots(figsize=(11, 2.4))
    titles: dict[str, str] = {}
    x, centres = 0, []
    for k, kernel in enumerate(kernels):
        sub = rows[rows["kernel"] == kernel]
        start = x
        for _, r in sub.iterrows():
            colour = VERDICT_COLOURS.get(str(r["verdict"]), OTHER_COLOUR)
            gid = f"headline-{x}"
            has_ci = pd.notna(r["ci_low"]) and pd.notna(r["ci_high"])
            ci = f" [{r['ci_low']:.3g}–{r['ci_high']:.3g}]" if has_ci else ""
            titles[gid] = (
                f"{kernel} {r['case']}: {r['best_triton']} vs {r['baseline']} {r['speedup']:.3g}×{ci} "
                f"({r['basis']}; claim: {r['verdict']})"
            )
            if has_ci:
                ax.plot([x, x], [r["ci_low"], r["ci_high"]], color=colour, lw=1.2, alpha=0.8, gid=f"{gid}-ci")
                titles[f"{gid}-ci"] = titles[gid]
            ax.plot([x], [r["speedup"]], "o", color=colour, ms=4, gid=gid)
            x += 1
        centres.append((start + x - 1) / 2)
        if k < len(kernels) - 1:
            ax.axvline(x, color="#ccc", lw=0.8)
            x += 1
    ax.axhline(1.0, color="#555", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×" if v in _MINOR else ""))
    ax.set_xlim(-1, x)
    ax.set_xticks(centres, kernels)
    ax.tick_params(axis="x", length=0)
    ax.set_ylabel("baseline time / Triton time")
    ax.set_title(
        "best Triton variant vs the primary baseline, 95 % CI; above 1×: Triton faster",
        fontsize=8,
        loc="right",
    )
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(
        handles=[plt.Line2D([], [], ls="", marker="o", color=c, label=v) for v, c in VERDICT_COLOURS.items()]
        + [plt.Line2D([], [], ls="", marker="o", color=OTHER_COLOUR, label="other verdict")],
        fontsize=7,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=4,
        frameon=False,
    )
    fig.tight_layout()
    return fig, ax, titles


def headline(rows: pd.DataFrame, path: Path) -> bool:
    """The first page's figure (``headline_figure``) as SVG with a tooltip per point."""
    if rows.empty:
        return False
    fig, _, titles = headline_figure(rows)
    return _save(fig, path, titles)


def speedup(ratios: pd.DataFrame, kernel: str, path: Path) -> bool:
    """Best Triton variant over each baseline, per case, with the ratio's CI (from both medians' CIs), on a
    log axis; 1 is parity. Each point's tooltip names its case, baseline and ratio."""
    rows = ratios[(ratios["kernel"] == kernel) & ratios["speedup"].notna()] if not ratios.empty else ratios
    if rows.empty:
        return False
    cases = list(dict.fromkeys(rows["case"]))
    baselines = list(dict.fromkeys(rows["baseline"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.32 * len(cases) * max(1, len(baselines)) ** 0.5))
    step = 0.6 / max(1, len(baselines))
    titles: dict[str, str] = {}
    for i, (base, marker) in enumerate(zip(baselines, itertools.cycle(MARKERS))):
        sub = rows[rows["baseline"] == base]
        y = [cases.index(c) + (i - (len(baselines) - 1) / 2) * step for c in sub["case"]]
        low = (sub["speedup"] - sub["ci_low"]).clip(lower=0).fillna(0)
        high = (sub["ci_high"] - sub["speedup"]).clip(lower=0).fillna(0)
        for j, (_, r) in enumerate(sub.iterrows()):  # one artist per point, so each carries its tooltip
            gid = f"speedup-{len(titles)}"
            ci = f" [{r['ci_low']:.3g}–{r['ci_high']:.3g}]" if pd.notna(r["ci_low"]) and pd.notna(r["ci_high"]) else ""
            titles[gid] = f"{kernel} {r['case']}: {r['best_triton']} vs {base} {r['speedup']:.3g}×{ci} ({r['basis']})"
            drawn = ax.errorbar(
                [r["speedup"]],
                [y[j]],
                xerr=[[low.iloc[j]], [high.iloc[j]]],
                fmt=marker,
                color=COLOURS[i % len(COLOURS)],
                ms=5,
                capsize=2,
                lw=1,
                label=f"vs {base}" if j == 0 else None,
            )
            drawn.lines[0].set_gid(gid)  # the marker (errorbar would give its bars and caps the same id)
    ax.axvline(1.0, color="#555", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(range(len(cases)), cases)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of the best Triton variant (baseline time / Triton time; > 1 is faster)")
    ax.set_title(f"{kernel}: best Triton variant per case against each baseline (95 % CI)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, path, titles)


#: dtype names as roofline labels write them
SHORT_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}
#: where a roofline label may sit around its point (offset in points, alignment), tried in this order
LABEL_SPOTS = [
    ((4, 3), "left", "bottom"),
    ((4, -3), "left", "top"),
    ((-4, 3), "right", "bottom"),
    ((-4, -3), "right", "top"),
    ((0, 6), "center", "bottom"),
    ((0, -6), "center", "top"),
]


def place_labels(ax: Any, candidates: list[tuple[float, float, str, Any]], avoid: list[Any] = ()) -> list[Any]:
    """Greedy placement: each candidate (x, y, text, colour) in turn at the first of ``LABEL_SPOTS`` whose box
    lies inside the axes and overlaps no label already placed nor a box of ``avoid`` (display coordinates); a
    candidate with no such spot gets no label (its point keeps its tooltip). The figure's layout must be final.
    Returns the placed texts."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = list(avoid)
    placed = []
    for x, y, label, colour in candidates:
        for offset, ha, va in LABEL_SPOTS:
            t = ax.annotate(
                label, (x, y), xytext=offset, textcoords="offset points", fontsize=5.5, ha=ha, va=va, color=colour
            )
            box = t.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                placed.append(t)
                break
            t.remove()
    return placed


def roofline_figure(
    timing: pd.DataFrame, calibration: dict[str, Any], title: str
) -> tuple[Any, Any, dict[str, str], list[Any]] | None:
    """Arithmetic intensity against achieved throughput, the measured ceilings as the roof: colour is the
    kernel, marker the implementation; every point has a tooltip (gid → text) and each case's fastest point a
    label (its shape and dtype, in the kernel's colour) where it covers no other label, no point and not the
    legend. The figure, its axes, the tooltips and the placed labels; None when no record has a throughput."""
    ok = timing[(timing["status"] == "ok") & (timing["block"] != "A2")] if "status" in timing else timing.iloc[0:0]
    ok = ok[ok["tflops"] > 0] if not ok.empty else ok
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 6.5))
    copy = (calibration.get("copy") or {}).get("gbps")
    xs = [10 ** (i / 10) for i in range(-20, 41)]
    for name, entry in (calibration.get("matmul") or {}).items():
        if copy and entry.get("tflops"):
            ax.plot(
                xs,
                [min(copy * x / 1e3, entry["tflops"]) for x in xs],
                lw=1,
                ls="--",
                color="#888",
                label=f"roof: copy {copy:.0f} GB/s, {name} matmul {entry['tflops']:.0f} TFLOP/s",
            )
    kernels = sorted(ok["kernel"].unique())
    impls = sorted(ok["implementation"].unique())
    titles = {}
    for i, (_, rec) in enumerate(ok.iterrows()):
        gid = f"roofline-{i}"
        ax.plot(
            [rec["intensity_flop_per_byte"]],
            [rec["tflops"]],
            ls="",
            ms=4.5,
            marker=MARKERS[impls.index(rec["implementation"]) % len(MARKERS)],
            color=COLOURS[kernels.index(rec["kernel"]) % len(COLOURS)],
            alpha=0.85,
            gid=gid,
        )
        titles[gid] = (
            f"{rec['kernel']} {rec['shape']} {rec['dtype']} · {rec['implementation']}: {rec['tflops']:.3g} TFLOP/s "
            f"at {rec['intensity_flop_per_byte']:.3g} FLOP/B"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, minimal traffic)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title)
    handles = [
        plt.Line2D([], [], ls="", marker="o", color=COLOURS[i % len(COLOURS)], label=k) for i, k in enumerate(kernels)
    ]
    handles += [
        plt.Line2D([], [], ls="", marker=MARKERS[i % len(MARKERS)], color="#444", label=n) for i, n in enumerate(impls)
    ]
    roofs = ax.get_legend_handles_labels()[0]
    legend = ax.legend(
        handles=roofs + handles,
        fontsize=6,
        loc="upper left",
        ncol=2,
        title="colour: kernel · marker: implementation · hover a point for its name",
        title_fontsize=6,
    )
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    best = ok.loc[ok.groupby(["kernel", "shape", "dtype"])["tflops"].idxmax()]
    candidates = [
        (
            r["intensity_flop_per_byte"],
            r["tflops"],
            f"{r['shape']} {SHORT_DTYPES.get(r['dtype'], r['dtype'])}",
            COLOURS[kernels.index(r["kernel"]) % len(COLOURS)],
        )
        for _, r in best.sort_values("tflops", ascending=False).iterrows()
    ]
    # a label covers neither the legend nor any point (a marker's box: its size in pixels around its centre)
    half = 4.5 * fig.dpi / 72 / 2
    points = ax.transData.transform(ok[["intensity_flop_per_byte", "tflops"]].to_numpy(dtype=float))
    marks = [Bbox.from_extents(x - half, y - half, x + half, y + half) for x, y in points]
    labels = place_labels(ax, candidates, avoid=[legend.get_window_extent(fig.canvas.get_renderer()), *marks])
    return fig, ax, titles, labels


def roofline(timing: pd.DataFrame, calibration: dict[str, Any], title: str, path: Path) -> bool:
    """The roofline (``roofline_figure``) as SVG with a tooltip per point."""
    drawn = roofline_figure(timing, calibration, title)
    if drawn is None:
        return False
    fig, _, titles, _ = drawn
    return _save(fig, path, titles)


def sweep_spread(sweep: pd.DataFrame, kernel: str, path: Path) -> bool:
    """Every timed launch config per variant and case, as its time over the best config's (log axis): how
    much tuning matters, and where the hand-written default sits (ringed)."""
    rows = (
        sweep[(sweep["kernel"] == kernel) & (sweep["status"] == "ok") & sweep["median_us"].notna()]
        if not sweep.empty
        else sweep
    )
    if rows.empty:
        return False
    rows = rows.assign(case=rows["implementation"] + " · " + rows["shape"] + " " + rows["dtype"])
    rows = rows.assign(rel=rows["median_us"] / rows.groupby("case")["median_us"].transform("min"))
    cases = list(dict.fromkeys(rows["case"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.26 * len(cases)))
    y = [cases.index(c) for c in rows["case"]]
    ax.scatter(rows["rel"], y, s=10, color=COLOURS[0], alpha=0.6, label="config")
    default = rows[rows["is_default"] == True]  # noqa: E712 - pandas element-wise comparison
    ax.scatter(
        default["rel"],
        [cases.index(c) for c in default["case"]],
        s=40,
        facecolors="none",
        edgecolors=COLOURS[3],
        label="default config",
    )
    ax.set_xscale("log")
    ax.set_yticks(range(len(cases)), cases)
    ax.invert_yaxis()
    ax.set_xlabel("sweep median / best config's median")
    ax.set_title(f"{kernel}: spread of the launch-config sweep per variant and case")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return _save(fig, path)
