"""Helpers that kernel modules use to declare their baselines consistently."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch


@cache
def _configure_dynamo() -> None:
    """Room for one compiled graph per shape x dtype a process sees, and an error (never a silent eager
    fallback) if that room runs out: a baseline named ``torch_compile`` must run compiled code."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # renamed across torch releases: detect, don't version-check
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 64))
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True


def compiled(fn: Callable[..., torch.Tensor], *args: torch.Tensor) -> Callable[[], torch.Tensor]:
    """A ``torch.compile`` baseline closure over ``args``.

    Dynamo's caches are reset first, so every prepared closure compiles afresh (its first call is the
    compile time the timing stage reports; Inductor's on-disk cache still serves repeats). Keeping dynamo's
    state across preparations was tried: a Triton kernel run later in the same process under the
    interpreter then failed (KeyError on the kernel's name; cause not established). ``fullgraph=True`` makes a
    graph break an error instead of a quiet partial fallback.
    """
    _configure_dynamo()
    torch._dynamo.reset()
    compiled_fn = torch.compile(fn, dynamic=False, fullgraph=True)
    return lambda: compiled_fn(*args)


def _loaded_inductor_modules() -> list:
    """The modules Inductor's code cache has loaded in this process (a list or a dict, by torch release)."""
    try:
        from torch._inductor.codecache import PyCodeCache
    except ImportError:  # no Inductor in this torch
        return []
    for name in ("modules", "cache"):
        held = getattr(PyCodeCache, name, None)
        if isinstance(held, dict):
            return list(held.values())
        if isinstance(held, list | tuple):
            return list(held)
    return []


def _launcher_text(config) -> str:
    kwargs = getattr(config, "kwargs", None) or {}
    parts = [f"{k}={v}" for k, v in sorted(kwargs.items())]
    parts += [f"{k}={getattr(config, k)}" for k in ("num_warps", "num_stages") if getattr(config, k, None) is not None]
    return ", ".join(parts)


def inductor_choices(modules: list | None = None) -> dict[str, str]:
    """Kernel name -> the launch config Inductor runs it with, for every Triton kernel of ``modules`` (default:
    every module Inductor loaded in this process). Inductor benchmarks a pointwise kernel's candidate configs at
    its first call and keeps the fastest, so two processes can run one kernel of one name at different configs
    (docs/timing-basis.md); a kernel still holding several candidates reads "N candidates"."""
    out: dict[str, str] = {}
    for module in _loaded_inductor_modules() if modules is None else modules:
        for name, obj in sorted(vars(module).items()):
            launchers = getattr(obj, "launchers", None)
            if not isinstance(launchers, list) or not launchers:
                continue
            if len(launchers) == 1:
                out[name] = _launcher_text(getattr(launchers[0], "config", None))
            else:
                out[name] = f"{len(launchers)} candidates"
    return out
