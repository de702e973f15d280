"""Timing records whose samples fall in two modes, in one run's results folder: a first look, not a rule.

A sample set is split at the largest gap between consecutive sorted samples that leaves at least
``--min-share`` of the samples on each side. It counts as two modes where that gap is at least
``--min-gap`` of the median and at least ``--separation`` times the larger interquartile range of the two
sides. For each such record the script prints both modes' medians and the share in the upper one. For the
device basis it also prints where the upper mode's samples sit in the series and the mean SM clock of each
mode (the records keep the clocks per sample). Used in docs/timing-basis.md, section "The publication at
f2fb297".

    python docs/experiments/two_modes.py results/nvidia-h200 [--min-share 0.1 --min-gap 0.05 --separation 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def two_modes(samples, min_share: float, min_gap: float, separation: float) -> tuple[int, np.ndarray] | None:
    """(split index into the sorted samples, the sorted samples) where the set has two modes, else None."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    lo = max(1, int(np.ceil(min_share * n)))
    if n < 10 or n - lo <= lo:
        return None
    gaps = np.diff(x)[lo - 1 : n - lo]
    i = int(np.argmax(gaps)) + lo
    gap = x[i] - x[i - 1]
    iqr = max(float(np.subtract(*np.percentile(part, [75, 25]))) for part in (x[:i], x[i:]))
    if gap >= min_gap * float(np.median(x)) and gap >= separation * max(iqr, 1e-9):
        return i, x
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run's results/<label>/ folder")
    ap.add_argument("--min-share", type=float, default=0.1)
    ap.add_argument("--min-gap", type=float, default=0.05)
    ap.add_argument("--separation", type=float, default=3.0)
    args = ap.parse_args()
    counts: dict[str, int] = {}
    for path in sorted(args.run.glob("timing/*/*/*.json")):
        doc = json.loads(path.read_text())
        for rec in doc["implementations"]:
            bases = {"event": rec}
            bases.update({b: rec.get(b) or {} for b in ("device", "sustained")})
            for basis, sub in bases.items():
                samples = sub.get("samples_us")
                if not samples:
                    continue
                counts[basis] = counts.get(basis, 0) + 1
                found = two_modes(samples, args.min_share, args.min_gap, args.separation)
                if not found:
                    continue
                i, x = found
                block = f" {rec['block']}" if rec.get("block") else ""
                line = (
                    f"{basis:<9} {doc['kernel']} {doc['shape']} {doc['dtype']} {rec['implementation']}{block}:"
                    f" {np.median(x[:i]):.1f} / {np.median(x[i:]):.1f} us, {len(x) - i} of {len(x)} in the upper mode"
                )
                clocks = (sub.get("clocks") or {}).get("sm_mhz") if basis != "event" else None
                if clocks and len(clocks) == len(samples):
                    s, sm = np.asarray(samples, dtype=float), np.asarray(clocks, dtype=float)
                    upper = s >= x[i]
                    where = np.flatnonzero(upper)
                    line += (
                        f"; upper mode at samples {where.min()}-{where.max()}, SM {sm[~upper].mean():.0f} /"
                        f" {sm[upper].mean():.0f} MHz"
                    )
                print(line)
    print("records looked at, per basis:", counts)


if __name__ == "__main__":
    main()
