"""Loading a run: the per-case result files of ``results/<device>/`` into one dict (``collect``), and the
long-format tables every document and CSV is built from (``tables``). Shared by the report and the comparison.

Nothing here measures or re-derives a result: records are read as the stages wrote them, joined with the
kernel declarations' FLOP/byte models and the measured ceilings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import claims, registry, runsummary, wording
from kernelscope import results as results_io
from kernelscope.spec import DTYPES, Declined, Shape


def _load(path: Path) -> dict[str, Any] | None:
    """A result file checked against its schema (``kernelscope.results.load``), or None where it is absent."""
    return results_io.load(path) if path.is_file() else None


def collect(results: Path) -> dict[str, Any]:
    specs = _load(results / "specs.json")
    if specs is None:
        raise FileNotFoundError(f"{results}/specs.json is missing: run the workflow first")
    data = {
        "specs": specs,
        "environment": _load(results / "environment.json") or {},
        "calibration": _load(results / "calibration.json") or {},
        "reruns": _load(results / "reruns.json") or {"status": "none", "reason": "no reruns.json (an older run)"},
        "cases": [],
        "job_costs": _job_costs(results, specs["cases"]),
        "run": runsummary.summarize(results),
    }
    for case in specs["cases"]:
        rel = Path(case["kernel"]) / case["dtype"] / case["shape"]
        data["cases"].append(
            {
                **case,
                "correctness": _load(results / "correctness" / rel.with_suffix(".json")),
                "timing": _load(results / "timing" / rel.with_suffix(".json")),
                "profile": _load(results / "profile" / rel.with_suffix(".json")),
                "ncu": _load(results / "ncu" / rel.with_suffix(".json")),
                "sweeps": (_load(results / "sweep" / rel.with_suffix(".json")) or {}).get("variants", []),
            }
        )
        _mark_declined(data["cases"][-1])
    return data


def _mark_declined(case: dict[str, Any]) -> None:
    """Records written before correctness stored ``declined`` get it from the kernel's declaration: whether
    the implementation's ``supports`` reason for this case is a :class:`~kernelscope.spec.Declined` budget."""
    gate = case["correctness"] or {}
    pending = [r for r in gate.get("implementations", []) if r["status"] == "unsupported" and "declined" not in r]
    if not pending:
        return
    spec = registry.get(case["kernel"])
    shape = Shape(case["params"], case["reason"])
    for rec in pending:
        try:
            reason = spec.implementation(rec["implementation"]).unsupported_reason(shape, DTYPES[case["dtype"]])
        except KeyError:  # an implementation the module no longer declares
            reason = None
        rec["declined"] = isinstance(reason, Declined)


def _sub(rec: dict[str, Any], key: str, field: str) -> float | None:
    sub = rec.get(key) or {}
    return sub.get(field) if sub.get("status") == "ok" else None


def claim_basis(rec: dict[str, Any]) -> dict[str, Any]:
    """The time a record's claims use, with its CI: device time under sustained load where measured, else
    device time, else the event median (records without device time)."""
    for key in ("sustained", "device"):
        sub = rec.get(key) or {}
        if sub.get("status") == "ok":
            return {"basis": key, "us": sub["median_us"], "lo": sub["ci95_low_us"], "hi": sub["ci95_high_us"]}
    return {"basis": "event", "us": rec["median_us"], "lo": rec["ci95_low_us"], "hi": rec["ci95_high_us"]}


def rerun_record(data: dict[str, Any]) -> dict[str, Any] | None:
    """The run's rerun calibration record where it has one (``results/<device>/reruns.json``)."""
    rec = data.get("reruns") or {}
    return rec if rec.get("status") == "ok" else None


def status_text(rec: dict[str, Any]) -> str:
    """What happened to an implementation in the correctness gate, in words: passed, declined by its own
    budget, unsupported by design (why), failed the gate or crashed (how)."""
    status = rec.get("status")
    if status == "unsupported":
        return f"{'declined' if rec.get('declined') else 'unsupported'}: {rec.get('reason')}"
    if status == "fail":
        return f"failed the gate: {rec.get('failure')}"
    if status == "reference_error":  # kernelscope.correctness: the reference raised, nothing was judged
        return str(rec.get("failure"))
    if status in ("error", "timeout", "oom", "compile_error"):  # the last three: kernelscope.faults
        return f"crashed ({status}): {rec.get('failure')}"
    return str(status)


