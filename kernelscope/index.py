"""The index of published runs: ``reports/index.md`` and ``reports/index.html`` list every published run and
every comparison of two published runs under a reports folder, with links. A run is published when its folder
holds ``raw-results.tar.gz`` beside its ``run.json`` (what ``scripts/publish-reports.sh`` re-renders it from);
a run of this checkout (``reports/cpu-interpreter/`` after ``make run``) is not, so it never enters the
committed index. The index is built by ``scripts/publish-reports.sh``, not by the workflow, which writes only
its own run's files.

Each run's facts come from its ``run.json`` (written by the report stage from the run's records); nothing is
typed in, so re-rendering a report and then the index keeps both in step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import claims, verdicts
from kernelscope.document import render, table, text


def _run_row(folder: Path, root: Path) -> dict[str, Any]:
    run = json.loads((folder / "run.json").read_text())
    facts = run.get("report") or {}
    commits = facts.get("case_commits") or {c: None for c in run.get("commits", [])}
    cards = facts.get("case_cards") or {c: None for c in run.get("gpus", [])}
    gate = facts.get("gate") or {}
    return {
        "run": f"{folder.relative_to(root)}/report.html",
        "device": run.get("device"),
        "GPU": facts.get("gpu") or ("CPU interpreter" if run.get("interpreter") else "–"),
        "timed": (f"{facts['first_timed'][:10]} – {facts['last_timed'][:10]}" if facts.get("first_timed") else "–"),
        "versions": f"torch {run.get('torch')}, triton {run.get('triton')}",
        "commits (cases)": ", ".join(f"{c[:9]}" + (f" ({n})" if n else "") for c, n in commits.items()) or "–",
        "cards": len(cards),
        "cases timed": f"{run.get('cases_timed')}/{run.get('cases_planned')}",
        "gate: pass / fail / error / not run": " / ".join(
            str(gate.get(k, 0)) for k in ("pass", "fail", "error", "unsupported")
        ),
    }


def _comparison_row(path: Path, root: Path) -> dict[str, Any]:
    first = path.read_text().split("\n", 4)
    banner = next((line for line in first[1:] if line.strip()), "")
    return {
        "comparison": f"{path.parent.relative_to(root)}/report.html",
        "of run": str(path.parents[2].relative_to(root)),
        "against": path.parent.name,
        "summary": banner.strip(),
    }


def reproduced(comparison_csv: Path) -> list[dict[str, Any]]:
    """Per kernel of one comparison: of the timings measured in both runs (verdict other than not comparable),
    how many reproduced: no difference resolved because the test found none (``verdicts.reproduced``), not
    because the pair could not be judged. Computed here, where the run and its comparison are both present: a
    run's own report is written before any comparison of it exists. A comparison that refused the pair (a
    ``comparison.csv`` with its header only, or none) has no rows."""
    if not comparison_csv.is_file() or comparison_csv.stat().st_size <= 1:
        return []
    rows = pd.read_csv(comparison_csv)
    if rows.empty or "kernel" not in rows:
        return []
    out = []
    for kernel, grp in rows.groupby("kernel", sort=True):
        measured = grp[grp["verdict"] != claims.NOT_COMPARABLE]
        # agreed by the test (below the floor or not significant), not by default where a pair could not be judged
        same = sum(verdicts.reproduced(v, r) for v, r in zip(measured["verdict"], measured["reason"], strict=True))
        out.append({"kernel": kernel, "reproduced": f"{same}/{len(measured)}" if len(measured) else "–"})
    return out


#: what makes a folder of reports/ a published run: the raw results its report is re-rendered from
PUBLISHED = "raw-results.tar.gz"


def _published(root: Path, name: str) -> bool:
    return (root / name / "run.json").is_file() and (root / name / PUBLISHED).is_file()


def document(root: Path) -> dict[str, Any]:
    runs = pd.DataFrame(
        [_run_row(p.parent, root) for p in sorted(root.glob("*/run.json")) if _published(root, p.parent.name)]
    )
    published = [
        p
        for p in sorted(root.glob("*/compare/*/report.md"))
        if _published(root, p.parents[2].name) and _published(root, p.parent.name)
    ]
    comparisons = pd.DataFrame([_comparison_row(p, root) for p in published])
    repro = pd.DataFrame(
        [
            {"of run": str(p.parents[2].relative_to(root)), "against": p.parent.name, **row}
            for p in published
            for row in reproduced(p.parent / "comparison.csv")
        ],
        columns=["of run", "against", "kernel", "reproduced"],
    )
    return {
        "title": "kernelscope — published runs",
        "warning": None,
        "banner": f"{len(runs)} runs and {len(comparisons)} comparisons under {root.name}/; each report is one "
        "self-contained HTML page (Markdown beside it).",
        "sections": [
            {
                "title": "Runs",
                "blocks": [
                    text(
                        "Commits: the commit of the code that timed the cases, with how many cases each (a resumed "
                        "run can span several). Gate: implementation × case outcomes of the correctness gate; not "
                        "run = unsupported by design or declined by a budget."
                    ),
                    table(runs, list(runs.columns), links=("run",)) if not runs.empty else text("No runs."),
                ],
            },
            {
                "title": "Comparisons",
                "blocks": [
                    table(comparisons, list(comparisons.columns), links=("comparison",))
                    if not comparisons.empty
                    else text("No comparisons.")
                ],
            },
            {
                "title": "Reproduced",
                "blocks": [
                    text(
                        "Per comparison and kernel: of the timings measured in both runs, how many had no "
                        "difference resolved (the comparison's rules; a refused comparison has no rows)."
                    ),
                    table(repro, list(repro.columns)) if not repro.empty else text("No comparison compared its runs."),
                ],
            },
        ],
    }


def build(reports_dir: str | Path) -> None:
    root = Path(reports_dir)
    render(document(root), root, name="index")
