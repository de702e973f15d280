"""The report's figures, written as SVG with matplotlib: speedup per case with CIs, the roofline, and the
spread of the sweep's launch configs. Each returns False (and writes nothing) when there is nothing to draw.

SVGs keep their text as text (smaller, searchable) and carry no date, so re-rendering unchanged data gives
unchanged files.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
import pandas as pd  # noqa: E402

from kernelscope import results  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "kernelscope", "font.size": 8})

#: one marker per implementation and one colour per kernel, so no two implementations share a symbol
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p", "d", "8", "H", "1", "2", "3", "4", "+"]
COLOURS = plt.get_cmap("tab10").colors


def _save(fig: Any, path: Path) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    with results.atomic(path) as tmp:
        fig.savefig(tmp, format="svg", metadata={"Date": None})
    plt.close(fig)
    return True


def speedup(ratios: pd.DataFrame, kernel: str, path: Path) -> bool:
    """Best Triton variant over each baseline, per case, with the ratio's CI (from both medians' CIs), on a
    log axis; 1 is parity."""
    rows = ratios[(ratios["kernel"] == kernel) & ratios["speedup"].notna()] if not ratios.empty else ratios
    if rows.empty:
        return False
    cases = list(dict.fromkeys(rows["case"]))
    baselines = list(dict.fromkeys(rows["baseline"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.32 * len(cases) * max(1, len(baselines)) ** 0.5))
    step = 0.6 / max(1, len(baselines))
    for i, (base, marker) in enumerate(zip(baselines, itertools.cycle(MARKERS))):
        sub = rows[rows["baseline"] == base]
        y = [cases.index(c) + (i - (len(baselines) - 1) / 2) * step for c in sub["case"]]
        low = (sub["speedup"] - sub["ci_low"]).clip(lower=0).fillna(0)
        high = (sub["ci_high"] - sub["speedup"]).clip(lower=0).fillna(0)
        ax.errorbar(
            sub["speedup"],
            y,
            xerr=[low, high],
            fmt=marker,
            color=COLOURS[i % len(COLOURS)],
            ms=5,
            capsize=2,
            lw=1,
            label=f"vs {base}",
        )
    ax.axvline(1.0, color="#555", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(range(len(cases)), cases)
    ax.invert_yaxis()
    ax.set_xlabel("speedup of the best Triton variant (baseline time / Triton time; > 1 is faster)")
    ax.set_title(f"{kernel}: best Triton variant per case against each baseline (95 % CI)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def roofline(timing: pd.DataFrame, calibration: dict[str, Any], title: str, path: Path) -> bool:
    """Arithmetic intensity against achieved throughput, the measured ceilings as the roof: colour is the
    kernel, marker the implementation, and each case's fastest point is labelled with its shape."""
    ok = timing[(timing["status"] == "ok") & (timing["block"] != "A2")] if "status" in timing else timing.iloc[0:0]
    ok = ok[ok["tflops"] > 0] if not ok.empty else ok
    if ok.empty:
        return False
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
    for (kernel, impl), grp in ok.groupby(["kernel", "implementation"]):
        ax.scatter(
            grp["intensity_flop_per_byte"],
            grp["tflops"],
            s=22,
            marker=MARKERS[impls.index(impl) % len(MARKERS)],
            color=COLOURS[kernels.index(kernel) % len(COLOURS)],
            alpha=0.85,
            linewidths=0.8,
        )
    for _, best in ok.loc[ok.groupby(["kernel", "shape", "dtype"])["tflops"].idxmax()].iterrows():
        ax.annotate(
            f"{best['shape']} {best['dtype'][:4]}",
            (best["intensity_flop_per_byte"], best["tflops"]),
            fontsize=5,
            xytext=(3, 2),
            textcoords="offset points",
            color="#333",
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
    ax.legend(
        handles=roofs + handles,
        fontsize=6,
        loc="upper left",
        ncol=2,
        title="colour: kernel · marker: implementation",
        title_fontsize=6,
    )
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


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
