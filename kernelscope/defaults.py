"""The config's defaults, from the one place they are written: the config schema
(``workflow/schemas/config.schema.yaml``), which the Snakefile validates every config against. The timing
settings' dataclass (``kernelscope.timing.TimingSettings``) and the plan's resolved timing block
(``cases.resolved_timing``) both take their defaults from here. Pure: yaml only."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

CONFIG_SCHEMA = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.yaml"


@cache
def timing_defaults() -> dict[str, Any]:
    """Every timing setting's default, from the config schema (``definitions.timing``)."""
    schema = yaml.safe_load(CONFIG_SCHEMA.read_text())
    return {k: v["default"] for k, v in schema["definitions"]["timing"]["properties"].items() if "default" in v}


@cache
def sweep_defaults() -> dict[str, Any]:
    """Every sweep setting's default other than its timing blocks, from the config schema (``sweep``)."""
    schema = yaml.safe_load(CONFIG_SCHEMA.read_text())
    props = schema["properties"]["sweep"]["properties"]
    return {k: v["default"] for k, v in props.items() if "default" in v and not k.startswith("timing")}
