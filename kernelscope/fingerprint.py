"""What two runs must share before their numbers can be ranked against each other, read from their
environment records (``results/<device>/environment.json``). Pure: the reading side (claims, compare, report)
uses it on archived records, with no GPU software stack installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fingerprint(env: Mapping[str, Any]) -> dict[str, Any]:
    """The fields two runs must share before their numbers can be ranked against each other."""
    gpu = env.get("gpu") or {}
    return {
        "gpu": gpu.get("name"),
        "backend": env.get("backend"),
        "torch": env.get("torch"),
        "triton": env.get("triton"),
        "cuda_runtime": env.get("cuda_runtime"),
        "driver": gpu.get("driver"),
    }