def reference_faults(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Kernel -> its cases whose fp64 reference raised (``correctness.reference_error``): nothing was checked
    or timed there."""
    faults: dict[str, list[dict[str, Any]]] = {}
    for case in data["cases"]:
        if (case["correctness"] or {}).get("reference_error"):
            faults.setdefault(case["kernel"], []).append(case)
    return faults


def case_label(case: dict[str, Any]) -> str:
    return f"{case['kernel']} {case['shape']} {case['dtype']}"


def case_commit(data: dict[str, Any], case: dict[str, Any]) -> str | None:
    """The commit whose code timed this case (the run's environment commit for records without one)."""
    if not case["timing"]:
        return None
    return str((case["timing"].get("git") or {}).get("commit") or (data["environment"].get("git") or {}).get("commit"))


def case_card(data: dict[str, Any], case: dict[str, Any]) -> str | None:
    """The card that timed this case (the run's environment card for records without one)."""
    if not case["timing"]:
        return None
    return str((case["timing"].get("nvml") or {}).get("uuid") or (data["environment"].get("gpu") or {}).get("uuid"))


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


def _timed_cases_by(data: dict[str, Any], record: str, env: str, field: str) -> dict[str, int]:
    """Timed cases per value of ``timing[record][field]``; records without it count under the run's
    ``environment[env][field]``."""
    run_value = (data["environment"].get(env) or {}).get(field)
    counts: dict[str, int] = {}
    for case in data["cases"]:
        if case["timing"]:
            value = str((case["timing"].get(record) or {}).get(field) or run_value)
            counts[value] = counts.get(value, 0) + 1
    return counts


def case_commits(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per git commit of the job that timed them (records from before the commit was stored per
    case count under the run's environment commit)."""
    return _timed_cases_by(data, "git", "git", "commit")


def case_cards(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per physical GPU (NVML UUID in each timing record; records without one count under the
    run's environment card). A resumed run can hold cases timed on different cards of one model."""
    return _timed_cases_by(data, "nvml", "gpu", "uuid")


def _job_costs(results: Path, cases: list[dict[str, Any]]) -> pd.DataFrame:
    """Wall time of every job of the planned cases (``runsummary.job_walls``), as a table."""
    return pd.DataFrame(runsummary.job_walls(results, cases), columns=["stage", "kernel", "dtype", "shape", "wall_s"])


def _ceilings(calibration: dict[str, Any], dtype: str) -> tuple[float | None, float | None]:
    copy = (calibration.get("copy") or {}).get("gbps")
    mm = ((calibration.get("matmul") or {}).get(dtype) or {}).get("tflops")
    return copy, mm


def tables(data: dict[str, Any]) -> dict[str, pd.DataFrame]:
    correctness_rows, timing_rows, sample_rows, sweep_rows, profile_rows, claim_rows = [], [], [], [], [], []
    for case in data["cases"]:
        key = {"kernel": case["kernel"], "shape": case["shape"], "dtype": case["dtype"]}
        spec = registry.get(case["kernel"])
        shape = Shape(case["params"], case["reason"])
        flops, nbytes = spec.flops(shape), spec.bytes_moved(shape, DTYPES[case["dtype"]])
        copy_gbps, mm_tflops = _ceilings(data["calibration"], case["dtype"])
        gate = case["correctness"] or {}
        for rec in gate.get("implementations", []) + gate.get("negative_controls", []):
            correctness_rows.append(
                {
                    **key,
                    "implementation": rec["implementation"],
                    "role": "negative control" if "rejected" in rec else rec["kind"],
                    "status": rec["status"],
                    "declined": rec.get("declined"),
                    "outcome": "rejected" if rec.get("rejected") else status_text(rec),
                    "rejected": rec.get("rejected"),
                    "control_error": rec.get("control_error"),
                    "max_abs_err": rec.get("max_abs_err"),
                    "max_rel_err": rec.get("max_rel_err"),
                    "rel_l2_err": rec.get("rel_l2_err"),
                    **{inv.name: rec.get(inv.name) for inv in spec.invariants},
                    "failure": rec.get("failure") or rec.get("reason"),
                }
            )
        doc = case["timing"] or {"implementations": []}
        for rec in doc["implementations"]:
            row = {
                **key,
                "commit": case_commit(data, case),
                "card": case_card(data, case),
                "implementation": rec["implementation"],
                "kind": rec.get("kind"),
                "block": rec.get("block", ""),
                "status": rec["status"],
                "reason": rec.get("reason"),
                "config": json.dumps(rec.get("config", {}), sort_keys=True),
            }
            if rec["status"] == "ok":
                basis = claim_basis(rec)
                med = basis["us"]  # throughput on the time the claims use
                gbps = nbytes / (med * 1e-6) / 1e9
                tflops = flops / (med * 1e-6) / 1e12
                clk = rec.get("clocks") or {}
                graph = rec.get("graph") or {}
                row.update(
                    {
                        "median_us": med,
                        "p20_us": rec["p20_us"],
                        "p80_us": rec["p80_us"],
                        "min_us": rec["min_us"],
                        "max_us": rec["max_us"],
                        "ci95_low_us": rec["ci95_low_us"],
                        "ci95_high_us": rec["ci95_high_us"],
                        "n": rec["n"],
                        "target_reached": rec["target_reached"],
                        "first_call_ms": rec.get("first_call_ms"),
                        "prepare_ms": rec.get("prepare_ms"),
                        "compile_ms": rec.get("compile_ms"),
                        "gbps": gbps,
                        "tflops": tflops,
                        "pct_copy_bw": 100 * gbps / copy_gbps if copy_gbps else None,
                        "pct_matmul_peak": 100 * tflops / mm_tflops if mm_tflops else None,
                        "bytes_moved": nbytes,
                        "intensity_flop_per_byte": flops / nbytes if nbytes else math.nan,
                        "graph_us": graph.get("median_us"),
                        "graph_status": graph.get("status"),
                        "graph_l2": graph.get("l2"),
                        "launch_bound": claims.launch_bound(rec),
                        "host_wall_us": rec.get("host_wall_us"),
                        "l2_flushed": rec.get("l2_flushed"),
                        "flagged": clk.get("n_flagged"),
                        "flagged_share": clk["n_flagged"] / rec["n"]
                        if clk.get("n_flagged") is not None and rec["n"]
                        else None,
                        "sm_mhz_min": clk.get("sm_mhz_min"),
                        "sm_mhz_max": clk.get("sm_mhz_max"),
                    }
                )
                if "device" in rec:  # records of runs before the device-time basis have none of these columns
                    row.update(
                        {
                            "basis": basis["basis"],
                            "basis_us": basis["us"],
                            "basis_ci95_low_us": basis["lo"],
                            "basis_ci95_high_us": basis["hi"],
                            "device_us": _sub(rec, "device", "median_us"),
                            "device_span_us": _sub(rec, "device", "span_median_us"),
                            "sustained_us": _sub(rec, "sustained", "median_us"),
                            "seed_method_us": _sub(rec, "seed_method", "median_us"),
                        }
                    )
                for i, s in enumerate(rec["samples_us"]):
                    flag = (clk.get("flags") or [""] * len(rec["samples_us"]))[i] if clk else ""
                    sm = (clk.get("sm_mhz") or [None] * len(rec["samples_us"]))[i] if clk.get("sm_mhz") else None
                    sample_rows.append(
                        {
                            **key,
                            "implementation": rec["implementation"],
                            "block": rec.get("block", ""),
                            "sample": i,
                            "us": s,
                            "sm_mhz": sm,
                            "flag": flag,
                        }
                    )
            timing_rows.append(row)
        if case["timing"]:
            for c in claims.case_claims(case["timing"], case["correctness"], rerun_record(data)):
                claim_rows.append(
                    {
                        **key,
                        **{
                            k: c.get(k)
                            for k in (
                                "a",
                                "b",
                                "verdict",
                                "basis_key",
                                "reason",
                                "effect_rel",
                                "rel_diff",
                                "mannwhitney_p",
                                "aa_floor_rel",
                                "median_a_us",
                                "median_b_us",
                                "basis",
                                "why",
                            )
                        },
                        "floor_rel": c.get("threshold_rel"),
                        "speedup": (c["median_b_us"] / c["median_a_us"] if c.get("median_a_us") else None),
                        # the views, rendered from the codes (kernelscope.wording); nothing reads them back
                        "why_noted": wording.why(c, "¹"),
                        "note": wording.note(c),
                        "sentence": wording.sentence(c),
                        "sentence_noted": wording.sentence(c, "¹"),
                    }
                )
        for sw in case["sweeps"]:
            for rec in sw.get("configs", []):
                sweep_rows.append(
                    {
                        **key,
                        "implementation": sw["implementation"],
                        "config": rec["key"],
                        "is_default": rec["is_default"],
                        "status": rec["status"],
                        "is_best": bool(sw.get("best")) and rec["key"] == sw["best"]["key"],
                        "first_call_ms": rec.get("first_call_ms"),
                        "median_us": rec.get("median_us"),
                        "reason": rec.get("reason"),
                    }
                )
        for rec in (case["profile"] or {}).get("implementations", []):
            for k in rec.get("kernels", []):
                profile_rows.append(
                    {
                        **key,
                        "implementation": rec["implementation"],
                        "cuda_kernel": k["name"],
                        "launches_per_call": k["launches_per_call"],
                        "device_us_per_call": k["device_us_per_call"],
                    }
                )
    return {
        "correctness": pd.DataFrame(correctness_rows),
        "timing": pd.DataFrame(timing_rows),
        "samples": pd.DataFrame(sample_rows),
        "sweep": pd.DataFrame(sweep_rows),
        "profile": pd.DataFrame(profile_rows),
        "claims": pd.DataFrame(claim_rows),
    }


def enqueue_modes(data: dict[str, Any]) -> set[str]:
    """How the run's timed samples were enqueued (``batched:<k>``, or ``per-sample-sync`` for older records)."""
    return {
        rec.get("enqueue", "per-sample-sync")
        for case in data["cases"]
        if case["timing"]
        for rec in case["timing"]["implementations"]
        if rec.get("status") == "ok"
    }
