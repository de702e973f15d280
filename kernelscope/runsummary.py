"""The machine-readable summary of one run, ``reports/<device>/run.json``: what was planned and timed, at
which commits, on which cards, how long the run took and how long it held GPUs exclusively.

Everything comes from the per-case records (each job stores its start and end time, its card and its
GPU-lock sections, :mod:`kernelscope.gpus`) and Snakemake's per-job wall-time files (``jobtimes/``); nothing
is typed in. Only the cases of the plan the report describes (``specs.json``) count: ``results/<device>/`` also
keeps the files of cases that earlier runs, narrowed to other kernels, computed there.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelscope import results as results_io

#: per-case stages whose records carry a job header, in pipeline order
CASE_STAGES = ("correctness", "sweep", "timing", "profile", "ncu")


def _case_files(folder: Path, pattern: str, cases: Sequence[Mapping[str, Any]]) -> list[Path]:
    """The files ``folder/<kernel>/<dtype>/<shape>.<ext>`` (``pattern``) of ``cases``, in path order."""
    planned = {(c["kernel"], c["dtype"], c["shape"]) for c in cases}
    return [p for p in sorted(folder.glob(pattern)) if (*p.parts[-3:-1], p.stem) in planned]


def _records(results: Path, cases: Sequence[Mapping[str, Any]]) -> Iterable[tuple[str, dict[str, Any]]]:
    for name in ("calibration", "environment"):
        path = results / f"{name}.json"
        if path.is_file():
            yield name, results_io.load(path)
    for stage in CASE_STAGES:
        for path in _case_files(results / stage, "*/*/*.json", cases):
            yield stage, results_io.load(path)


#: where each per-case job's wall time is written (the rules' Snakemake ``benchmark:`` files); runs made before
#: the rename wrote them under ``benchmarks/``, which is still read
JOBTIMES = "jobtimes"
_LEGACY_JOBTIMES = "benchmarks"


def jobtimes_dir(results: Path) -> Path:
    """``results/<device>/jobtimes/``, or the ``benchmarks/`` directory of a run made before the rename."""
    current, legacy = Path(results) / JOBTIMES, Path(results) / _LEGACY_JOBTIMES
    return legacy if legacy.is_dir() and not current.is_dir() else current


def job_walls(results: Path, cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Wall time of every job of ``cases``, one row each (stage, kernel, dtype, shape, wall_s), from the files
    Snakemake's ``benchmark:`` directive writes (``results/<device>/jobtimes/<stage>/<kernel>/<dtype>/<shape>.tsv``)."""
    rows = []
    for path in _case_files(jobtimes_dir(results), "*/*/*/*.tsv", cases):
        lines = path.read_text().splitlines()
        if len(lines) >= 2:
            header, first = lines[0].split("\t"), lines[1].split("\t")
            if "s" in header:
                stage, kernel, dtype = path.parts[-4:-1]
                rows.append(
                    {
                        "stage": stage,
                        "kernel": kernel,
                        "dtype": dtype,
                        "shape": path.stem,
                        "wall_s": float(first[header.index("s")]),
                    }
                )
    return rows


def overlapping_exclusive_sections(sections: list[tuple[str, float, float]]) -> int:
    """Pairs of exclusive sections on one card that overlap in time (the lock promises none)."""
    count = 0
    by_card: dict[str, list[tuple[float, float]]] = {}
    for card, start, end in sections:
        by_card.setdefault(card, []).append((start, end))
    for spans in by_card.values():
        spans.sort()
        latest_end = float("-inf")
        for start, end in spans:
            count += start < latest_end
            latest_end = max(latest_end, end)
    return count


def summarize(results_dir: str | Path) -> dict[str, Any]:
    results = Path(results_dir)
    specs = results_io.load(results / "specs.json")
    env = results_io.load(results / "environment.json") if (results / "environment.json").is_file() else {}
    stages: dict[str, dict[str, Any]] = {}
    commits: set[str] = set()
    cards: set[str] = set()
    starts, ends = [], []
    exclusive_sections: list[tuple[str, float, float]] = []
    jobs_while_sampling: list[int] = []
    exclusive_by_case: dict[str, float] = {}
    timed = set()
    for stage, doc in _records(results, specs["cases"]):
        entry = stages.setdefault(stage, {"jobs": 0, "exclusive_s": 0.0, "shared_s": 0.0, "lock_wait_s": 0.0})
        entry["jobs"] += 1
        commit = (doc.get("git") or {}).get("commit")
        if commit and stage in CASE_STAGES:
            commits.add(commit)
        if doc.get("job_started_at") and doc.get("job_ended_at"):
            starts.append(doc["job_started_at"])
            ends.append(doc["job_ended_at"])
        gpu = doc.get("gpu") if isinstance(doc.get("gpu"), dict) and "sections" in (doc.get("gpu") or {}) else None
        if gpu:
            cards.add(gpu["uuid"])
            for key in ("exclusive_s", "shared_s", "lock_wait_s"):
                entry[key] += gpu[key]
            for s in gpu["sections"]:
                if s["mode"] == "exclusive":
                    exclusive_sections.append((gpu["uuid"], s["start"], s["end"]))
                    if stage == "timing" and s.get("jobs_on_host") is not None:
                        jobs_while_sampling.append(int(s["jobs_on_host"]))
        elif stage == "timing":
            card = (doc.get("nvml") or {}).get("uuid")
            if card:
                cards.add(card)
        if stage in ("sweep", "timing") and doc.get("kernel"):
            case = f"{doc['kernel']}/{doc['dtype']}/{doc['shape']}"
            exclusive_by_case[case] = exclusive_by_case.get(case, 0.0) + (gpu or {}).get("exclusive_s", 0.0)
            if stage == "timing":
                timed.add(case)
    walls: dict[str, list[float]] = {}
    for row in job_walls(results, specs["cases"]):
        walls.setdefault(row["stage"], []).append(row["wall_s"])
    for stage, stage_walls in walls.items():
        stages.setdefault(stage, {"jobs": len(stage_walls)})["job_wall_s"] = sum(stage_walls)
    per_case = [exclusive_by_case[c] for c in sorted(timed) if c in exclusive_by_case]
    return {
        "device": specs["device"],
        "interpreter": specs["interpreter"],
        "config_hash": specs["config_hash"],
        "torch": env.get("torch"),
        "triton": env.get("triton"),
        "cases_planned": len(specs["cases"]),
        "cases_timed": len(timed),
        "commits": sorted(commits),
        "gpus": sorted(cards),
        "wall_s": (max(ends) - min(starts)) if starts else None,
        "gpu_exclusive_s": sum(e - s for _, s, e in exclusive_sections),
        "exclusive_s_per_case_median": statistics.median(per_case) if per_case else None,
        "exclusive_overlaps": overlapping_exclusive_sections(exclusive_sections),
        "jobs_on_host_while_sampling": (
            {
                "min": min(jobs_while_sampling),
                "median": statistics.median(jobs_while_sampling),
                "max": max(jobs_while_sampling),
            }
            if jobs_while_sampling
            else None
        ),
        "stages": stages,
    }
