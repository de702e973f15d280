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

from kernelscope import claims, runsummary, wording
from kernelscope import results as results_io
from kernelscope.records import (  # noqa: F401 - rundata.case_commits etc., as the report and compare call them
    capped_measurements,
    case_card,
    case_cards,
    case_commit,
    case_commits,
    declaration,
)


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
        "reruns": _load(results / "reruns.json"),
        "cases": [],
        "job_costs": _job_costs(results, specs["cases"]),
        "run": runsummary.summarize(results),
    }
    for case in specs["cases"]:
        rel = Path(case["kernel"]) / case["dtype"] / case["shape"]
        docs = {stage: _load(results / stage / rel.with_suffix(".json")) for stage in results_io.PER_CASE}
        for stage, doc in docs.items():
            if doc is not None and "declaration" not in doc:
                raise results_io.CorruptResult(
                    results / stage / rel.with_suffix(".json"),
                    "has no declaration (written before the records carried the kernel declaration they were "
                    "measured under)",
                    f"migrate the folder once with `python scripts/migrate-results.py {results}` (where torch "
                    "is installed), then read it again",
                )
        data["cases"].append(
            {
                **case,
                "correctness": docs["correctness"],
                "timing": docs["timing"],
                "profile": docs["profile"],
                "ncu": docs["ncu"],
                "sweeps": (docs["sweep"] or {}).get("variants", []),
                # the declaration the case was measured under, from the first of its records that exists
                "declaration": next((d["declaration"] for d in docs.values() if d), None),
            }
        )
    return data


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


def _job_costs(results: Path, cases: list[dict[str, Any]]) -> pd.DataFrame:
    """Wall time of every job of the planned cases (``runsummary.job_walls``), as a table."""
    return pd.DataFrame(runsummary.job_walls(results, cases), columns=["stage", "kernel", "dtype", "shape", "wall_s"])


def _ceilings(calibration: dict[str, Any], dtype: str) -> tuple[float | None, float | None]:
    copy = (calibration.get("copy") or {}).get("gbps")
    mm = ((calibration.get("matmul") or {}).get(dtype) or {}).get("tflops")
    return copy, mm


def config_resources(rec: dict[str, Any]) -> dict[str, int | None]:
    """The most registers (a thread), local memory (bytes a thread: register spills) and shared memory (bytes a
    program) any of a swept config's kernels takes, as the driver reported them when it loaded them
    (``timing.kernel_resources``); None where the record has none (the interpreter, a config that failed)."""
    used = rec.get("kernels") or []
    return {
        field: max((k[field] for k in used if k.get(field) is not None), default=None)
        for field in ("registers", "local_bytes", "shared_bytes")
    }


def tables(data: dict[str, Any]) -> dict[str, pd.DataFrame]:
    correctness_rows, timing_rows, sample_rows, sweep_rows, profile_rows, claim_rows = [], [], [], [], [], []
    for case in data["cases"]:
        key = {"kernel": case["kernel"], "shape": case["shape"], "dtype": case["dtype"]}
        declared = declaration(case)
        flops, nbytes = declared.get("flops"), declared.get("bytes_moved")
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
                    **{inv["name"]: rec.get(inv["name"]) for inv in declared.get("invariants", [])},
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
                            "device_ci95_low_us": _sub(rec, "device", "ci95_low_us"),
                            "device_ci95_high_us": _sub(rec, "device", "ci95_high_us"),
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
                        **config_resources(rec),
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
    """How the run's timed samples were enqueued (``batched:<k>``, ``host`` under the interpreter,
    ``per-sample-sync`` for records from before batched enqueue)."""
    return {
        rec["enqueue"]
        for case in data["cases"]
        if case["timing"]
        for rec in case["timing"]["implementations"]
        if rec.get("status") == "ok"
    }
