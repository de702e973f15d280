"""Facts read straight from a collected run's records (``rundata.collect``): which commit and card timed each
case, how many measurements stopped at a cap, the declaration each case was measured under, and the timing
settings the records were taken with.

Pure (no torch, no kernels) and below both ``rundata`` and ``claims`` in the import graph: the claims read these
facts, and ``rundata.tables`` reads the claims.
"""

from __future__ import annotations

from typing import Any


def declaration(case: dict[str, Any]) -> dict[str, Any]:
    """The kernel declaration a case was measured under, as its records carry it (``declaration``, written by
    every per-case stage through ``cli._case_header``; ``scripts/migrate-results.py`` adds it to archives
    written before). A case whose every stage failed to write a record has none: an empty declaration, so that
    the reading side shows what it has and names what is missing."""
    return case.get("declaration") or {}


def recorded_settings(data: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """The timing settings the records were measured with, each distinct set with its number of cases."""
    groups: list[tuple[dict[str, Any], int]] = []
    for case in data["cases"]:
        settings = (case["timing"] or {}).get("settings")
        if settings is None:
            continue
        for i, (known, n) in enumerate(groups):
            if known == settings:
                groups[i] = (known, n + 1)
                break
        else:
            groups.append((settings, 1))
    return groups


def timing_settings(data: dict[str, Any]) -> dict[str, Any]:
    """The resolved timing settings of the run: the first set the timing records were measured with, else the
    plan's (``specs.json``, resolved by ``kernelscope.cases.specs``)."""
    groups = recorded_settings(data)
    return groups[0][0] if groups else data["specs"]["timing"]


def case_commit(data: dict[str, Any], case: dict[str, Any]) -> str | None:
    """The commit whose code timed this case (``data`` is unused: every timing record carries its own)."""
    if not case["timing"]:
        return None
    return str((case["timing"].get("git") or {}).get("commit"))


def case_card(data: dict[str, Any], case: dict[str, Any]) -> str | None:
    """The card that timed this case (``data`` is unused: every timing record carries its own, None under the
    interpreter)."""
    if not case["timing"]:
        return None
    return str((case["timing"].get("nvml") or {}).get("uuid"))


def capped_measurements(data: dict[str, Any]) -> int:
    """Timed records that stopped at a cap without meeting the stopping rule. The rule is re-applied to the
    data with each job's own settings, because records written before timing.measure required min_samples
    at a cap (the H200 runs of 5f19e28 and 93b7ea7) could say "reached" with fewer samples than that."""
    count = 0
    for case in data["cases"]:
        doc = case["timing"] or {}
        min_samples = int((doc.get("settings") or {}).get("min_samples", 0))
        count += sum(
            1
            for r in doc.get("implementations", [])
            if r.get("status") == "ok" and (not r.get("target_reached") or r.get("n", 0) < min_samples)
        )
    return count


def _timed_cases_by(data: dict[str, Any], value) -> dict[str, int]:
    """Timed cases per ``value(data, case)``."""
    counts: dict[str, int] = {}
    for case in data["cases"]:
        if case["timing"]:
            key = value(data, case)
            counts[key] = counts.get(key, 0) + 1
    return counts


def case_commits(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per git commit of the job that timed them."""
    return _timed_cases_by(data, case_commit)


def case_cards(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per physical GPU (NVML UUID in each timing record). A resumed run can hold cases timed on
    different cards of one model."""
    return _timed_cases_by(data, case_card)


def launch_config(rec: dict[str, Any]) -> dict[str, Any]:
    """What an implementation's record ran at: a Triton variant's config (its sweep's choice), and for a
    ``torch.compile`` baseline the config Inductor chose for each of its kernels (``compiled_config``, tuned
    at the first call of each process). Two runs of one implementation at different launch configs ran two
    kernels, not one measured twice."""
    compiled = {f"inductor {k}": v for k, v in (rec.get("compiled_config") or {}).items()}
    return {**(rec.get("config") or {}), **compiled}


def code_hashes(a: dict[str, Any], b: dict[str, Any]) -> tuple[str | None, str | None]:
    """Two timing records' hashes of the kernel's code: of its module and every repository module it imports where
    both records carry that; records written before that field existed carry only the module's own hash."""
    for field in ("kernel_sources_sha256", "kernel_module_sha256"):
        if a.get(field) and b.get(field):
            return a[field], b[field]
    return None, None
