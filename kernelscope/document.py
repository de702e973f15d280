"""The document model the reports are written in, and its rendering.

A document is ``{"title", "banner", "warning", "sections": [{"title", "level", "blocks": [...]}]}``; a block
is text (lines), bullets (items), a table (columns, rows of formatted cells, which columns are code) or an
image. The run report (``report``) and the run-against-run comparison (``compare``) build documents; the
jinja2 templates in ``templates/`` write each as Markdown and as autoescaped HTML.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from kernelscope import results

TEMPLATES = Path(__file__).parent / "templates"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-2 or abs(value) >= 1e5 else f"{value:.{digits}f}"
    return str(value)


def table(df: pd.DataFrame, columns: list[str], code: tuple[str, ...] = (), digits: int = 3) -> dict[str, Any]:
    cols = [c for c in columns if c in df.columns]
    rows = [[fmt(r[c], digits) for c in cols] for _, r in df[cols].iterrows()] if not df.empty else []
    return {"type": "table", "columns": cols, "code": [c in code for c in cols], "rows": rows}


def kv(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"type": "table", "columns": ["field", "value"], "code": [False, False],
            "rows": [[k, fmt(v)] for k, v in pairs]}


def text(*lines: str) -> dict[str, Any]:
    return {"type": "text", "lines": list(lines)}


def bullets(items: list[str]) -> dict[str, Any]:
    return {"type": "bullets", "items": items}


def render(doc: dict[str, Any], out: Path) -> None:
    """Write ``doc`` (title, banner, warning, sections of blocks) as report.md and report.html in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for template, target, escape in (("report.md.j2", "report.md", False), ("report.html.j2", "report.html", True)):
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=escape,
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                 trim_blocks=True, lstrip_blocks=True)
        env.filters["md_cell"] = _md_cell
        env.filters["md_text"] = _md_text
        results.write_text(out / target, env.get_template(template).render(doc=doc))


def _md_text(value: str) -> str:
    """Markdown prose: angle brackets escaped, so C++ kernel names (``softmax<c10::Half>``) are not
    taken for HTML tags by a Markdown renderer."""
    return str(value).replace("<", "&lt;").replace(">", "&gt;")


def _md_cell(value: str, code: bool = False) -> str:
    """A pipe-table cell: one line, pipes escaped; code cells in backticks (literal in Markdown)."""
    cell = str(value).replace("\n", " ").replace("|", "\\|")
    if code:
        ticks = "``" if "`" in cell else "`"
        return f"{ticks}{cell}{ticks}"
    return _md_text(cell)
