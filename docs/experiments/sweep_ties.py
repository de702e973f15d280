"""How often two runs' sweeps choose the same config, under the sweep's rule (the fastest median) and under
tie rules that keep the module's default config unless another beats it by more than a margin.

Reads only the sweep records of two runs (results/<label>/sweep/<kernel>/<dtype>/<shape>.json), so it
measures what a rule would have chosen from the samples the runs took, not what the timing stage would then
have measured. Used in docs/timing-basis.md, section "The publication".

    python docs/experiments/sweep_ties.py results/nvidia-h200 results/nvidia-h200-machine2 \
        [--calibration calibration/nvidia-h200.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from kernelscope import reruns


def variants(run: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for path in sorted(run.glob("sweep/*/*/*.json")):
        doc = json.loads(path.read_text())
        for v in doc.get("variants", []):
            if any(c.get("status") == "ok" for c in v.get("configs", [])):
                out[(str(path.relative_to(run)), v["implementation"])] = v
    return out


def choose(variant: dict, margin) -> str:
    """The config key a rule picks: margin None = the fastest; a number = the default if within that
    fraction of the fastest; 'floor' = the default if within the calibrated Triton rerun floor."""
    ok = [c for c in variant["configs"] if c.get("status") == "ok"]
    best = min(ok, key=lambda c: c["median_us"])
    if margin is None:
        return best["key"]
    keep = [c for c in ok if c.get("is_default") and c["median_us"] <= best["median_us"] * (1 + margin(best))]
    return (keep[0] if keep else best)["key"]


def first_within(variant: dict, margin: float) -> str:
    """The first config in the module's declared order whose median is within ``margin`` of the fastest."""
    ok = [c for c in variant["configs"] if c.get("status") == "ok"]
    best = min(c["median_us"] for c in ok)
    return next(c for c in ok if c["median_us"] <= best * (1 + margin))["key"]


def same_config_reproducibility(va: dict, vb: dict) -> None:
    """How far one config's sweep median moved between the two runs, per size class of run a's median:
    the sweep's own resolution, which a tie margin should not undercut."""
    diffs: dict[str, list[float]] = {}
    for k in sorted(set(va) & set(vb)):
        a = {c["key"]: c["median_us"] for c in va[k]["configs"] if c.get("status") == "ok"}
        b = {c["key"]: c["median_us"] for c in vb[k]["configs"] if c.get("status") == "ok"}
        for key in sorted(set(a) & set(b)):
            diffs.setdefault(reruns.size_class(a[key]), []).append(abs(b[key] / a[key] - 1))
    for cls in sorted(diffs, key=lambda c: float(c.lstrip(">=").split("-")[0].split(" ")[0])):
        x = np.asarray(diffs[cls])
        spread = f"p50 {np.median(x):.2%} p95 {np.quantile(x, 0.95):.2%}"
        print(f"one config's sweep median, run b over run a, {cls:<12} n={len(x):<4} {spread}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--calibration", type=Path, default=Path("calibration/nvidia-h200.json"))
    args = ap.parse_args()
    cal = json.loads(args.calibration.read_text())
    p95 = {r["size_class"]: r["p95_rel"] for r in cal["summary"] if r["basis"] == "device" and r["kind"] == "triton"}
    rules = {
        "fastest (the sweep's rule)": None,
        "first declared within 3 %": "first-3",
        "default within 1 %": lambda best: 0.01,
        "default within 2 %": lambda best: 0.02,
        "default within 3 %": lambda best: 0.03,
        "default within 5 %": lambda best: 0.05,
        "default within the Triton rerun floor": lambda best: p95[reruns.size_class(best["median_us"])],
    }
    va, vb = variants(args.a), variants(args.b)
    same_config_reproducibility(va, vb)
    keys = sorted(set(va) & set(vb))
    print(f"{len(keys)} swept variant x case pairs in both runs")
    for name, margin in rules.items():
        pick = (lambda v: first_within(v, 0.03)) if margin == "first-3" else (lambda v, m=margin: choose(v, m))
        agree = sum(pick(va[k]) == pick(vb[k]) for k in keys)
        cost = []
        for runs in (va, vb):
            for k in keys:
                ok = {c["key"]: c["median_us"] for c in runs[k]["configs"] if c.get("status") == "ok"}
                cost.append(ok[pick(runs[k])] / min(ok.values()) - 1)
        print(
            f"{name:<40} same config in both runs: {agree} of {len(keys)}; chosen over fastest: "
            f"median {np.median(cost):.2%}, p95 {np.quantile(cost, 0.95):.2%}, max {max(cost):.2%}"
        )


if __name__ == "__main__":
    main()
