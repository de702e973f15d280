"""Two runs side by side: what their data supports comparing, and the comparisons it supports.

A run is one ``results/<device>/`` tree (a GPU, or a label given with ``--config device=...``). Whether two
runs can be compared at all is decided first, from their environment records and timing settings:

* **not comparable**: either run timed Triton's interpreter; or the software differs (torch, triton, CUDA
  runtime, driver: a "faster" could then be the software's); or the timing method differs (timing
  settings, L2 flushing, how samples were enqueued). The document then says why, field by field, and
  makes no statement about any case.
* **same GPU model, same software**: a rerun. Each implementation of each common case is tested run
  against run; a difference is reported only under the claim rules (Mann-Whitney p < ``claims.ALPHA``,
  above both runs' A/A floors and ``claims.MIN_EFFECT``); where the test finds none (inside the floor, or not
  significant) it reproduced, and where a difference passed both tests but no rerun calibration of the card says
  whether it exceeds run-to-run noise, the pair could not be judged and is listed apart (``verdicts.reproduced``).
* **different GPUs, same software**: a cross-GPU comparison, under the same rules, per implementation
  and case; and whether each run's fastest correct implementation of a case is the same one.

Only implementations that passed the correctness gate in both runs are compared, and a Triton variant
tuned to different configs in the two runs is compared as tuned, with both configs shown. Where a case's
kernel code differs between the runs (the sha256 of its module and of every repository module it imports,
in the timing records), a rerun's difference in a
Triton variant is a before/after of that code change, and says so; across GPUs such a variant is not
compared (GPU and code would be confounded). The module's torch baselines call the same library code
either way, so they are compared as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import claims, records, reruns, results, rundata, wording
from kernelscope.document import bullets, render, table, text
from kernelscope.fingerprint import fingerprint
from kernelscope.verdicts import RESOLVED, Reason, Verdict, reproduced

#: environment fields that must be equal for two runs' numbers to be ranked against each other
SOFTWARE = ("backend", "torch", "triton", "cuda_runtime", "driver")

NOT_COMPARABLE = "not comparable"
RERUN = "rerun (same GPU model, same software)"
CROSS_GPU = "cross-GPU (same software)"

#: Run-to-run floor per implementation kind, where no rerun calibration covers a pair: the smallest relative
#: difference between two runs' medians that is claimed, whatever the in-job A/A floors say. The in-job floor
#: sees one process on one card; a rerun adds another process, card and thermal state, and torch.compile can
#: autotune to another kernel in each process. Each floor sits just above the largest move that reruns of
#: unchanged code showed (the numbers: docs/comparing-runs.md, "The run-to-run floors without a calibration").
RUN_TO_RUN_FLOOR = {"eager": 0.04, "triton": 0.04, "compile": 0.15}

HELD, FLIPPED, ORDER_UNRESOLVED = "held", "flipped", "not resolved"


def _method(data: Mapping[str, Any]) -> dict[str, Any]:
    """What decides how a sample was taken: the timing settings and the enqueue modes actually used."""
    return {"timing settings": data["specs"]["timing"], "enqueue": sorted(rundata.enqueue_modes(data))}


def comparability(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The kind of comparison two collected runs (``rundata.collect``) support, and why not where they don't."""
    fa, fb = fingerprint(a["environment"]), fingerprint(b["environment"])
    reasons = []
    for name, data in (("A", a), ("B", b)):
        if data["specs"].get("interpreter"):
            reasons.append(f"run {name} ({data['specs']['device']}) timed Triton's CPU interpreter, not a GPU")
    for key in SOFTWARE:
        if fa.get(key) != fb.get(key):
            reasons.append(f"different {key}: {fa.get(key)} (A) vs {fb.get(key)} (B)")
    ma, mb = _method(a), _method(b)
    for key in ma:
        if ma[key] != mb[key]:
            reasons.append(f"different timing method ({key}): {ma[key]} (A) vs {mb[key]} (B)")
    if reasons:
        kind = NOT_COMPARABLE
    else:
        kind = RERUN if fa.get("gpu") == fb.get("gpu") else CROSS_GPU
    return {"kind": kind, "reasons": reasons, "fingerprint_a": fa, "fingerprint_b": fb}


