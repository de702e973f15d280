"""Timing records whose samples fall in two modes, in one run's results folder, on every basis.

The test is ``kernelscope.stats.two_modes``, the one the report uses; its thresholds can be replaced here.
The split is at the largest gap between consecutive sorted samples that leaves at least ``--min-share`` of
them on each side. It counts where that gap is at least ``--min-gap`` of the median and ``--separation``
times the larger interquartile range of the two sides. For each such record the script prints both modes'
medians and the size of the upper one. Where the record keeps the SM clock per sample (device time,
sustained load), it also prints where the upper mode's samples sit in the series and each mode's mean clock.
Used in docs/timing-basis.md, section "The publication at f2fb297".

    python docs/experiments/two_modes.py results/nvidia-h200 [--min-share 0.1 --min-gap 0.05 --separation 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from kernelscope import stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run's results/<label>/ folder")
    ap.add_argument("--min-share", type=float, default=stats.TWO_MODES_MIN_SHARE)
    ap.add_argument("--min-gap", type=float, default=stats.TWO_MODES_MIN_GAP)
    ap.add_argument("--separation", type=float, default=stats.TWO_MODES_SEPARATION)
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
                modes = stats.two_modes(samples, args.min_share, args.min_gap, args.separation)
                if not modes:
                    continue
                block = f" {rec['block']}" if rec.get("block") else ""
                line = (
                    f"{basis:<9} {doc['kernel']} {doc['shape']} {doc['dtype']} {rec['implementation']}{block}:"
                    f" {modes['low_us']:.1f} / {modes['high_us']:.1f} us, {modes['upper']} of {modes['n']} in the"
                    " upper mode"
                )
                clocks = (sub.get("clocks") or {}).get("sm_mhz") if basis != "event" else None
                if clocks and len(clocks) == len(samples):
                    s, sm = np.asarray(samples, dtype=float), np.asarray(clocks, dtype=float)
                    upper = s >= np.sort(s)[len(s) - modes["upper"]]
                    where = np.flatnonzero(upper)
                    line += (
                        f"; upper mode at samples {where.min()}-{where.max()}, SM {sm[~upper].mean():.0f} /"
                        f" {sm[upper].mean():.0f} MHz"
                    )
                print(line)
    print("records looked at, per basis:", counts)


if __name__ == "__main__":
    main()
