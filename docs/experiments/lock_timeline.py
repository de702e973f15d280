"""Where a run's wall time goes on its card: the GPU-lock sections every per-case record keeps, laid on one
timeline.

Each per-case record (correctness, sweep, timing, profile, ncu) lists its job's lock sections (``gpu.sections``:
mode, what, start, end; kernelscope.gpus). On one card the exclusive sections never overlap, and no shared
section overlaps an exclusive one, so the run's wall splits into time held exclusively, time held shared only
(GPU work that tolerates company: correctness runs, first calls, profiles), and time the card was held by
nobody. The gaps between one exclusive section and the next are what a sampler waits for the shared holders
already on the card to leave. Reads a results folder (``results/<label>/`` or a report's unpacked
``raw-results.tar.gz``); needs numpy only:

    python docs/experiments/lock_timeline.py results/nvidia-h200

Used in docs/timing-basis.md, section "Where the wall time goes".
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

import numpy as np

STAGES = ("correctness", "sweep", "timing", "profile", "ncu")


def sections(results: Path) -> tuple[list[tuple[float, float, str, str, str]], list[tuple[float, float]]]:
    """The lock sections (start, end, mode, stage, what) and the jobs' (start, end)."""
    out, jobs = [], []
    docs = [(st, p) for st in STAGES for p in sorted((results / st).glob("*/*/*.json"))]
    docs += [("calibration", results / "calibration.json")] if (results / "calibration.json").is_file() else []
    for stage, path in docs:
        doc = json.loads(path.read_text())
        if doc.get("job_started_at"):
            jobs.append((doc["job_started_at"], doc["job_ended_at"]))
        for s in (doc.get("gpu") or {}).get("sections", []):
            what = " ".join(s.get("what", "").split()[:2]) if stage == "sweep" else s.get("what", "")
            out.append((s["start"], s["end"], s["mode"], stage, what))
    return out, jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--top", type=int, default=12, help="shared-section kinds to list")
    args = ap.parse_args()
    secs, jobs = sections(args.results)
    t0, t1 = min(s for s, _ in jobs), max(e for _, e in jobs)
    dt = 0.01
    grid = np.arange(t0, t1, dt)
    exclusive = np.zeros(grid.shape, bool)
    shared = np.zeros(grid.shape, int)
    for start, end, mode, _, _ in secs:
        inside = (grid >= start) & (grid < end)
        if mode == "exclusive":
            exclusive |= inside
        else:
            shared += inside
    held_shared = ~exclusive & (shared > 0)
    print(f"wall (first job start to last job end): {t1 - t0:.0f} s")
    print(f"held exclusively: {exclusive.sum() * dt:.0f} s; held shared only: {held_shared.sum() * dt:.0f} s; ")
    print(f"held by nobody: {(~exclusive & (shared == 0)).sum() * dt:.0f} s")
    jobs.sort()
    end, idle = jobs[0][1], 0.0  # the longest stretch with no job running: a resumed run's gap between calls
    for start, stop in jobs[1:]:
        idle, end = max(idle, start - end), max(end, stop)
    print(f"longest stretch with no job running: {idle:.0f} s")
    print(f"mean shared holders while held shared only: {shared[held_shared].mean():.2f}")
    ex = sorted((s, e, st) for s, e, m, st, _ in secs if m == "exclusive")
    gaps = [b[0] - a[1] for a, b in zip(ex, ex[1:])]
    print(
        f"exclusive sections: {len(ex)}; gaps between them: {sum(gaps):.0f} s, median {statistics.median(gaps):.2f} s"
    )
    for stage in STAGES:
        mine = [b[0] - a[1] for a, b in zip(ex, ex[1:]) if b[2] == stage]
        if mine:
            print(
                f"  before a {stage} section: {len(mine)} gaps, {sum(mine):.0f} s, "
                f"median {statistics.median(mine):.2f} s"
            )
    held = Counter()
    count = Counter()
    for start, end, mode, stage, what in secs:
        held[(stage, mode, what)] += end - start
        count[(stage, mode, what)] += 1
    print("section kinds by time held (summed; shared sections overlap one another):")
    for key, total in held.most_common(args.top):
        print(
            f"  {key[0]:12s} {key[1]:9s} {key[2][:40]:40s} {count[key]:4d} x, {total:6.1f} s, "
            f"{total / count[key]:.2f} s each"
        )


if __name__ == "__main__":
    main()
