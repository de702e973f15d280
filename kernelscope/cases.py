"""From the config to the list of cases (kernel × shape × dtype) and the specs file every job reads.

The workflow calls :func:`plan` while it builds the DAG and :func:`write_specs` in its first rule; every
later job reads its case from ``specs.json`` (config → specs → per-case results → tables → report), so
no job re-derives the plan from a config it may not see.

Results path grammar (relative to the working directory)::

    results/<device>/specs.json                                   resolved cases and settings
    results/<device>/environment.json                             software, hardware, provenance
    results/<device>/calibration.json                             measured copy bandwidth, matmul peaks
    results/<device>/correctness/<kernel>/<dtype>/<shape>.json    gate: every implementation, every seed
    results/<device>/sweep/<kernel>/<dtype>/<shape>.json          every launch config of every Triton variant
    results/<device>/timing/<kernel>/<dtype>/<shape>.json         samples and statistics, A/A floor
    results/<device>/profile/<kernel>/<dtype>/<shape>.json        CUDA kernels launched per implementation
    results/<device>/ncu/<kernel>/<dtype>/<shape>.json            Nsight Compute counters (optional stage)
    results/<device>/benchmarks/<stage>/<kernel>/<dtype>/<shape>.tsv   job wall time (Snakemake benchmark)
    reports/<device>/report.{md,html}, roofline.png, tables/*.csv
    reports/<device>/compare/<other>/report.{md,html}, comparison.csv   (optional: config compare_with)
    logs/<device>/<stage>/<kernel>/<dtype>/<shape>.log

``<device>`` is the GPU's name as a slug (``nvidia-h200``) or ``cpu-interpreter``, so a rerun on another
GPU never overwrites the first; ``<shape>`` is :attr:`kernelscope.spec.Shape.id` (``M4096_N1000``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelscope import registry, runtime
from kernelscope.spec import DTYPES, KernelSpec, Shape


class ConfigError(ValueError):
    """The config asks for something the kernels do not declare; the message names it."""


@dataclasses.dataclass(frozen=True)
class Case:
    kernel: str
    shape: str
    dtype: str

    @property
    def id(self) -> str:
        return f"{self.kernel}/{self.dtype}/{self.shape}"


#: config keys that select optional work without changing any measurement: left out of the hash, so that
#: profiling a few more cases with ncu, or comparing with another run, does not invalidate (and re-run)
#: every result of the plan
SELECTION_ONLY = ("ncu", "compare_with")


def config_hash(config: Mapping[str, Any]) -> str:
    measured = {k: v for k, v in config.items() if k not in SELECTION_ONLY}
    return hashlib.sha256(json.dumps(measured, sort_keys=True, default=str).encode()).hexdigest()[:16]


def device_key(config: Mapping[str, Any]) -> str:
    key = config.get("device", "auto")
    return runtime.detect_device_key() if key == "auto" else runtime.slug(key)


def shape_set_name(config: Mapping[str, Any]) -> str:
    """``auto``: the tiny ``cpu`` set under the interpreter, the ``gpu`` set on a CUDA device (whatever the
    results are labelled)."""
    name = config.get("shape_set", "auto")
    if name == "auto":
        return "cpu" if runtime.detect_device_key() == runtime.INTERPRETER_KEY else "gpu"
    return name


def _kernel_entries(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    kernels = registry.available()
    wanted = config.get("kernels") or {name: {} for name in kernels}
    unknown = sorted(set(wanted) - set(kernels))
    if unknown:
        raise ConfigError(f"config names unknown kernel(s) {unknown}; kernels/ declares {sorted(kernels)}")
    return {name: dict(entry or {}) for name, entry in wanted.items()}


def shapes_for(spec: KernelSpec, entry: Mapping[str, Any], set_name: str) -> list[Shape]:
    if entry.get("shapes"):
        return [Shape({k: int(v) for k, v in params.items() if k != "reason"},
                      str(params.get("reason", "given in the config"))) for params in entry["shapes"]]
    name = entry.get("shape_set", set_name)
    if name not in spec.shape_sets:
        raise ConfigError(f"kernel {spec.name!r} has no shape set {name!r}; it declares {sorted(spec.shape_sets)}")
    return list(spec.shape_sets[name])


def dtypes_for(spec: KernelSpec, entry: Mapping[str, Any]) -> list[str]:
    declared = [name for name, dt in DTYPES.items() if dt in spec.tolerances]
    chosen = entry.get("dtypes") or declared
    bad = [d for d in chosen if d not in declared]
    if bad:
        raise ConfigError(f"kernel {spec.name!r}: dtype(s) {bad} not supported; it declares tolerances for {declared}")
    return list(chosen)


def plan(config: Mapping[str, Any], key: str | None = None) -> list[Case]:
    key = key or device_key(config)
    return [Case(c["kernel"], c["shape"], c["dtype"]) for c in specs(config, key)["cases"]]


def specs(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The resolved plan: every case with its shape parameters and reason, and the stage settings."""
    interpreter = runtime.detect_device_key() == runtime.INTERPRETER_KEY
    set_name = shape_set_name(config)
    cases = []
    for name, entry in _kernel_entries(config).items():
        spec = registry.get(name)
        for shape in shapes_for(spec, entry, set_name):
            for dtype in dtypes_for(spec, entry):
                cases.append({
                    "kernel": name, "shape": shape.id, "params": dict(shape.params), "reason": shape.reason,
                    "dtype": dtype, "variants": [i.name for i in spec.triton_variants],
                    "baselines": [i.name for i in spec.baselines], "primary_baseline": spec.primary_baseline,
                })
    sweep = dict(config.get("sweep", {}))
    return {
        "device": key,
        # what the jobs must see: the detected hardware, which differs from `device` when the config
        # gives the results a label of its own (device: my-label)
        "hardware": runtime.detect_device_key(),
        "interpreter": interpreter,
        "shape_set": set_name,
        "config_hash": config_hash(config),
        "seeds": list(config.get("seeds", [0, 1, 2])),
        "timing": dict(config.get("timing_interpreter" if interpreter else "timing", {})),
        "sweep": {"timing": dict(sweep.get("timing_interpreter" if interpreter else "timing", {})),
                  "max_configs": sweep.get("max_configs_interpreter" if interpreter else "max_configs"),
                  "compile_workers": int(sweep.get("compile_workers", 4))},
        "profile": dict(config.get("profile", {})),
        "ncu": ncu_selection(config.get("ncu", False), cases),
        "calibration": dict(config.get("calibration", {})),
        "external_references": list(config.get("external_references", [])),
        "cases": cases,
    }


