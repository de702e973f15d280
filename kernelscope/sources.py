"""The source files a kernel's measurements depend on: its module and every module of this repository it
imports, transitively (``kernels/softmax.py`` -> ``kernelscope/heuristics.py``, ``kernelscope/spec.py`` ...).

Found by reading the import statements with :mod:`ast`, never by importing, so planning (which makes these
files the inputs of every per-case rule) stays torch-free. Only the repository's own packages
(:data:`PACKAGES`) are followed; torch, triton and the standard library are recorded in the environment
record instead. The per-case records carry :func:`digest` of these files, so a change to any of them is a
"code changed" in comparisons, and Snakemake reruns the kernel's jobs when one of them changes.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

#: top-level packages of this repository; imports of anything else are not followed
PACKAGES = ("kernels", "kernelscope")
ROOT = Path(__file__).resolve().parent.parent


def _module_file(root: Path, dotted: str) -> Path | None:
    """``kernelscope.spec`` -> ``root/kernelscope/spec.py`` (or the package's ``__init__.py``), if it is ours."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES:
        return None
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(root: Path, path: Path) -> set[Path]:
    """The repository's module files that ``path`` imports directly, with the packages they sit in."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .spec import y
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # `from kernelscope import runtime` imports the submodule kernelscope/runtime.py
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):  # importing a.b.c imports a and a.b first
                file = _module_file(root, ".".join(parts[:end]))
                if file is not None:
                    found.add(file)
    return found


@cache
def _closure(root: Path, start: Path) -> tuple[str, ...]:
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(_imported(root, path) - seen)
    return tuple(sorted(p.relative_to(root).as_posix() for p in seen))


def kernel_sources(kernel: str, root: str | Path = ROOT) -> list[str]:
    """Paths (relative to ``root``, sorted) of ``kernels/<kernel>.py`` and every repository module it
    imports, transitively."""
    root = Path(root).resolve()
    start = root / "kernels" / f"{kernel}.py"
    if not start.is_file():
        raise FileNotFoundError(f"{start} does not exist")
    return list(_closure(root, start))


def digest(paths: list[str], root: str | Path = ROOT) -> str:
    """sha256 over each file's path and contents, in the given order."""
    h = hashlib.sha256()
    for rel in paths:
        h.update(rel.encode() + b"\0" + (Path(root) / rel).read_bytes() + b"\0")
    return h.hexdigest()


def kernel_sources_sha256(kernel: str, root: str | Path = ROOT) -> str:
    return digest(kernel_sources(kernel, root), root)
