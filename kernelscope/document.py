"""The document model the reports are written in, and its rendering.

A document is ``{"title", "banner", "warning", "nav", "toc", "sections": [{"title", "level", "blocks": [...]}]}``
(``nav``: links under the banner, ``toc``: False for no table of contents; both optional); a block is text
(lines), bullets (items), a table (columns, rows of formatted cells, which columns are code or links, notes
under it), links (to other pages of the report) or a figure (an SVG file: held inline in the HTML, linked
from the Markdown, with an optional caption). A link names the HTML page; the Markdown links the ``.md``
twin. A section may be ``collapsed`` (a ``<details>`` element in HTML); every section gets an anchor and a
line in the table of contents. The run report (``report``: a first page, a details page and a page per
kernel), the run-against-run comparison (``compare``) and the index of runs (``index``) build documents;
the jinja2 templates in ``templates/`` write each as Markdown and as autoescaped HTML that loads nothing
from elsewhere.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from kernelscope import results

TEMPLATES = Path(__file__).parent / "templates"


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: whole numbers as integers, others to ``digits`` decimals (significant digits when tiny
    or huge), missing values as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.{digits}g}" if abs(value) < 1e-2 or abs(value) >= 1e5 else f"{value:.{digits}f}"
    return str(value)


#: longest code cell in a table; the CSV beside the report keeps the whole name
CODE_WIDTH = 72


def short_name(name: str, width: int = CODE_WIDTH) -> str:
    """A C++ kernel name for a table: template arguments and parameter lists folded to ``<…>`` / ``(…)``,
    then cut to ``width`` characters."""
    folded = str(name)
    for opening, closing in (("<", ">"), ("(", ")")):
        out, depth = [], 0
        for ch in folded:
            if ch == opening:
                if depth == 0:
                    out.append(opening + "…")
                depth += 1
            elif ch == closing and depth:
                depth -= 1
                if depth == 0:
                    out.append(closing)
            elif depth == 0:
                out.append(ch)
        folded = "".join(out) if depth == 0 else folded
    folded = folded.replace("(…)::", "").replace("(anonymous namespace)::", "")
    return folded if len(folded) <= width else folded[: width - 1] + "…"


def table(
    df: pd.DataFrame,
    columns: list[str],
    code: tuple[str, ...] = (),
    digits: int = 3,
    notes: list[str] | None = None,
    links: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Columns of ``df`` that exist, in the order given; code columns are shortened (``short_name``); link
    columns hold a relative path, shown as a link to it."""
    cols = [c for c in columns if c in df.columns]
    rows = (
        [[short_name(r[c]) if c in code else fmt(r[c], digits) for c in cols] for _, r in df[cols].iterrows()]
        if not df.empty
        else []
    )
    return {
        "type": "table",
        "columns": cols,
        "code": [c in code for c in cols],
        "link": [c in links for c in cols],
        "rows": rows,
        "notes": notes or [],
    }


def figure(path: Path, src: str, alt: str, caption: str = "") -> dict[str, Any]:
    """An SVG written beside the Markdown at ``src`` (relative); the HTML holds its markup inline."""
    return {"type": "figure", "src": src, "alt": alt, "svg": _svg_body(path.read_text()), "caption": caption}


def _svg_body(svg: str) -> str:
    """The ``<svg>`` element of a file, without the XML prolog and DOCTYPE (not allowed inside HTML)."""
    start = svg.index("<svg")
    return svg[start:]


def anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def kv(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        "type": "table",
        "columns": ["field", "value"],
        "code": [False, False],
        "link": [False, False],
        "rows": [[k, fmt(v)] for k, v in pairs],
        "notes": [],
    }


def text(*lines: str) -> dict[str, Any]:
    return {"type": "text", "lines": list(lines)}


def bullets(items: list[str]) -> dict[str, Any]:
    return {"type": "bullets", "items": items}


def links(items: list[tuple[str, str]]) -> dict[str, Any]:
    """A line of links, each (label, relative path of an HTML page, with or without an anchor)."""
    return {"type": "links", "items": [{"label": label, "href": href} for label, href in items]}


def render(doc: dict[str, Any], out: Path, name: str = "report") -> None:
    """Write ``doc`` (title, banner, warning, sections of blocks) as ``name``.md and ``name``.html in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for section in doc["sections"]:  # unique anchors, in document order
        base = section.get("id") or anchor(section["title"])
        section["id"], n = base, 1
        while section["id"] in seen:
            n += 1
            section["id"] = f"{base}-{n}"
        seen.add(section["id"])
    for template, target, escape in (("report.md.j2", f"{name}.md", False), ("report.html.j2", f"{name}.html", True)):
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=escape,
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
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