def ncu_selection(value: bool | Sequence[str], cases: Sequence[Mapping[str, Any]]) -> list[str]:
    """The cases (``kernel/dtype/shape``) the optional Nsight Compute stage profiles: all of them for
    ``true``, none for ``false``, else those named (a bare kernel name selects all its cases)."""
    ids = [f"{c['kernel']}/{c['dtype']}/{c['shape']}" for c in cases]
    if isinstance(value, bool):
        return ids if value else []
    unknown = [v for v in value if v not in ids and v not in {c["kernel"] for c in cases}]
    if unknown:
        raise ConfigError(f"ncu names {unknown}, which are not cases of this plan (kernel/dtype/shape or a kernel "
                          f"name); planned cases include {ids[:4]}")
    return [i for i in ids if i in value or i.split("/")[0] in value]


def write_specs(config: Mapping[str, Any], key: str, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(specs(config, key), indent=2) + "\n")


def load_case(specs_doc: Mapping[str, Any], kernel: str, shape: str, dtype: str) -> tuple[KernelSpec, Shape, dict]:
    for case in specs_doc["cases"]:
        if (case["kernel"], case["shape"], case["dtype"]) == (kernel, shape, dtype):
            return registry.get(kernel), Shape(case["params"], case["reason"]), case
    raise ConfigError(f"case {kernel}/{dtype}/{shape} is not in the specs for device {specs_doc['device']!r}")
