"""The numbers a reader looks for first: each case's best Triton variant against each baseline (ratio with
its CI and the claim rules' verdict), and each declared performance target scored on the cases it covers.

A ratio's 95 % interval comes from the two medians' intervals (baseline low / Triton high to baseline high /
Triton low): conservative, and honest about both sides' spread. The primary baseline is timed twice in a case,
before the Triton variants (block A1) and after them (A2), so at the variants' time it lay anywhere between the
two: its interval is the union of both blocks' intervals, and a ratio that the baseline's own drift between
the blocks could move across a goal does not decide it. Where a record is launch-bound the ratio is taken from
CUDA-graph replay, as the claim rules do, and carries no interval.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kernelscope import claims
from kernelscope.records import declaration
from kernelscope.rundata import case_label

MET = "met"
MISSED = "missed"
NOT_RESOLVED = "not resolved"


def _num(x: Any) -> float | None:
    """A number, or None for a missing one (NaN, as pandas fills an absent column)."""
    return None if x is None or pd.isna(x) else float(x)


def _device_basis(rec: pd.Series) -> bool:
    return rec.get("basis") in ("device", "sustained")


def _basis_time(rec: pd.Series) -> tuple[float, float | None, float | None, str]:
    """Median and CI of the time the claim rules compare a record by."""
    if _device_basis(rec):
        return rec["basis_us"], rec["basis_ci95_low_us"], rec["basis_ci95_high_us"], f"{rec['basis']} time"
    if rec.get("launch_bound") and pd.notna(rec.get("graph_us")):
        return rec["graph_us"], None, None, "graph replay"
    return rec["median_us"], rec["ci95_low_us"], rec["ci95_high_us"], "event median"


def ratio(base: pd.Series, tri: pd.Series) -> dict[str, Any]:
    """Baseline time over Triton time (above 1: Triton is faster), on the basis the claim rules use."""
    if _device_basis(base) and _device_basis(tri):
        b, bl, bh, name = _basis_time(base)
        t, tl, th, _ = _basis_time(tri)
        if base["basis"] != tri["basis"]:  # one side measured under sustained load, the other not: both burst
            b, bl, bh = base["device_us"], _num(base.get("device_ci95_low_us")), _num(base.get("device_ci95_high_us"))
            t, tl, th = tri["device_us"], _num(tri.get("device_ci95_low_us")), _num(tri.get("device_ci95_high_us"))
            name = "device time"
        return {
            "speedup": b / t,
            "ci_low": bl / th if bl and th else None,
            "ci_high": bh / tl if bh and tl else None,
            "basis": name,
        }
    if bool(base.get("launch_bound")) or bool(tri.get("launch_bound")):
        if pd.isna(base.get("graph_us")) or pd.isna(tri.get("graph_us")):
            return {"speedup": None, "ci_low": None, "ci_high": None, "basis": "none (launch-bound, no graph)"}
        return {"speedup": base["graph_us"] / tri["graph_us"], "ci_low": None, "ci_high": None, "basis": "graph replay"}
    b, bl, bh, _ = _basis_time(base)
    t, tl, th, _ = _basis_time(tri)
    return {
        "speedup": b / t,
        "ci_low": bl / th if bl and th else None,
        "ci_high": bh / tl if bh and tl else None,
        "basis": "event median",
    }


_INTERVALS = (
    ("basis_ci95_low_us", "basis_ci95_high_us"),
    ("device_ci95_low_us", "device_ci95_high_us"),
    ("ci95_low_us", "ci95_high_us"),
)


def _case_rows(timing: pd.DataFrame, case: dict[str, Any], block_a2: bool = False) -> pd.DataFrame:
    """The case's valid records: the first timing of each implementation, or with ``block_a2`` the primary
    baseline's second (A2)."""
    if timing.empty:
        return timing
    rows = timing[
        (timing["kernel"] == case["kernel"])
        & (timing["shape"] == case["shape"])
        & (timing["dtype"] == case["dtype"])
        & ((timing["block"] == "A2") if block_a2 else (timing["block"] != "A2"))
    ]
    return rows[rows["status"] == "ok"]