def _cases(data: Mapping[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(c["kernel"], c["shape"], c["dtype"]): c for c in data["cases"]}


def _records(case: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each implementation's first timed block (A1 for the primary baseline)."""
    return {
        r["implementation"]: r for r in (case.get("timing") or {}).get("implementations", []) if r.get("block") != "A2"
    }


def _rerun_floor_sentence(calibration: Mapping[str, Any] | None) -> str:
    """Which run-to-run floor the statements below used: the rerun calibration's, on device time, where
    run A has one; the per-kind constants otherwise."""
    kinds = ", ".join(f"{k} {v:.0%}" for k, v in RUN_TO_RUN_FLOOR.items())
    per_kind = (
        f"the implementation's kind ({kinds}: the largest differences the published H200 reruns showed for "
        "unchanged code, kernelscope.compare)"
    )
    if not calibration:
        return f"The run-to-run floor is that of {per_kind}."
    source = calibration.get("source") or "run A's reruns.json"
    return (
        "On device time it is the quadrature sum of the rerun calibration's 95th percentiles for the pair's "
        f"size class and its two sides' kinds ({source}, {len(calibration.get('runs', {}))} runs; each "
        "statement names it); on the "
        f"other bases, and where the calibration has no such group of {reruns.MIN_OBSERVATIONS} or more differences"
        + (f" from {reruns.MIN_CASES} or more implementation-cases" if reruns.counts_cases(calibration) else "")
        + f", it is that of {per_kind}."
    )


def _floor(*docs: Mapping[str, Any]) -> float | None:
    floors = [(d.get("aa_floor") or {}).get("rel_diff") for d in docs]
    floors = [f for f in floors if f is not None]
    return max(floors) if floors else None


def _graph_floor(*docs: Mapping[str, Any]) -> float | None:
    floors = [f for f in (claims.graph_aa_floor(d) for d in docs) if f is not None]
    return max(floors) if floors else None


def _device_floors(*docs: Mapping[str, Any]) -> dict[str, float | None]:
    """Per device basis, the larger of the runs' A/A floors."""
    floors = [claims.device_aa_floors(d) for d in docs]
    return {k: max((f[k] for f in floors if f[k] is not None), default=None) for k in ("device", "sustained")}


def _same_measurement(ta: Mapping[str, Any], tb: Mapping[str, Any]) -> bool:
    """Both runs hold the very same timing record (a resumed run carried it over): not a second measurement."""
    medians = [[r.get("median_us") for r in t.get("implementations", [])] for t in (ta, tb)]
    return bool(ta.get("created")) and ta.get("created") == tb.get("created") and medians[0] == medians[1]


def _when(data: Mapping[str, Any]) -> str:
    """When a run timed its cases (its earliest timing record): orders two runs old → new."""
    return min((c["timing"].get("created") or "" for c in data["cases"] if c.get("timing")), default="")


def orderings(a: Mapping[str, Any], b: Mapping[str, Any]) -> pd.DataFrame:
    """Each Triton variant against each baseline, per case both runs timed: the claim rules' verdict in each
    run and whether the ordering held (the same verdict, resolved in both), flipped (opposite verdicts) or
    is not resolved (unresolved or not comparable in either run)."""
    rows = []
    cases_b = _cases(b)
    for key, ca in _cases(a).items():
        cb = cases_b.get(key)
        if not (cb and ca.get("timing") and cb.get("timing")):
            continue
        cal_a, cal_b = rundata.rerun_record(a), rundata.rerun_record(b)
        vb = {(c["a"], c["b"]): c["verdict"] for c in claims.case_claims(cb["timing"], cb.get("correctness"), cal_b)}
        for c in claims.case_claims(ca["timing"], ca.get("correctness"), cal_a):
            other = vb.get((c["a"], c["b"]))
            if other is None:
                continue
            resolved = {c["verdict"], other} <= set(RESOLVED)
            state = HELD if resolved and c["verdict"] == other else FLIPPED if resolved else ORDER_UNRESOLVED
            rows.append(
                {
                    "kernel": key[0],
                    "shape": key[1],
                    "dtype": key[2],
                    "triton": c["a"],
                    "baseline": c["b"],
                    "verdict_a": c["verdict"],
                    "verdict_b": other,
                    "ordering": state,
                }
            )
    return pd.DataFrame(
        rows, columns=["kernel", "shape", "dtype", "triton", "baseline", "verdict_a", "verdict_b", "ordering"]
    )


def _fastest(case: Mapping[str, Any]) -> str | None:
    ok = [
        r
        for name, r in _records(case).items()
        if r.get("status") == "ok" and name in claims.passed_gate(case.get("correctness"))
    ]
    return min(ok, key=lambda r: r["median_us"])["implementation"] if ok else None


#: the columns of comparison.csv: one row per implementation of every case both runs timed
CASE_COLUMNS = [
    "kernel",
    "shape",
    "dtype",
    "implementation",
    "a_us",
    "b_us",
    "b_time_over_a",
    "verdict",
    "basis",
    "floor",
    "kernel_source",
    "reason",
    "effect_rel",
    "mannwhitney_p",
    "why",
    "kind",
    "config_a",
    "config_b",
]


def compare_cases(a: Mapping[str, Any], b: Mapping[str, Any], kind: str | None = None) -> pd.DataFrame:
    """One row per implementation of every case both runs timed: B against A under the claim rules.
    ``kind``: the runs' ``comparability`` kind (worked out here when not given)."""
    kind = kind or comparability(a, b)["kind"]
    la, lb = a["specs"]["device"], b["specs"]["device"]
    rows = []
    cases_a, cases_b = _cases(a), _cases(b)
    for key in [k for k in cases_a if k in cases_b]:
        ca, cb = cases_a[key], cases_b[key]
        if not (ca.get("timing") and cb.get("timing")):
            continue
        ra, rb = _records(ca), _records(cb)
        passed = claims.passed_gate(ca.get("correctness")) & claims.passed_gate(cb.get("correctness"))
        floor = _floor(ca["timing"], cb["timing"])
        graph_floor = _graph_floor(ca["timing"], cb["timing"])
        sha_a, sha_b = records.code_hashes(ca["timing"], cb["timing"])
        code_changed = bool(sha_a and sha_b and sha_a != sha_b)
        for name in [n for n in ra if n in rb]:
            rec_a, rec_b = ra[name], rb[name]
            row = {
                "kernel": key[0],
                "shape": key[1],
                "dtype": key[2],
                "implementation": name,
                "a_us": rec_a.get("median_us"),
                "b_us": rec_b.get("median_us"),
                "config_a": records.launch_config(rec_a),
                "config_b": records.launch_config(rec_b),
                "kernel_source": "changed" if code_changed else "same",
                "kind": rec_b.get("kind") or rec_a.get("kind"),
            }
            untimed = [
                (run, rec.get("status"), rec.get("reason", ""))
                for run, rec in (("A", rec_a), ("B", rec_b))
                if rec.get("status") != "ok"
            ]
            claim = None
            if untimed:
                row.update(verdict=Verdict.NOT_COMPARABLE, reason=Reason.NO_TIMING_IN_RUN, untimed=untimed)
            elif _same_measurement(ca["timing"], cb["timing"]):
                row.update(
                    verdict=Verdict.NOT_COMPARABLE, reason=Reason.SAME_MEASUREMENT, created=ca["timing"]["created"]
                )
            elif name not in passed:
                row.update(verdict=Verdict.NOT_COMPARABLE, reason=Reason.GATE_NOT_BOTH)
            elif code_changed and kind == CROSS_GPU and row["kind"] == "triton":
                row.update(verdict=Verdict.NOT_COMPARABLE, reason=Reason.CODE_CONFOUNDED, sha_a=sha_a, sha_b=sha_b)
            else:
                # B's record as "a" of the claim: the verdict reads "B is faster / slower than A"
                rerun_floor = RUN_TO_RUN_FLOOR.get(row["kind"], max(RUN_TO_RUN_FLOOR.values()))
                row["floor"] = max(floor or 0.0, rerun_floor)
                claim = claims.compare(
                    rec_b,
                    rec_a,
                    row["floor"],
                    interpreter=False,
                    aa_graph_rel=max(graph_floor or 0.0, rerun_floor),
                    calibration=_pair_calibration(a),
                    aa_device=_device_floors(ca["timing"], cb["timing"]),
                )
                if claim.get("rerun_floor"):  # device time: the calibrated floor replaces the per-kind one
                    row["floor"] = max(claim["threshold_rel"], claim["rerun_floor"]["rel"])
                if claim.get("median_b_us"):  # the medians the verdict used (graph replay where that was the basis)
                    row.update(a_us=claim["median_b_us"], b_us=claim["median_a_us"])
                row.update(
                    verdict=claim["verdict"],
                    reason=claim["reason"],
                    effect_rel=claim.get("effect_rel"),
                    mannwhitney_p=claim.get("mannwhitney_p"),
                    basis=claim.get("basis"),
                    b_time_over_a=(claim["median_a_us"] / claim["median_b_us"] if claim.get("median_b_us") else None),
                )
            if code_changed and row["verdict"] != Verdict.NOT_COMPARABLE and row["kind"] == "triton":
                (_, old, sha_old), (_, new, sha_new) = sorted([(_when(a), la, sha_a), (_when(b), lb, sha_b)])
                row["code_change"] = (old, sha_old, new, sha_new)
            row["why"] = wording.comparison_why({**row, "labels": (la, lb)}, claim)
            rows.append(row)
    return pd.DataFrame(rows, columns=CASE_COLUMNS)


def _statements(kind: str, rows: pd.DataFrame, a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[str]]:
    la, lb = a["specs"]["device"], b["specs"]["device"]
    supports, refuses = [], []
    changed = rows[rows["verdict"].isin(RESOLVED)] if not rows.empty else rows
    if rows.empty:
        same = unjudged = rows
    else:
        agreed = [reproduced(v, r) for v, r in zip(rows["verdict"], rows["reason"], strict=True)]
        same = rows[agreed]
        unjudged = rows[(rows["verdict"] == Verdict.UNRESOLVED) & ~pd.Series(agreed, index=rows.index)]
    for _, r in changed.iterrows():
        # a changed module changes its Triton variants; its torch baselines call the same library code
        subject = f"{lb}'s code" if r["kernel_source"] == "changed" and r["kind"] == "triton" else lb
        supports.append(
            f"{r['kernel']} {r['shape']} {r['dtype']} {r['implementation']}: {subject} is {r['verdict']} "
            f"than {la}: {r['b_us']:.3f} µs vs {r['a_us']:.3f} µs ({r['why']})."
        )
    # timed in both runs and not one record carried into both: unsupported or untimed pairs are no test
    measured = rows[~rows["reason"].isin([Reason.SAME_MEASUREMENT, Reason.NO_TIMING_IN_RUN])] if len(rows) else rows
    if kind == RERUN and len(same):
        supports.append(
            f"{len(same)} of {len(measured)} implementation × case pairs timed in both runs "
            f"({len(same) / len(measured):.1%}) reproduced: no difference resolved between the two runs "
            "(within the floor: either run's A/A floor or the run-to-run floor, or not significant)."
        )
    if kind == RERUN and len(unjudged):
        # a difference that passed both tests where no calibrated floor says whether it exceeds run-to-run noise,
        # or too few samples: neither reproduced nor differed
        refuses.append(
            f"Whether {len(unjudged)} of {len(measured)} implementation × case pairs reproduced: they could not "
            "be judged ("
            + "; ".join(
                f"{r['kernel']} {r['shape']} {r['dtype']} {r['implementation']}: {r['why']}"
                for _, r in unjudged.iterrows()
            )
            + ")."
        )
    # the commits that timed the cases (a resumed run can hold several), not only the environment job's
    commits = [sorted(rundata.case_commits(dict(d))) for d in (a, b)]
    if commits[0] != commits[1]:
        refuses.append(
            f"Attributing a difference in a case whose kernel module did not change to the GPU or to "
            f"chance alone: the runs' cases were timed at different commits ({', '.join(commits[0])} vs "
            f"{', '.join(commits[1])}), so the measuring code may differ too."
        )
    elif len(same):
        refuses.extend(
            f"An ordering of {la} and {lb} for {r['kernel']} {r['shape']} {r['dtype']} "
            f"{r['implementation']}: {r['why']}."
            for _, r in same.iterrows()
        )
    if kind == CROSS_GPU:
        for key, ca in _cases(a).items():
            cb = _cases(b).get(key)
            if cb and ca.get("timing") and cb.get("timing"):
                fa, fb = _fastest(ca), _fastest(cb)
                note = "the same" if fa == fb else "different"
                supports.append(
                    f"{' '.join(key)}: fastest correct implementation (by event median) is {fa} on "
                    f"{la} and {fb} on {lb} ({note}; an ordering within a run needs its own report's "
                    "claims)."
                )
    if not rows.empty:
        carried = rows["reason"] == Reason.SAME_MEASUREMENT
        refuses.extend(
            f"{r['kernel']} {r['shape']} {r['dtype']} {r['implementation']}: {r['why']}."
            for _, r in rows[(rows["verdict"] == Verdict.NOT_COMPARABLE) & ~carried].iterrows()
        )
        if carried.any():
            cases = sorted({f"{r['kernel']} {r['shape']} {r['dtype']}" for _, r in rows[carried].iterrows()})
            refuses.append(
                f"Any run-to-run statement on {len(cases)} cases ({int(carried.sum())} implementation × "
                f"case pairs) that hold the same measurement in both runs (a resumed run carried them "
                f"over): {', '.join(cases)}."
            )
    only_a = sorted(set(_cases(a)) - set(_cases(b)))
    only_b = sorted(set(_cases(b)) - set(_cases(a)))
    if only_a or only_b:
        refuses.append(
            f"Cases planned in one run only (no comparison): {len(only_a)} only in {la}, {len(only_b)} only in {lb}."
        )
    refuses.append("Other shapes, dtypes, GPUs or software versions than those recorded for the two runs.")
    return {"supports": supports, "does_not_support": refuses}


def _cards(data: Mapping[str, Any]) -> str:
    return ", ".join(f"{card} ({n} cases)" for card, n in rundata.case_cards(dict(data)).items())


def _case_provenance(a: Mapping[str, Any], b: Mapping[str, Any]) -> pd.DataFrame:
    """Per common timed case, the commit and card of each run, where either run spans several of them."""
    la, lb = a["specs"]["device"], b["specs"]["device"]
    spanning = any(len(rundata.case_commits(dict(d))) > 1 or len(rundata.case_cards(dict(d))) > 1 for d in (a, b))
    if not spanning:
        return pd.DataFrame()
    cases_a, cases_b = _cases(a), _cases(b)
    rows = [
        {
            "case": " ".join(key),
            f"commit {la}": str(rundata.case_commit(dict(a), cases_a[key]))[:12],
            f"card {la}": rundata.case_card(dict(a), cases_a[key]),
            f"commit {lb}": str(rundata.case_commit(dict(b), cases_b[key]))[:12],
            f"card {lb}": rundata.case_card(dict(b), cases_b[key]),
        }
        for key in cases_a
        if key in cases_b and cases_a[key].get("timing") and cases_b[key].get("timing")
    ]
    return pd.DataFrame(rows)


def _commits(data: Mapping[str, Any]) -> str:
    return ", ".join(f"{commit} ({n} cases)" for commit, n in rundata.case_commits(dict(data)).items())


def document(
    a: Mapping[str, Any], b: Mapping[str, Any], verdict: Mapping[str, Any], rows: pd.DataFrame
) -> dict[str, Any]:
    """The comparison document for ``comparability(a, b)`` and, where comparable, ``compare_cases(a, b)``."""
    la, lb = a["specs"]["device"], b["specs"]["device"]
    fa, fb = verdict["fingerprint_a"], verdict["fingerprint_b"]
    runs = pd.DataFrame(
        [{"field": k, "A": fa.get(k), "B": fb.get(k)} for k in ("gpu", *SOFTWARE)]
        + [
            {
                "field": "GPU UUID (which card; environment record)",
                "A": (a["environment"].get("gpu") or {}).get("uuid"),
                "B": (b["environment"].get("gpu") or {}).get("uuid"),
            },
            {"field": "cards of the timed cases", "A": _cards(a), "B": _cards(b)},
            {"field": "results", "A": la, "B": lb},
            {
                "field": "git commit (environment record)",
                "A": (a["environment"].get("git") or {}).get("commit"),
                "B": (b["environment"].get("git") or {}).get("commit"),
            },
            {"field": "commits of the timed cases", "A": _commits(a), "B": _commits(b)},
            {"field": "config hash", "A": a["specs"].get("config_hash"), "B": b["specs"].get("config_hash")},
        ]
    )
    sections = [{"title": "Runs", "blocks": [table(runs, ["field", "A", "B"])]}]
    spans = _case_provenance(a, b)
    if not spans.empty:
        sections.append(
            {
                "title": "Which commit and card timed each case",
                "blocks": [
                    text(
                        "At least one of the runs was timed at several commits or on several cards (a resumed run), "
                        "so each case says which; a difference between two cases of different commits or cards "
                        "can be the code's or the card's."
                    ),
                    table(spans, ["case", f"commit {la}", f"card {la}", f"commit {lb}", f"card {lb}"]),
                ],
            }
        )
    if verdict["kind"] == NOT_COMPARABLE:
        sections.append(
            {
                "title": "What this comparison supports / does not support",
                "blocks": [
                    text("Supports: no statement comparing these runs."),
                    text("Does not support any ranking of A against B, because:"),
                    bullets(verdict["reasons"]),
                    text("Each run's own report still holds for that run."),
                ],
            }
        )
        banner = f"{la} (A) vs {lb} (B): not comparable."
        return {
            "title": f"kernelscope comparison — {la} vs {lb}",
            "banner": banner,
            "warning": "NOT COMPARABLE: " + "; ".join(verdict["reasons"]),
            "sections": sections,
        }
    stated = _statements(verdict["kind"], rows, a, b)
    sections.append(
        {
            "title": "What this comparison supports / does not support",
            "blocks": [
                text(
                    f"Kind: {verdict['kind']}. {lb} against {la} under the claim rules: Mann–Whitney p < "
                    f"{claims.ALPHA} and a median difference above the larger of either run's A/A floor and a "
                    "run-to-run floor. "
                    + _rerun_floor_sentence(_pair_calibration(a))
                    + (
                        " Run-to-run noise (another process, another thermal state) can exceed the in-job A/A "
                        "floor; a difference here says the two runs measured differently, not why."
                        if verdict["kind"] == RERUN
                        else ""
                    )
                ),
                text("Supports:"),
                bullets(stated["supports"] or ["No statement."]),
                text("Does not support:"),
                bullets(stated["does_not_support"]),
            ],
        }
    )
    order = orderings(a, b)
    if not order.empty:
        counts = order["ordering"].value_counts()
        flipped = order[order["ordering"] == FLIPPED]
        sections.append(
            {
                "title": "Orderings across the runs",
                "blocks": [
                    text(
                        f"Each Triton variant against each baseline, as each run's own claim rules ordered them: "
                        f"{int(counts.get(HELD, 0))} held, {int(counts.get(FLIPPED, 0))} flipped, "
                        f"{int(counts.get(ORDER_UNRESOLVED, 0))} not resolved in at least one run, of {len(order)}."
                    ),
                    table(
                        flipped if not flipped.empty else order[order["ordering"] == HELD].head(0),
                        ["ordering", "kernel", "shape", "dtype", "triton", "baseline", "verdict_a", "verdict_b"],
                        notes=[
                            f"Flipped orderings only (verdict_a: {la}, verdict_b: {lb}); every pair is in "
                            "orderings.csv."
                        ],
                    ),
                ],
            }
        )
    sections.append(
        {
            "title": "Per case and implementation",
            "blocks": [
                text(
                    f"a_us: {la}'s median, b_us: {lb}'s (event median, or CUDA-graph replay where the basis says so "
                    "the comparison used it); b_time_over_a above 1 means B took longer."
                ),
                table(
                    rows,
                    [
                        "verdict",
                        "b_time_over_a",
                        "kernel",
                        "shape",
                        "dtype",
                        "implementation",
                        "a_us",
                        "b_us",
                        "floor",
                        "basis",
                        "kernel_source",
                    ],
                ),
            ],
        }
    )
    banner = f"{la} (A) vs {lb} (B): {verdict['kind']}; {rows['kernel'].size} implementation × case pairs."
    return {"title": f"kernelscope comparison — {la} vs {lb}", "banner": banner, "warning": None, "sections": sections}


def _pair_calibration(a: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rerun calibration the pairs are judged by: the one ``build`` was given, else run A's own."""
    return a.get("pair_calibration") or rundata.rerun_record(a)


def build(
    results_a: str | Path,
    results_b: str | Path,
    out_dir: str | Path,
    label_a: str | None = None,
    label_b: str | None = None,
    calibration: str | Path | None = None,
) -> dict[str, Any]:
    """Write ``out_dir/report.{md,html}`` and ``out_dir/comparison.csv``; returns the comparability verdict.
    ``label_a``/``label_b`` name the runs in the document (two runs on one GPU share a device key).
    ``calibration``: a rerun calibration record to judge the pairs by in place of run A's own (each run's own
    orderings keep the record it was made with)."""
    a = rundata.collect(Path(results_a))
    if calibration:
        a["pair_calibration"] = {**reruns.load_record(calibration), "status": "ok", "source": str(calibration)}
    try:
        b = rundata.collect(Path(results_b))
    except results.CorruptResult as exc:  # B is a copy of another run: no rule here rebuilds its files
        raise results.CorruptResult(
            exc.path,
            exc.problem,
            f"{results_b} is a copy of another run, which cannot be rebuilt here: copy {results_b}/ again from "
            "the machine that ran it (or unpack it again from the archive it came in), then rerun",
        ) from None
    for data, label in ((a, label_a), (b, label_b)):
        if label:
            data["specs"] = {**data["specs"], "device": label}
    out = Path(out_dir)
    verdict = comparability(a, b)
    comparable = verdict["kind"] != NOT_COMPARABLE
    # not comparable: the CSV keeps its header and has no rows (no pair is compared)
    rows = compare_cases(a, b, verdict["kind"]) if comparable else pd.DataFrame(columns=CASE_COLUMNS)
    render(document(a, b, verdict, rows), out)
    with results.atomic(out / "comparison.csv") as tmp:
        rows.to_csv(tmp, index=False)
    if verdict["kind"] != NOT_COMPARABLE:
        with results.atomic(out / "orderings.csv") as tmp:
            orderings(a, b).to_csv(tmp, index=False)
    return verdict
