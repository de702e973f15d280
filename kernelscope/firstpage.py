"""The sections only the report's first page has: the headline figure, the targets per kernel, what the run
supports in brief, the environment in brief and the links to the kernel pages. Each is built from the tables
the report already computed (``scores.best_ratios``, ``scores.targets``, ``claims.statements``); the full
versions sit on the kernel pages and the details page (``report.kernel_document``, ``report.details_document``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import claims, plots, scores
from kernelscope.document import bullets, figure, kv, links, table, text
from kernelscope.verdicts import Topic

#: statements of each kind the first page lists before pointing to the details page
BRIEF_STATEMENTS = 8
#: where the pages other than the first sit, relative to the first page
KERNEL_DIR = "kernels"
DETAILS = "details"


def kernel_page(kernel: str) -> str:
    """A kernel page's HTML path, relative to the first page (the Markdown twin: ``.md``)."""
    return f"{KERNEL_DIR}/{kernel}.html"


def headline_rows(ratios: pd.DataFrame) -> pd.DataFrame:
    """The headline figure's points: each case's best Triton variant against its primary baseline, on the
    claim rules' basis, cases in run order and grouped by kernel."""
    if ratios.empty:
        return ratios
    rows = ratios[ratios["primary"].astype(bool) & ratios["speedup"].notna()]
    order = {k: i for i, k in enumerate(sorted(rows["kernel"].unique()))}
    return rows.sort_values("kernel", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def headline_blocks(ratios: pd.DataFrame, out: Path, basis_note: str) -> list[dict[str, Any]]:
    """The headline figure (written to ``out/plots/headline.svg``) with its caption; none without ratios."""
    rows = headline_rows(ratios)
    path = out / "plots" / "headline.svg"
    if not plots.headline(rows, path):
        return []
    bases = ", ".join(f"{n} {b}" for b, n in rows["basis"].value_counts().items())
    return [
        figure(
            path,
            "plots/headline.svg",
            "speedup of the best Triton variant per case against the primary baseline, with 95 % CIs",
            caption=(
                f"One point per case ({len(rows)}): the primary baseline's time over the best correct Triton "
                f"variant's, on the claim rules' basis ({basis_note}; here: {bases}); colour: the claim rules' "
                "verdict for the pair; hover a point for its case. Every baseline, per case: the kernel pages."
            ),
        )
    ]


def _measured(row: pd.Series) -> str:
    if pd.isna(row["value"]):
        return "no value"
    ci = f" [{row['ci_low']:.3g}–{row['ci_high']:.3g}]" if pd.notna(row["ci_low"]) else ""
    return f"{row['value']:.3g}{ci}"


def targets_summary(target_df: pd.DataFrame) -> dict[str, Any] | None:
    """Per kernel: how many of its targets' cases were met, missed and not resolved, and every miss."""
    if target_df.empty:
        return None
    rows, misses = [], []
    for kernel, grp in target_df.groupby("kernel", sort=True):
        counts = grp["verdict"].value_counts()
        rows.append(
            {
                "kernel": kernel,
                "met": int(counts.get(scores.MET, 0)),
                "missed": int(counts.get(scores.MISSED, 0)),
                "not resolved": int(counts.get(scores.NOT_RESOLVED, 0)),
                "page": kernel_page(kernel),
            }
        )
        for target, missed in grp[grp["verdict"] == scores.MISSED].groupby("target", sort=False):
            cases = "; ".join(f"{r['case'].removeprefix(kernel + ' ')} {_measured(r)}" for _, r in missed.iterrows())
            misses.append(f"{target}: {cases}")
    return {
        "title": "Targets",
        "blocks": [
            text(
                "Each declared target on every case it covers. Met: the whole 95 % interval at or above the goal; "
                "missed: the whole interval below it; not resolved: it straddles the goal, or a side has no valid "
                "time. A ratio's interval holds the baseline's timings before and after the variants. Every case and "
                "its basis: the kernel's page."
            ),
            table(pd.DataFrame(rows), ["kernel", "met", "missed", "not resolved", "page"], links=("page",)),
            text("Missed:" if misses else "No target was missed."),
            *([bullets(misses)] if misses else []),
        ],
    }


def _brief(items: list[str], what: str) -> list[str]:
    more = len(items) - BRIEF_STATEMENTS
    return items[:BRIEF_STATEMENTS] + ([f"… and {more} more {what} on the details page."] if more > 0 else [])


def supports_section(supports: list[str], refusals: list[str], claim_df: pd.DataFrame) -> dict[str, Any]:
    """The statements in brief: the resolved orderings counted by verdict (each is on its kernel's page and in
    the details page's appendix), the other statements, and the first limits in the report's order, with the
    pairs the claim rules did not order counted in one line. Read from the statements' topics, not their words."""
    orderings = [i for i, s in enumerate(supports) if getattr(s, "topic", None) == Topic.ORDERING]
    others = [s for i, s in enumerate(supports) if i not in set(orderings)]
    if orderings:  # in their place: how many, by verdict
        resolved = claim_df[claim_df["verdict"].isin([claims.FASTER, claims.SLOWER])]
        counts = ", ".join(f"{int(n)} {v}" for v, n in resolved["verdict"].value_counts().items())
        others.insert(
            orderings[0],
            f"{len(orderings)} orderings ({counts}), each with its numbers on its kernel's page and in the "
            "details page's appendix.",
        )
    unordered = [s for s in refusals if getattr(s, "topic", None) == Topic.UNRESOLVED_ORDERING]
    limits = [s for s in refusals if getattr(s, "topic", None) != Topic.UNRESOLVED_ORDERING]
    if unordered:
        limits.append(
            f"An ordering of {len(unordered)} pairs the claim rules did not resolve (within the A/A or rerun "
            "floor, or not significant), each with its reason in the details page's appendix."
        )
    refusals = limits
    return {
        "title": "What this run supports and does not",
        "id": "supports",
        "blocks": [
            text("Supports:"),
            bullets(_brief(others, "statements") or ["No performance statement."]),
            text("Does not support:"),
            bullets(_brief(refusals, "limits") or ["Nothing is refused."]),
            links([("Every statement, with the method: details", f"{DETAILS}.html#appendix")]),
        ],
    }


#: the environment record's fields the first page shows (the details page shows all of them)
BRIEF_FIELDS = ("GPU", "driver", "CUDA runtime", "torch", "triton", "Python", "git commit (environment job)")


def environment_brief(pairs: list[tuple[str, Any]], image_keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``pairs`` (the environment section's) that say what the run ran on, and the container."""
    shown = (*BRIEF_FIELDS, "container", "image is the lock's")  # an image that is not the lock's says so here
    keep = [(k, v) for k, v in pairs if k in shown or k in image_keys]
    return {
        "title": "Environment in brief",
        "blocks": [
            kv(keep),
            links([("The whole environment record, ceilings and method: details", f"{DETAILS}.html")]),
        ],
    }


def kernels_section(counts: dict[str, int]) -> dict[str, Any]:
    """One row per kernel with its page: the case tables, figures and sweep details."""
    df = pd.DataFrame([{"kernel": k, "cases": n, "page": kernel_page(k)} for k, n in sorted(counts.items())])
    return {
        "title": "Kernels",
        "id": "kernels",
        "blocks": [
            text("Each kernel's page holds its ratios per case and baseline, its figures and every case's tables."),
            table(df, ["kernel", "cases", "page"], links=("page",)),
        ],
    }
