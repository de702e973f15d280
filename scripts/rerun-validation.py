"""Out-of-sample check of a rerun calibration (docs/timing-basis.md): every run folder gets the calibration
record as its results/<run>/reruns.json, then kernelscope's own comparison runs for each pair named, and
the share of pairs reproduced (no difference above the floor), the share among pairs of 20 µs or less and
the orderings held / flipped / not resolved are printed, one line a pair.

    python scripts/rerun-validation.py CALIBRATION.json WORKDIR RUN_DIR... --pairs a:b c:d ...

RUN_DIRs are copied into WORKDIR (the originals are not touched); a pair names two runs by folder name.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ap = argparse.ArgumentParser()
ap.add_argument("calibration", type=Path)
ap.add_argument("workdir", type=Path)
ap.add_argument("runs", nargs="+", type=Path)
ap.add_argument("--pairs", nargs="+", required=True)
args = ap.parse_args()
args.workdir.mkdir(parents=True, exist_ok=True)
record = json.loads(args.calibration.read_text())
for run in args.runs:
    dest = args.workdir / run.name
    if not dest.exists():
        shutil.copytree(run, dest, symlinks=False)
    reruns = {"device": run.name, "status": "ok", "source": str(args.calibration), **record}
    (dest / "reruns.json").write_text(json.dumps(reruns))
for pair in args.pairs:
    a, b = pair.split(":")
    out = args.workdir / f"compare-{a}-{b}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelscope",
            "compare",
            "--a",
            str(args.workdir / a),
            "--b",
            str(args.workdir / b),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    if not (out / "orderings.csv").exists():
        print(f"{a} vs {b}: refused ({(out / 'report.md').read_text().splitlines()[2]})")
        continue
    rows = pd.read_csv(out / "comparison.csv")
    orderings = pd.read_csv(out / "orderings.csv")["ordering"].value_counts().to_dict()
    timed = rows[rows["verdict"] != "not comparable"]
    same = timed["verdict"] == "no difference resolved"
    short = timed[["a_us", "b_us"]].min(axis=1) <= 20
    print(
        f"{a} vs {b}: reproduced {same.sum()}/{len(timed)} ({same.mean():.1%}); 20 µs or less "
        f"{same[short].sum()}/{short.sum()}; orderings {orderings}"
    )
    for _, r in timed[~same].iterrows():
        print(
            f"    {r['kernel']} {r['shape']} {r['implementation']}: {r['a_us']:.2f} vs {r['b_us']:.2f} µs "
            f"(floor {r['floor']:.1%})"
        )
