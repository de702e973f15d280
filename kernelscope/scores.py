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


# A ratio's basis -> the record columns of its median and that median's 95 % interval
_FIELDS = {
    "sustained time": ("basis_us", "basis_ci95_low_us", "basis_ci95_high_us"),
    "device time": ("device_us", "device_ci95_low_us", "device_ci95_high_us"),
    "event median": ("median_us", "ci95_low_us", "ci95_high_us"),
}


def _pair_basis(base: pd.Series, tri: pd.Series) -> str | None:
    """The basis the claim rules compare a pair on: sustained load where both sides were measured so, else device
    time where both have it, else graph replay where either side is launch-bound (None where one side has no
    graph), else the event median."""
    if _device_basis(base) and _device_basis(tri):
        return "sustained time" if base["basis"] == tri["basis"] == "sustained" else "device time"
    if bool(base.get("launch_bound")) or bool(tri.get("launch_bound")):
        return "graph replay" if pd.notna(base.get("graph_us")) and pd.notna(tri.get("graph_us")) else None
    return "event median"


def ratio(base: pd.Series, tri: pd.Series, again: pd.Series | None = None) -> dict[str, Any]:
    """Baseline time over Triton time (above 1: Triton is faster), on the basis the claim rules use, with its
    interval. ``again`` is the baseline's second block (A2): its interval on the same basis widens the baseline's,
    and ``blocks`` names both blocks' medians where it did ("" where A2 lies inside A1's interval, has no
    interval on this basis, or there is none). The point value stays A1's."""
    basis = _pair_basis(base, tri)
    if basis is None or basis == "graph replay":  # no interval: the graph's samples are not kept as one
        speedup = base["graph_us"] / tri["graph_us"] if basis else None
        name = basis or "none (launch-bound, no graph)"
        return {"speedup": speedup, "ci_low": None, "ci_high": None, "basis": name, "blocks": ""}
    med, low, high = _FIELDS[basis]
    b, bl, bh = base[med], _num(base.get(low)), _num(base.get(high))
    t, tl, th = tri[med], _num(tri.get(low)), _num(tri.get(high))
    blocks = ""
    if again is not None and (basis != "sustained time" or again.get("basis") == "sustained"):
        al, ah = _num(again.get(low)), _num(again.get(high))
        wider_low, wider_high = bool(bl and al and al < bl), bool(bh and ah and ah > bh)
        if wider_low or wider_high:
            bl, bh = (al if wider_low else bl), (ah if wider_high else bh)
            blocks = (
                f"{base['implementation']}'s interval spans its two blocks (A1 {b:.1f} µs, A2 {again[med]:.1f} µs: "
                f"{abs(again[med] / b - 1):.1%} apart)"
            )
    return {
        "speedup": b / t,
        "ci_low": bl / th if bl and th else None,
        "ci_high": bh / tl if bh and tl else None,
        "basis": basis,
        "blocks": blocks,
    }


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
                    **ratio(base, best, again.get(base["implementation"])),
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
                r = ratio(recs[target["baseline"]], recs[target["variant"]], again.get(target["baseline"]))
                row.update(
                    value=r["speedup"],
                    ci_low=r["ci_low"],
                    ci_high=r["ci_high"],
                    verdict=_verdict(r["speedup"], r["ci_low"], r["ci_high"], target["at_least"]),
                    note="; ".join(filter(None, (f"basis: {r['basis']}", r["blocks"]))),
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
