"""What the GPU smoke scripts beside it share: one config's cases in a process of its own under a time limit, so
that a kernel that hangs (an mbarrier phase wrong) costs seconds and is named rather than stalling the caller."""

import json
import subprocess
import sys


def run_config(label: str, script: str, args: list[str], limit: float, timeout: float = 120) -> int:
    """Runs ``python -c script *args`` (which prints a JSON list of rows with ``max_abs_err`` and ``nan`` last) and
    prints one line per row, ok or FAIL against ``limit``; returns how many failed (a hang or a crash: one)."""
    try:
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{label}: TIMEOUT (hang?)", flush=True)
        return 1
    if done.returncode:
        print(f"{label}: ERROR {done.stderr.strip().splitlines()[-1:]}", flush=True)
        return 1
    failed = 0
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        bad = row["nan"] or not row["max_abs_err"] < limit or not row.get("arrived_reset", True)
        failed += bad
        print(f"{label} {row} {'FAIL' if bad else 'ok'}", flush=True)
    return failed
