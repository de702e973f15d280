#!/usr/bin/env python3
"""Migrate result folders written before the records carried what the reading side needs, once.

The reading side (report, claims, compare, index) is a function of ``results/`` alone: every per-case record
carries the kernel declaration it was measured under (``declaration``, written by ``cli._case_header``), every
correctness record says of each unsupported implementation whether it ``declined`` the case by its own
budget, and every run has a ``reruns.json``. Archives written before lack some of these; this script adds them,
taking the declarations from the kernel modules of this checkout (so run it where torch is installed), and says
so in every record it changed and in ``specs.json`` (``migrated``: when, by what, which fields). Records that
already have a field keep theirs; a migrated folder is left as it is.

    python scripts/migrate-results.py results/nvidia-h200                # a results folder, in place
    python scripts/migrate-results.py reports/*/raw-results.tar.gz       # a tarball, rewritten in place

A tarball may hold several results folders (each a directory with a ``specs.json``); its members keep their
names and order, and the new tarball replaces the old one in one rename. A PATH that is neither a results folder
nor a tarball with one is refused, naming it.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelscope import results  # noqa: E402 - after the checkout is on the path

BY = "scripts/migrate-results.py"
#: a rerun record for runs from before ``reruns.json`` existed (the reason the report gave them)
NO_RERUNS = "no reruns.json (an older run)"


class NotResults(ValueError):
    """A path given to migrate holds no results folder."""


def _stamp(doc: dict[str, Any], added: list[str], at: str) -> None:
    doc["migrated"] = {"at": at, "by": BY, "added": added}


def _declaration(case: dict[str, Any]) -> dict[str, Any]:
    from kernelscope import registry
    from kernelscope.spec import Shape

    return registry.get(case["kernel"]).declaration(Shape(case["params"], case["reason"]), case["dtype"])


def _timing_provenance(doc: dict[str, Any], env: dict[str, Any]) -> list[str]:
    """A timing record from before each job stored its commit, its card and how it enqueued samples gets the
    run's commit and card (``environment.json``: what the report said of such records) and
    ``per-sample-sync`` (the only method before batched enqueue was recorded)."""
    added = []
    if not (doc.get("git") or {}).get("commit") and (env.get("git") or {}).get("commit"):
        doc["git"] = env["git"]
        added.append("git (the run's, from environment.json)")
    uuid = (env.get("gpu") or {}).get("uuid")
    if not (doc.get("nvml") or {}).get("uuid") and uuid:
        doc["nvml"] = {**(doc.get("nvml") or {}), "uuid": uuid}
        added.append("nvml.uuid (the run's, from environment.json)")
    pending = [r for r in doc.get("implementations", []) if r.get("status") == "ok" and "enqueue" not in r]
    for rec in pending:
        rec["enqueue"] = "per-sample-sync"
    if pending:
        added.append("implementations[].enqueue (per-sample-sync)")
    return added


def migrate_record(
    doc: dict[str, Any],
    stage: str,
    case: dict[str, Any],
    at: str,
    declare: Callable[[dict[str, Any]], dict],
    env: dict[str, Any] | None = None,
) -> bool:
    """Add what a per-case record lacks; True where it changed."""
    added = []
    if stage == "timing":
        added += _timing_provenance(doc, env or {})
    declared = doc.get("declaration")
    if declared is None:
        declared = doc["declaration"] = declare(case)
        added.append("declaration")
    if stage == "correctness":
        by_name = {i["name"]: i for i in declared["implementations"]}
        pending = [r for r in doc.get("implementations", []) if r["status"] == "unsupported" and "declined" not in r]
        for rec in pending:  # an implementation the module no longer declares did not decline by its budget
            rec["declined"] = bool(by_name.get(rec["implementation"], {}).get("declined"))
        if pending:
            added.append("implementations[].declined")
    if added:
        _stamp(doc, added, at)
    return bool(added)


def migrate_docs(docs: dict[str, dict[str, Any]], at: str, declare=_declaration) -> dict[str, dict[str, Any]]:
    """Migrate one results folder given as ``{relative path: document}`` (its JSON files); returns the documents
    that changed or were added, by relative path."""
    specs = docs.get("specs.json")
    if specs is None:
        raise NotResults("no specs.json")
    cases = {(c["kernel"], c["dtype"], c["shape"]): c for c in specs["cases"]}
    changed: dict[str, dict[str, Any]] = {}
    for rel, doc in docs.items():
        parts = PurePosixPath(rel).parts
        if len(parts) != 4 or parts[0] not in results.PER_CASE:
            continue
        stage, kernel, dtype, shape = parts[0], parts[1], parts[2], PurePosixPath(parts[3]).stem
        case = cases.get((kernel, dtype, shape)) or {
            "kernel": kernel,
            "dtype": dtype,
            "shape": shape,
            "params": doc["params"],
            "reason": doc["reason"],
        }
        if migrate_record(doc, stage, case, at, declare, docs.get("environment.json")):
            changed[rel] = doc
    if "reruns.json" not in docs:
        changed["reruns.json"] = {"device": specs["device"], "status": "none", "reason": NO_RERUNS}
        _stamp(changed["reruns.json"], ["reruns.json"], at)
    if changed:
        history = specs.get("migrated", [])
        specs["migrated"] = [*history, {"at": at, "by": BY, "changed": sorted(changed)}]
        changed["specs.json"] = specs
    return changed


def _dump(doc: dict[str, Any], rel: str) -> str:
    # as the writers do: specs.json with indent 2 (kernelscope.cases), every stage's record with indent 1 (cli)
    return json.dumps(doc, indent=2 if rel == "specs.json" else 1, default=str) + "\n"


def migrate_folder(folder: Path, at: str) -> list[str]:
    if not (folder / "specs.json").is_file():
        raise NotResults(f"{folder} has no specs.json: pass a results/<device> folder or a tarball of one")
    docs = {str(p.relative_to(folder)): json.loads(p.read_text()) for p in folder.rglob("*.json")}
    changed = migrate_docs(docs, at)
    for rel, doc in changed.items():
        results.write_text(folder / rel, _dump(doc, rel))
    return sorted(changed)


def migrate_tarball(path: Path, at: str) -> list[str]:
    with tarfile.open(path) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    roots = [PurePosixPath(m.name).parent for m, _ in members if PurePosixPath(m.name).name == "specs.json"]
    if not roots:
        raise NotResults(f"{path} holds no specs.json: it is not a tarball of a results folder")
    replaced: dict[str, bytes] = {}
    added: list[tuple[str, bytes]] = []
    for root in roots:
        docs = {}
        for m, data in members:
            name = PurePosixPath(m.name)
            if data is not None and name.suffix == ".json" and root in name.parents:
                docs[str(name.relative_to(root))] = json.loads(data)
        for rel, doc in migrate_docs(docs, at).items():
            name = str(root / rel)
            if rel in docs:
                replaced[name] = _dump(doc, rel).encode()
            else:
                added.append((name, _dump(doc, rel).encode()))
    if not replaced and not added:
        return []
    with results.atomic(path) as tmp, tarfile.open(tmp, "w:gz") as out:
        for m, data in members:
            if m.name in replaced:
                data = replaced[m.name]
                m.size, m.mtime = len(data), int(time.time())
            out.addfile(m, io.BytesIO(data) if data is not None else None)
        for name, data in added:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            out.addfile(info, io.BytesIO(data))
    return sorted([*replaced, *(n for n, _ in added)])


def migrate(path: str | Path, at: str | None = None) -> list[str]:
    """Migrate a results folder or a tarball in place; the files it changed or added."""
    at = at or time.strftime("%Y-%m-%dT%H:%M:%S%z")
    path = Path(path)
    if path.is_dir():
        return migrate_folder(path, at)
    if path.is_file() and tarfile.is_tarfile(path):
        return migrate_tarball(path, at)
    raise NotResults(f"{path} is neither a results folder (with specs.json) nor a tarball of one")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="results/<device> folders or raw-results tarballs")
    args = parser.parse_args(argv)
    status = 0
    for path in args.paths:
        try:
            changed = migrate(path)
        except NotResults as exc:
            print(f"migrate-results: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{path}: {'migrated ' + str(len(changed)) + ' files' if changed else 'already migrated'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
