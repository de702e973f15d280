"""What each kernel declares, as data that planning reads without importing torch or triton.

A Snakemake run is planned on whatever machine parses the Snakefile (a laptop, a cluster's login node),
which need not have torch, CUDA or a GPU. The kernel modules in ``kernels/`` import torch and triton, so
the planner reads their plan-relevant declarations from ``kernels/catalog.json`` instead: names of the
variants, baselines and negative controls, declared dtypes, shape sets (with reasons), which shape
parameters are required, optional, or 0/1 flags, and each kernel's memory footprint as a formula.

The file is generated from the modules, never edited by hand::

    python -m kernelscope.catalog            # rewrite kernels/catalog.json from kernels/*.py
    python -m kernelscope.catalog --check    # exit 1 if it is stale (a test runs this)

The same step keeps ``kernels/tolerances.json``, the reviewed record of every kernel's tolerance per dtype
with its reason, which a test compares with the modules. It records the tolerances of a kernel or dtype it
has not seen (a new kernel needs nothing else) and drops those no longer declared; a changed tolerance of a
recorded one keeps its reviewed value, so the tests fail until the change is accepted on purpose::

    python -m kernelscope.catalog --accept-tolerances softmax   # record softmax's tolerances as declared now

Each entry records its module's sha256, so planning (:func:`ensure_current`, called by the workflow before
it plans) sees a module that was added, changed or removed since: it regenerates the file where torch is
importable and otherwise refuses with the command to run on a machine that has it. Dropping a new module
into ``kernels/`` is therefore all it takes to add a kernel to the default run.

The footprint is ``KernelSpec.bytes_moved`` (each input read once, each output written once: the least
memory a case needs). Every kernel's formula is multilinear in its shape parameters (``M*N``, ``M*K + K*N
+ M*N``, ``B*H*S*D``), so its values at the corners of the unit cube determine it exactly (Möbius
inversion over the subsets of parameters). The generator checks the recovered formula against
``bytes_moved`` on every declared shape and on random ones, so a non-multilinear formula is refused when
the catalog is generated, not mistaken at plan time.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from kernelscope import results

PATH = Path(__file__).resolve().parent.parent / "kernels" / "catalog.json"
REGENERATE = "python -m kernelscope.catalog"


@cache
def load(path: str | Path = PATH) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: run `{REGENERATE}` (needs torch) to generate it") from None


class StaleCatalog(RuntimeError):
    """kernels/catalog.json does not match the kernel modules and cannot be regenerated here."""


def module_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def module_paths(kernels_dir: str | Path) -> dict[str, Path]:
    """The kernel modules in ``kernels_dir`` by name, as :func:`kernelscope.registry.available` finds them."""
    return {p.stem: p for p in sorted(Path(kernels_dir).glob("*.py")) if not p.name.startswith("_")}


def stale_kernels(doc: Mapping[str, Any] | None, kernels_dir: str | Path) -> list[str]:
    """Kernels whose entry is missing, records another module sha256, or has no module any more."""
    entries = (doc or {}).get("kernels", {})
    modules = module_paths(kernels_dir)
    changed = [n for n, p in modules.items() if entries.get(n, {}).get("module_sha256") != module_sha256(p)]
    return sorted(set(changed) | (set(entries) - set(modules)))


def ensure_current(path: str | Path = PATH) -> list[str]:
    """Regenerate ``path`` if any kernel module was added, changed or removed since it was written (a
    subprocess, since generating imports torch and the planner must not); returns the kernels that were
    stale. Without torch, refuses with the command to run where torch is installed."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        doc = None
    stale = stale_kernels(doc, path.parent)
    if not stale:
        return []
    what = f"{path} is missing" if doc is None else f"{path} is stale for kernel(s) {stale}"
    if importlib.util.find_spec("torch") is None:
        raise StaleCatalog(
            f"{what}, and torch is not importable here to regenerate it: run `{REGENERATE}` "
            "where torch is installed (e.g. in the container) and copy kernels/catalog.json back"
        )
    root = path.parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.catalog", "--out", str(path)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise StaleCatalog(f"{what}; `{REGENERATE}` failed:\n{proc.stderr[-3000:]}")
    print(f"kernelscope: {what}; regenerated it", file=sys.stderr)
    load.cache_clear()
    return stale


def footprint_bytes(entry: Mapping[str, Any], params: Mapping[str, int], dtype: str) -> float:
    """Least bytes of memory a case needs (inputs and output), from the catalog's formula."""
    total = 0.0
    for term in entry["footprint"][dtype]:
        value = term["coefficient"]
        for name in term["params"]:
            value *= int(params.get(name, 0))
        total += value
    return total


# --- generation (imports torch through the registry) -------------------------------------------------


def _multilinear_terms(fn, names: list[str]) -> list[dict[str, Any]]:
    """Coefficients of a multilinear ``fn`` (a function of a dict of parameters) by Möbius inversion."""
    corner = {}
    for size in range(len(names) + 1):
        for subset in itertools.combinations(names, size):
            corner[subset] = float(fn({n: int(n in subset) for n in names}))
    terms = []
    for subset in corner:
        coefficient = sum(
            (-1) ** (len(subset) - len(sub)) * corner[sub]
            for size in range(len(subset) + 1)
            for sub in itertools.combinations(subset, size)
        )
        if coefficient:
            terms.append({"params": list(subset), "coefficient": coefficient})
    return terms


