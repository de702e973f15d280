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
