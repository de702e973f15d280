"""Reading and writing result files so that an interrupted run never leaves a half-written one, and a corrupt
one is found when a later stage reads it, named with what is wrong and how to rebuild it.

Every writer goes through :func:`atomic` (write a temporary file beside the target, then rename it over the
target: a reader or a resumed run sees the old file or the new one, never a part). Every result file a later
stage reads goes through :func:`load`, which checks it against ``kernelscope/schemas/<kind>.yaml``. The
schemas state what the readers rely on and allow additional properties, so a stage may add fields freely.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
#: results/<device>/<name>.json and results/<device>/<stage>/<kernel>/<dtype>/<shape>.json
TOP_LEVEL = ("specs", "environment", "calibration", "reruns")
PER_CASE = ("correctness", "sweep", "timing", "profile", "ncu")


class CorruptResult(ValueError):
    """A result file is not valid JSON or does not match its schema; the message says how to rebuild it
    (``remedy``: what to do instead, where the file cannot be rebuilt here, such as another run's copy)."""

    def __init__(self, path: str | Path, problem: str, remedy: str | None = None) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path} {problem}: {remedy or rebuild_hint(path)}")


@contextlib.contextmanager
def atomic(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` in one rename, on failure it is removed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    with atomic(path) as tmp:
        tmp.write_text(text)


def kind_of(path: str | Path) -> str | None:
    """The schema of a results path (see the path grammar in kernelscope/cases.py), or None."""
    p = Path(path)
    if p.suffix != ".json":
        return None
    if p.stem in TOP_LEVEL:
        return p.stem
    parts = p.parts
    if len(parts) >= 4 and parts[-4] in PER_CASE:
        return parts[-4]
    return None


@cache
def schema(kind: str) -> dict[str, Any]:
    return yaml.safe_load((SCHEMAS / f"{kind}.yaml").read_text())


_DRAFT_ITEMS = jsonschema.Draft202012Validator.VALIDATORS["items"]


def _items(validator, items, instance, schema):
    """Draft 2020-12 ``items``, with a one-pass check of the common case ``items: {type: number}``.

    A timing file holds thousands of samples; descending into each one with the generic validator made loading
    a run's results take seconds. A list whose elements are all plain ``int``/``float`` is valid under
    ``{type: number}`` (``bool`` is not a number to JSON Schema, and ``type(True) is bool``); anything else goes
    through the draft's own ``items``, so the verdict and the error message are the draft's.
    """
    if (
        items == {"type": "number"}
        and "prefixItems" not in schema
        and isinstance(instance, list)
        and all(type(x) is float or type(x) is int for x in instance)
    ):
        return
    yield from _DRAFT_ITEMS(validator, items, instance, schema)


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"items": _items})


@cache
def validator(kind: str) -> jsonschema.protocols.Validator:
    """The schema validator of a result kind (Draft 2020-12)."""
    return _Validator(schema(kind))


def rebuild_hint(path: str | Path) -> str:
    return (
        f"rebuild it with `snakemake --cores 1 --force {path}` and then rerun your snakemake command "
        f"(or delete {path} and rerun)"
    )


def load(path: str | Path, kind: str | None = None) -> dict[str, Any]:
    """The JSON document at ``path``, checked against its schema (inferred from the path when not given)."""
    kind = kind or kind_of(path)
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise CorruptResult(path, f"is not valid JSON ({exc})") from None
    if kind is not None:
        error = jsonschema.exceptions.best_match(validator(kind).iter_errors(doc))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "top level"
            raise CorruptResult(path, f"is not a valid {kind} result: {error.message} (at {where})")
    return doc