def _across_blocks(base: pd.Series, again: pd.Series | None) -> tuple[pd.Series, str]:
    """The baseline record with each interval widened to hold its A2 block's, and a note naming both blocks'
    times where A2 lies outside A1's interval ("" where it does not, or there is no A2)."""
    if again is None:
        return base, ""
    out, widened = base.copy(), False
    for low, high in _INTERVALS:
        if low.startswith("basis") and base.get("basis") != again.get("basis"):
            continue
        if pd.notna(out.get(low)) and pd.notna(again.get(low)) and again[low] < out[low]:
            out[low], widened = again[low], True
        if pd.notna(out.get(high)) and pd.notna(again.get(high)) and again[high] > out[high]:
            out[high], widened = again[high], True
    if not widened:
        return out, ""
    first, second = _basis_time(base)[0], _basis_time(again)[0]
    return out, (
        f"{base['implementation']}'s interval spans its two blocks (A1 {first:.1f} µs, A2 {second:.1f} µs: "
        f"{abs(second / first - 1):.1%} apart)"
    )


def _second_block(timing: pd.DataFrame, case: dict[str, Any]) -> dict[str, pd.Series]:
    """The case's A2 records by implementation (the primary baseline's, where the timing stage took one)."""
    return {r["implementation"]: r for _, r in _case_rows(timing, case, block_a2=True).iterrows()}


