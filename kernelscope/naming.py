"""Names that both halves of the pipeline spell the same way: device keys and shape identifiers.

Pure (no torch, no kernels): planning, the measuring jobs and the reading side all import it, so it sits below
``cases``, ``catalog``, ``spec`` and ``runtime`` in the import graph (tests/test_reading_wall.py checks that
the package has no import cycle).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

INTERPRETER_KEY = "cpu-interpreter"
#: ``device: any-gpu``: a GPU plan for whichever CUDA device each job lands on (recorded per case)
ANY_GPU = "any-gpu"


def slug(name: str) -> str:
    """``'NVIDIA H200'`` -> ``'nvidia-h200'``: a path-safe device key."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def shape_id(params: Mapping[str, int]) -> str:
    """Path-safe identifier of a shape, e.g. ``M4096_N1000`` (used in result paths and wildcards)."""
    return "_".join(f"{k}{int(v)}" for k, v in params.items())
