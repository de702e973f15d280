"""Discovery of kernel declarations: every module in the ``kernels`` package that defines ``KERNEL``."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from kernelscope import runtime
from kernelscope.spec import KernelSpec


@cache
def all_kernels() -> dict[str, KernelSpec]:
    runtime.select_backend()  # before any @triton.jit is evaluated
    import kernels

    found: dict[str, KernelSpec] = {}
    for info in sorted(pkgutil.iter_modules(kernels.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"kernels.{info.name}")
        spec = getattr(module, "KERNEL", None)
        if not isinstance(spec, KernelSpec):
            raise TypeError(f"kernels/{info.name}.py must define KERNEL = KernelSpec(...)")
        if spec.name in found:
            raise ValueError(f"kernel name {spec.name!r} is declared twice (kernels/{info.name}.py)")
        found[spec.name] = spec
    return found


def get(name: str) -> KernelSpec:
    kernels = all_kernels()
    try:
        return kernels[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; kernels/ declares {sorted(kernels)}") from None