def best_ratios(data: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per case and baseline: the fastest correct Triton variant (on the claim rules' basis) against
    that baseline, its ratio with CI and the claim rules' verdict for the pair."""
    timing, claim_df = tbl["timing"], tbl["claims"]
    out = []
    for case in data["cases"]:
        ok = _case_rows(timing, case)
        passed = claims.passed_gate(case["correctness"])
        ok = ok[ok["implementation"].isin(passed)] if not ok.empty else ok
        tri = ok[ok["kind"] == "triton"] if not ok.empty else ok
        if tri.empty:
            continue
        best = tri.loc[tri.apply(lambda r: _basis_time(r)[0], axis=1).idxmin()]
        again = _second_block(timing, case)
        for _, base in ok[ok["kind"] != "triton"].iterrows():
            claim = (
                claim_df[
                    (claim_df["kernel"] == case["kernel"])
                    & (claim_df["shape"] == case["shape"])
                    & (claim_df["dtype"] == case["dtype"])
                    & (claim_df["a"] == best["implementation"])
                    & (claim_df["b"] == base["implementation"])
                ]
                if not claim_df.empty
                else claim_df
            )
            out.append(
                {
                    "kernel": case["kernel"],
                    "case": f"{case['shape']} {case['dtype']}",
                    "shape": case["shape"],
                    "dtype": case["dtype"],
                    "baseline": base["implementation"],
                    "baseline_kind": base["kind"],
                    "primary": base["implementation"] == case["primary_baseline"],
                    "best_triton": best["implementation"],
                    **ratio(_across_blocks(base, again.get(base["implementation"]))[0], best),
                    "verdict": claim["verdict"].iloc[0] if len(claim) else "–",
                    "flagged_share": best.get("flagged_share"),
                    "pct_copy_bw": best.get("pct_copy_bw"),
                    "pct_matmul_peak": best.get("pct_matmul_peak"),
                }
            )
    return pd.DataFrame(
        out,
        columns=[
            "kernel",
            "case",
            "shape",
            "dtype",
            "baseline",
            "baseline_kind",
            "primary",
            "best_triton",
            "speedup",
            "ci_low",
            "ci_high",
            "basis",
            "verdict",
            "flagged_share",
            "pct_copy_bw",
            "pct_matmul_peak",
        ],
    )


def _verdict(value: float | None, low: float | None, high: float | None, at_least: float) -> str:
    if value is None or low is None or high is None:
        return NOT_RESOLVED
    if low >= at_least:
        return MET
    if high < at_least:
        return MISSED
    return NOT_RESOLVED


def targets(data: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each declared target on every case of the run it covers: met (the whole 95 % interval at or above the
    goal), missed (the whole interval below), or not resolved (the interval straddles it, or no valid time)."""
    timing = tbl["timing"]
    out = []
    for case in data["cases"]:
        declared = declaration(case).get("targets", [])
        if not declared:
            continue
        ok = _case_rows(timing, case)
        recs = {r["implementation"]: r for _, r in ok.iterrows()}
        again = _second_block(timing, case)
        nbytes = next(iter(recs.values()))["bytes_moved"] if recs else None
        passed = claims.passed_gate(case["correctness"])
        for target in declared:  # those that cover the case (kernelscope.spec.KernelSpec.declaration)
            if nbytes is None:
                continue  # an untimed case: the Does-not-support list names it
            gate = next(
                (
                    r
                    for r in (case["correctness"] or {}).get("implementations", [])
                    if r["implementation"] == target["variant"]
                ),
                {},
            )
            if gate.get("status") == "unsupported" and not gate.get("declined"):
                continue  # outside the variant's design: the target does not speak about it
            checked = {r["implementation"] for r in (case["correctness"] or {}).get("implementations", [])}
            if checked and not {target["variant"], target["baseline"] or target["variant"]} <= checked:
                continue  # the run's config did not select the variant (or its baseline): nothing to score
            row = {
                "kernel": case["kernel"],
                "target": target["label"],
                "case": case_label(case),
                "variant": target["variant"],
                "at_least": target["at_least"],
                "reason": target["reason"],
                "value": None,
                "ci_low": None,
                "ci_high": None,
                "note": "",
            }
            names = [target["variant"]] + ([target["baseline"]] if target["baseline"] else [])
            missing = [n for n in names if n not in recs or n not in passed]
            if missing:
                row.update(
                    verdict=NOT_RESOLVED,
                    note="; ".join(
                        claims.gate_status(case["correctness"], n) if n not in passed else f"{n} has no valid timing"
                        for n in missing
                    ),
                )
            elif target["metric"] == "speedup":
                base, spans = _across_blocks(recs[target["baseline"]], again.get(target["baseline"]))
                r = ratio(base, recs[target["variant"]])
                row.update(
                    value=r["speedup"],
                    ci_low=r["ci_low"],
                    ci_high=r["ci_high"],
                    verdict=_verdict(r["speedup"], r["ci_low"], r["ci_high"], target["at_least"]),
                    note="; ".join(filter(None, (f"basis: {r['basis']}", spans))),
                )
            else:
                rec = recs[target["variant"]]
                pct = rec.get("pct_copy_bw")
                if pd.isna(pct):
                    row.update(verdict=NOT_RESOLVED, note="no measured copy bandwidth in this run")
                elif rec.get("launch_bound") and not _device_basis(rec):
                    row.update(
                        value=pct, verdict=NOT_RESOLVED, note="launch-bound: the event median may hold launch gaps"
                    )
                else:
                    us, lo_us, hi_us, name = _basis_time(rec)  # pct_copy_bw is on this time already
                    low, high = pct * us / hi_us, pct * us / lo_us
                    row.update(
                        value=pct,
                        ci_low=low,
                        ci_high=high,
                        verdict=_verdict(pct, low, high, target["at_least"]),
                        note=name + (", launch-bound" if rec.get("launch_bound") else ""),
                    )
            out.append(row)
    return pd.DataFrame(
        out,
        columns=[
            "kernel",
            "target",
            "case",
            "variant",
            "at_least",
            "value",
            "ci_low",
            "ci_high",
            "verdict",
            "note",
            "reason",
        ],
    )