def _entry(spec, module_file: str) -> dict[str, Any]:
    from kernelscope.spec import DTYPES, Shape

    all_shapes = [s for shapes in spec.shape_sets.values() for s in shapes]
    names = list(dict.fromkeys(k for s in all_shapes for k in s.params))
    required = [n for n in names if all(n in s.params for s in all_shapes)]
    # A parameter that every declared shape sets to 0 or 1 is a switch (causal, bias, gelu), not a size.
    flags = [n for n in names if all(int(s.params[n]) in (0, 1) for s in all_shapes if n in s.params)]
    dtypes = [name for name, dt in DTYPES.items() if dt in spec.tolerances]
    footprint = {}
    for dtype in dtypes:
        fn = lambda p, dt=DTYPES[dtype]: spec.bytes_moved(Shape(p, "probe"), dt)  # noqa: E731
        terms = _multilinear_terms(fn, names)
        entry = {"footprint": {dtype: terms}}
        rng = random.Random(0)
        probes = [dict(s.params) for s in all_shapes]
        probes += [{n: rng.randint(0, 1) if n in flags else rng.randint(1, 5000) for n in names} for _ in range(20)]
        for params in probes:
            full = {n: params.get(n, 0) for n in names}
            want, got = float(fn(full)), footprint_bytes(entry, full, dtype)
            if abs(want - got) > 1e-6 * max(1.0, abs(want)):
                raise ValueError(
                    f"kernel {spec.name!r}: bytes_moved is not multilinear in {names} "
                    f"({want} != {got} at {full}); the catalog cannot express its footprint"
                )
        footprint[dtype] = terms
    return {
        "description": spec.description,
        "module_sha256": module_sha256(module_file),
        "variants": [i.name for i in spec.triton_variants],
        "baselines": [i.name for i in spec.baselines],
        "negative_controls": [i.name for i in spec.negative_controls],
        "primary_baseline": spec.primary_baseline,
        "dtypes": dtypes,
        "params": {"required": required, "optional": [n for n in names if n not in required], "flags": flags},
        "shape_sets": {
            name: [{"params": {k: int(v) for k, v in s.params.items()}, "reason": s.reason} for s in shapes]
            for name, shapes in spec.shape_sets.items()
        },
        "footprint": footprint,
    }


def build() -> dict[str, Any]:
    from kernelscope import registry

    return {
        "generated_by": REGENERATE,
        "kernels": {
            name: _entry(registry.get(name), sys.modules[f"kernels.{name}"].__file__) for name in registry.available()
        },
    }


def render(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


# --- the reviewed tolerance record -------------------------------------------------------------------------

TOLERANCES = PATH.parent / "tolerances.json"
ACCEPT = "python -m kernelscope.catalog --accept-tolerances"


def declared_tolerances(spec) -> dict[str, dict[str, Any]]:
    """A kernel's tolerances as the record holds them: ``{dtype: {atol, rtol, reason}}``."""
    from kernelscope.spec import DTYPES

    return {
        name: {"atol": t.atol, "rtol": t.rtol, "reason": t.reason}
        for name, dtype in DTYPES.items()
        if (t := spec.tolerances.get(dtype)) is not None
    }


def recorded_tolerances(path: str | Path = TOLERANCES) -> dict[str, dict[str, dict[str, Any]]]:
    """The reviewed record: ``{kernel: {dtype: {atol, rtol, reason}}}`` (empty where there is none yet)."""
    path = Path(path)
    return json.loads(path.read_text())["kernels"] if path.exists() else {}


def update_tolerances(path: str | Path, specs: Mapping[str, Any], accept: tuple[str, ...] = ()) -> list[str]:
    """Rewrite the record at ``path`` for the kernels ``specs`` (name -> KernelSpec): what is not recorded yet is
    recorded as declared, what is no longer declared is dropped, the kernels in ``accept`` are recorded as
    declared; any other recorded tolerance keeps its reviewed value. Returns the kernels whose declared
    tolerances still differ from the record."""
    unknown = sorted(set(accept) - set(specs))
    if unknown:
        raise ValueError(
            f"--accept-tolerances names {unknown}, which kernels/ does not declare; it declares {sorted(specs)}"
        )
    record = recorded_tolerances(path)
    kernels, differ = {}, []
    for name, spec in sorted(specs.items()):
        declared = declared_tolerances(spec)
        reviewed = {} if name in accept else record.get(name, {})
        kernels[name] = {dtype: reviewed.get(dtype, value) for dtype, value in declared.items()}
        if kernels[name] != declared:
            differ.append(name)
    doc = {
        "about": "The reviewed tolerance of every kernel per dtype, with its reason (tests/test_kernels.py compares "
        f"the modules with it). `{REGENERATE}` adds new kernels and dtypes; a change to a recorded one is "
        f"recorded only by `{ACCEPT} <kernel>`, so that it is reviewed in the diff of this file.",
        "kernels": kernels,
    }
    results.write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelscope.catalog", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if kernels/catalog.json is stale")
    parser.add_argument("--out", default=str(PATH))
    parser.add_argument(
        "--accept-tolerances",
        nargs="+",
        default=(),
        metavar="KERNEL",
        help="record these kernels' tolerances as their modules declare them now (a deliberate change)",
    )
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = Path(args.out).read_text() if Path(args.out).exists() else ""
        if current != text:
            print(f"{args.out} is stale: the kernel modules changed; run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    results.write_text(args.out, text)
    from kernelscope import registry

    record = Path(args.out).parent / TOLERANCES.name
    try:
        differ = update_tolerances(record, registry.all_kernels(), tuple(args.accept_tolerances))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    for name in differ:
        print(
            f"kernels/{name}.py declares tolerances other than the reviewed ones in {record}: they stay as recorded, "
            f"and the tests fail, until you accept the change with `{ACCEPT} {name}`",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
