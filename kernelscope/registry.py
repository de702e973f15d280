"""Discovery of kernel declarations: every module in the ``kernels`` package that defines ``KERNEL``.

Modules are imported one at a time and only when asked for, so a job for one kernel never depends on
another kernel's module importing cleanly.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from kernelscope import runtime
from kernelscope.spec import KernelSpec


def available() -> list[str]:
    """Names of the kernel modules in ``kernels/`` (without importing them)."""
    import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if not m.name.startswith("_"))


@cache
def get(name: str) -> KernelSpec:
    names = available()
    if name not in names:
        raise KeyError(f"unknown kernel {name!r}; kernels/ declares {names}")
    runtime.select_backend()  # before any @triton.jit is evaluated
    module = importlib.import_module(f"kernels.{name}")
    spec = getattr(module, "KERNEL", None)
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"kernels/{name}.py must define KERNEL = KernelSpec(...)")
    if spec.name != name:
        raise ValueError(
            f"kernels/{name}.py declares a kernel named {spec.name!r}; the module and kernel names must match"
        )
    return spec


def all_kernels() -> dict[str, KernelSpec]:
    return {name: get(name) for name in available()}
