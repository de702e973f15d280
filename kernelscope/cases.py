"""From the config to the list of cases (kernel × shape × dtype) and the specs file every job reads.

The workflow calls :func:`plan` while it builds the DAG and :func:`write_specs` in its first rule; every
later job reads its case from ``specs.json`` (config → specs → per-case results → tables → report), so
no job re-derives the plan from a config it may not see.

Planning imports neither torch nor triton and asks nothing of the machine that parses the Snakefile
(beyond ``nvidia-smi`` for ``device: auto``): the kernels' declarations come from ``kernels/catalog.json``
(:mod:`kernelscope.catalog`), the target device and shape set from the config. A login node without a
GPU plans a GPU run when told the device (``--config device=nvidia-h200``). Every mistake in the config is
refused here, before any job runs, with the field, the value and what is allowed.

Results path grammar (relative to the working directory; the one place it is written down)::

    results/<device>/specs.json                                   resolved cases and settings
    results/<device>/environment.json                             software, hardware, provenance
    results/<device>/calibration.json                             measured copy bandwidth, matmul peaks
    results/<device>/correctness/<kernel>/<dtype>/<shape>.json    gate: every implementation, every seed
    results/<device>/sweep/<kernel>/<dtype>/<shape>.json          every launch config of every Triton variant
    results/<device>/timing/<kernel>/<dtype>/<shape>.json         samples and statistics, A/A floor
    results/<device>/profile/<kernel>/<dtype>/<shape>.json        CUDA kernels launched per implementation
    results/<device>/ncu/<kernel>/<dtype>/<shape>.json            Nsight Compute counters (optional stage)
    results/<device>/jobtimes/<stage>/<kernel>/<dtype>/<shape>.tsv     job wall time (Snakemake ``benchmark:``)
    reports/<device>/report.{md,html}, run.json, plots/*.svg, tables/*.csv
    reports/<device>/compare/<other>/report.{md,html}, comparison.csv   (optional: config compare_with)
    reports/index.{md,html}                                       published runs (scripts/publish-reports.sh)
    logs/<device>/<stage>/<kernel>/<dtype>/<shape>.log

``<device>`` is the GPU's name as a slug (``nvidia-h200``) or ``cpu-interpreter``, so a rerun on another
GPU never overwrites the first; ``<shape>`` is :attr:`kernelscope.spec.Shape.id` (``M4096_N1000``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelscope import catalog, results
from kernelscope.defaults import CONFIG_SCHEMA, sweep_defaults, timing_defaults  # noqa: F401 - cases.CONFIG_SCHEMA for callers
from kernelscope.naming import ANY_GPU, INTERPRETER_KEY, shape_id, slug  # noqa: F401 - cases.ANY_GPU etc. for callers

#: GPU memory of the devices the planner knows by key, in GiB (nvidia-smi's memory.total); other GPUs are
#: checked only when the config gives ``device_memory_gib``, an interpreter run against the host's memory
KNOWN_MEMORY_GIB = {
    "nvidia-h200": 143771 / 1024,
    "nvidia-h100-80gb-hbm3": 81559 / 1024,
    "nvidia-a100-sxm4-80gb": 81920 / 1024,
    "nvidia-a100-sxm4-40gb": 40960 / 1024,
}
#: the config's schema: the one source of the timing settings' defaults (``definitions.timing``)
#: timing settings whose lower bound must not exceed their upper bound
ORDERED_SETTINGS = (("min_samples", "max_samples"), ("min_time_s", "max_time_s"))


class ConfigError(ValueError):
    """The config asks for something the kernels do not declare; the message names it, and ``path`` the
    config key it is about (``("kernels", "softmax", "dtypes")``), for the workflow to say where it was set."""

    def __init__(self, message: str, path: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.path = tuple(path)


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
SELECTION_ONLY = ("ncu", "compare_with", "label")


def _digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_hash(config: Mapping[str, Any]) -> str:
    return _digest({k: v for k, v in config.items() if k not in SELECTION_ONLY})


#: what specs.json says about the plan as a whole, not about one case: no case's job reads it
PLAN_WIDE = ("cases", "config_hash", "ncu")
#: what the calibration job reads of specs.json
CALIBRATION_READS = ("device", "hardware", "calibration")


def job_digests(doc: Mapping[str, Any]) -> dict[str, str]:
    """A digest of what each job reads of the specs ``doc``: per case (``kernel/dtype/shape``) its own entry and
    the stage settings, and for ``calibration`` the device and its settings. The rules take it as a param and
    specs.json as ``ancient``, so a job reruns when what it reads changes, not whenever specs.json is rewritten:
    a run narrowed to another kernel rewrites it, and must leave the finished results of other cases alone."""
    settings = {k: v for k, v in doc.items() if k not in PLAN_WIDE}
    digests = {f"{c['kernel']}/{c['dtype']}/{c['shape']}": _digest({**settings, "case": c}) for c in doc["cases"]}
    return {**digests, "calibration": _digest({k: doc.get(k) for k in CALIBRATION_READS})}


def host_device_key() -> str:
    """``device: auto``: the first GPU of the machine that plans, from ``nvidia-smi`` (no torch, no CUDA
    initialisation), or the interpreter where there is none."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return INTERPRETER_KEY
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = (
                subprocess.run(
                    [smi, "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=True,
                )
                .stdout.strip()
                .splitlines()
            )
            if out and out[0].strip():
                return slug(out[0])
        except (subprocess.SubprocessError, OSError):
            pass
    return INTERPRETER_KEY


def device_key(config: Mapping[str, Any]) -> str:
    """The target device: ``auto`` asks the planning machine; any other value is taken as given, so a
    GPU-less login node can plan for ``nvidia-h200`` (or ``any-gpu``)."""
    key = config.get("device", "auto")
    return host_device_key() if key == "auto" else slug(key)


def results_key(config: Mapping[str, Any]) -> str:
    """The ``results/<key>/`` and ``reports/<key>/`` name: the config's ``label`` where given (a second run of
    one device, e.g. on another card, next to the first), else the target device's key."""
    return slug(config["label"]) if config.get("label") else device_key(config)


def rerun_calibration(config: Mapping[str, Any], target: str, root: str | Path = ".") -> str | None:
    """The rerun calibration record for a run (``kernelscope.reruns``): the config's ``rerun_calibration``
    (which must exist), else ``calibration/<target>.json`` where it exists, else None."""
    given = config.get("rerun_calibration")
    if given:
        if not Path(root, given).is_file():
            raise ConfigError(
                f"rerun_calibration: {given} does not exist (python -m kernelscope.reruns writes one)",
                ("rerun_calibration",),
            )
        return str(given)
    published = Path("calibration") / f"{target}.json"
    return str(published) if Path(root, published).is_file() else None


def is_interpreter(key: str) -> bool:
    return key == INTERPRETER_KEY


def shape_set_name(config: Mapping[str, Any], key: str) -> str:
    """``auto``: the tiny ``cpu`` set for the interpreter, the ``gpu`` set for a GPU target."""
    name = config.get("shape_set", "auto")
    if name == "auto":
        return "cpu" if is_interpreter(key) else "gpu"
    return name


def _kernel_entries(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    kernels = catalog.load()["kernels"]
    wanted = config.get("kernels") or {name: {} for name in kernels}
    unknown = sorted(set(wanted) - set(kernels))
    if unknown:
        raise ConfigError(
            f"config names unknown kernel(s) {unknown}; kernels/ declares {sorted(kernels)}", ("kernels", unknown[0])
        )
    return {name: dict(entry or {}) for name, entry in wanted.items()}


def check_shape(kernel: str, entry: Mapping[str, Any], params: Mapping[str, Any], index: int = 0) -> dict[str, int]:
    """A config-given shape's parameters (``kernels.<kernel>.shapes[index]``), refused unless each is a
    declared one with a valid value: sizes are integers >= 1, switches (declared only as 0 or 1) are 0 or 1,
    and none is missing."""
    field = f"kernels.{kernel}.shapes"
    path = ("kernels", kernel, "shapes", index)
    declared = entry["params"]
    allowed = declared["required"] + declared["optional"]
    given = {k: v for k, v in params.items() if k != "reason"}
    missing = [n for n in declared["required"] if n not in given]
    if missing:
        raise ConfigError(
            f"{field}: shape {dict(given)} lacks {missing}; {kernel} needs {declared['required']} "
            f"(optional: {declared['optional']})",
            path,
        )
    extra = [n for n in given if n not in allowed]
    if extra:
        raise ConfigError(
            f"{field}: shape {dict(given)} has unknown parameter(s) {extra}; {kernel} takes {allowed}",
            (*path, extra[0]),
        )
    for name, value in given.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{field}: {name}={value!r} in {dict(given)} is not an integer", (*path, name))
        if name in declared["flags"] and value not in (0, 1):
            raise ConfigError(f"{field}: {name}={value} in {dict(given)} is a switch; allowed: 0 or 1", (*path, name))
        if name not in declared["flags"] and value < 1:
            raise ConfigError(
                f"{field}: {name}={value} in {dict(given)} is a size; allowed: an integer >= 1", (*path, name)
            )
    return dict(given)


def shapes_for(name: str, entry: Mapping[str, Any], selection: Mapping[str, Any], set_name: str) -> list[dict]:
    """The shapes of one kernel: ``[{"params": {...}, "reason": ...}]``."""
    if selection.get("shapes"):
        return [
            {
                "params": check_shape(name, entry, params, index),
                "reason": str(params.get("reason", "given in the config")),
            }
            for index, params in enumerate(selection["shapes"])
        ]
    set_name = selection.get("shape_set", set_name)
    if set_name not in entry["shape_sets"]:
        raise ConfigError(
            f"kernels.{name}.shape_set: kernel {name!r} has no shape set {set_name!r}; it declares "
            f"{sorted(entry['shape_sets'])}",
            ("kernels", name, "shape_set"),
        )
    return list(entry["shape_sets"][set_name])


def dtypes_for(name: str, entry: Mapping[str, Any], selection: Mapping[str, Any]) -> list[str]:
    declared = entry["dtypes"]
    chosen = selection.get("dtypes") or declared
    bad = [d for d in chosen if d not in declared]
    if bad:
        raise ConfigError(
            f"kernels.{name}.dtypes: kernel {name!r}: dtype(s) {bad} not supported; it declares "
            f"tolerances for {declared}",
            ("kernels", name, "dtypes"),
        )
    return list(chosen)


def implementations_for(name: str, entry: Mapping[str, Any], selection: Mapping[str, Any]) -> tuple[list, list]:
    """The Triton variants and baselines the config selects (default: all). The primary baseline is always
    run: the A/A blocks and every ranking are measured against it."""
    chosen = {}
    for field in ("variants", "baselines"):
        names = selection.get(field) or entry[field]
        unknown = [n for n in names if n not in entry[field]]
        if unknown:
            raise ConfigError(
                f"kernels.{name}.{field}: {unknown} not declared by kernel {name!r}; it declares {entry[field]}",
                ("kernels", name, field),
            )
        chosen[field] = [n for n in entry[field] if n in names]
    if entry["primary_baseline"] not in chosen["baselines"]:
        raise ConfigError(
            f"kernels.{name}.baselines: {chosen['baselines']} leaves out {entry['primary_baseline']!r}, "
            f"the primary baseline that every variant is ranked against; add it",
            ("kernels", name, "baselines"),
        )
    return chosen["variants"], chosen["baselines"]


def host_memory_gib() -> float | None:
    """The planning machine's physical memory (None where the OS does not say): what an interpreter run,
    whose tensors live in host memory, has."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, OSError, ValueError):
        return None


def device_memory_gib(config: Mapping[str, Any], key: str) -> float | None:
    if config.get("device_memory_gib"):
        return config["device_memory_gib"]
    return host_memory_gib() if is_interpreter(key) else KNOWN_MEMORY_GIB.get(key)


def check_fits(case: Mapping[str, Any], entry: Mapping[str, Any], memory_gib: float | None, key: str) -> None:
    if memory_gib is None:
        return
    need = catalog.footprint_bytes(entry, case["params"], case["dtype"])
    if need > memory_gib * 2**30:
        where = f"{key} (this machine's memory)" if is_interpreter(key) else key
        raise ConfigError(
            f"kernels.{case['kernel']}.shapes: {case['shape']} at {case['dtype']} needs at least "
            f"{need / 2**30:.1f} GiB for its inputs and output; {where} has {memory_gib:.1f} GiB",
            ("kernels", case["kernel"], "shapes"),
        )


def check_timing(config: Mapping[str, Any]) -> None:
    """Bounds the schema cannot state: each lower bound at most its upper bound."""
    sweep = config.get("sweep", {})
    blocks = {
        "timing": config.get("timing", {}),
        "timing_interpreter": config.get("timing_interpreter", {}),
        "sweep.timing": sweep.get("timing", {}),
        "sweep.timing_interpreter": sweep.get("timing_interpreter", {}),
    }
    for field, block in blocks.items():
        for low, high in ORDERED_SETTINGS:
            if low in block and high in block and block[low] > block[high]:
                raise ConfigError(
                    f"{field}: {low}={block[low]} exceeds {high}={block[high]}; allowed: {low} <= {high}",
                    (*field.split("."), low),
                )


def resolved_timing(block: Mapping[str, Any]) -> dict[str, Any]:
    """A timing block of the config with every setting it leaves out at its default: what specs.json records,
    so that two plans of the same settings read the same however their configs spell them, and no reader
    applies a default of its own."""
    return {**timing_defaults(), **block}


def check_compare_with(config: Mapping[str, Any], key: str, results_root: str | Path = "results") -> list[str]:
    """The runs to compare with: device keys other than this run's, each with a copied ``results/<key>/``
    (its ``specs.json`` at least) under ``results_root``."""
    others = config.get("compare_with", [])
    field = ("compare_with",)
    if not isinstance(others, list) or not all(isinstance(o, str) for o in others):
        raise ConfigError(f"compare_with: {others!r} is not a list of device keys (compare_with: [nvidia-h100])", field)
    bad = [o for o in others if o != slug(o)]
    if bad:
        raise ConfigError(
            f"compare_with: {bad} are not device keys (results/<device> directory names such as "
            f"{[slug(o) for o in bad]})",
            field,
        )
    if key in others:
        raise ConfigError(f"compare_with names this run's own results ({key}); name other runs' devices", field)
    missing = [o for o in others if not (Path(results_root) / o / "specs.json").is_file()]
    if missing:
        raise ConfigError(
            f"compare_with: {', '.join(f'{results_root}/{o}/specs.json' for o in missing)} not found: copy the "
            f"other run's results/<device>/ directory (from the machine that ran it) to "
            f"{', '.join(f'{results_root}/{o}/' for o in missing)} here, then rerun",
            field,
        )
    return list(others)


def plan(config: Mapping[str, Any], key: str | None = None) -> list[Case]:
    key = key or device_key(config)
    return [Case(c["kernel"], c["shape"], c["dtype"]) for c in specs(config, key)["cases"]]


def specs(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The resolved plan: every case with its shape parameters and reason, and the stage settings."""
    interpreter = is_interpreter(key)
    set_name = shape_set_name(config, key)
    check_timing(config)
    check_compare_with(config, results_key(config) if config.get("label") else key)
    memory = device_memory_gib(config, key)
    kernels = catalog.load()["kernels"]
    cases = []
    for name, selection in _kernel_entries(config).items():
        entry = kernels[name]
        variants, baselines = implementations_for(name, entry, selection)
        dtypes = dtypes_for(name, entry, selection)
        for shape in shapes_for(name, entry, selection, set_name):
            for dtype in dtypes:
                case = {
                    "kernel": name,
                    "shape": shape_id(shape["params"]),
                    "params": dict(shape["params"]),
                    "reason": shape["reason"],
                    "dtype": dtype,
                    "variants": variants,
                    "baselines": baselines,
                    "primary_baseline": entry["primary_baseline"],
                }
                check_fits(case, entry, memory, key)
                cases.append(case)
    sweep = dict(config.get("sweep", {}))
    sweep_default = sweep_defaults()
    return {
        "device": slug(config["label"]) if config.get("label") else key,
        # what the jobs must see: the target device (any CUDA device for any-gpu; each job records its own)
        "hardware": key,
        "interpreter": interpreter,
        "shape_set": set_name,
        "config_hash": config_hash(config),
        "seeds": list(config.get("seeds", [0, 1, 2])),
        "timing": resolved_timing(config.get("timing_interpreter" if interpreter else "timing", {})),
        "sweep": {
            "timing": resolved_timing(sweep.get("timing_interpreter" if interpreter else "timing", {})),
            "max_configs": sweep.get("max_configs_interpreter" if interpreter else "max_configs"),
            "compile_workers": int(sweep.get("compile_workers", sweep_default["compile_workers"])),
            "keep_default_within": float(sweep.get("keep_default_within", sweep_default["keep_default_within"])),
        },
        "profile": dict(config.get("profile", {})),
        "ncu": ncu_selection(config.get("ncu", False), cases),
        "calibration": dict(config.get("calibration", {})),
        "limits": {"implementation_s": config.get("implementation_time_limit_s", 900)},
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
        raise ConfigError(
            f"ncu names {unknown}, which are not cases of this plan (kernel/dtype/shape or a kernel "
            f"name); planned cases include {ids[:4]}",
            ("ncu",),
        )
    return [i for i in ids if i in value or i.split("/")[0] in value]


def write_specs(config: Mapping[str, Any], key: str, path: str | Path) -> None:
    results.write_text(path, json.dumps(specs(config, key), indent=2) + "\n")


def load_case(specs_doc: Mapping[str, Any], kernel: str, shape: str, dtype: str):
    """``(KernelSpec, Shape, case)`` for a job: the kernel module's declaration, narrowed to the
    implementations the plan selected. Imports torch (jobs only, never planning)."""
    from kernelscope import registry
    from kernelscope.spec import Shape

    for case in specs_doc["cases"]:
        if (case["kernel"], case["shape"], case["dtype"]) == (kernel, shape, dtype):
            spec = registry.get(kernel)
            declared = {i.name for i in spec.implementations}
            stale = [n for n in case["variants"] + case["baselines"] if n not in declared]
            if stale:
                raise ConfigError(
                    f"specs name implementation(s) {stale} that kernels/{kernel}.py does not declare: "
                    f"kernels/catalog.json is stale; run `{catalog.REGENERATE}` and rerun"
                )
            keep = set(case["variants"]) | set(case["baselines"])
            spec = dataclasses.replace(spec, implementations=[i for i in spec.implementations if i.name in keep])
            return spec, Shape(case["params"], case["reason"]), case
    raise ConfigError(f"case {kernel}/{dtype}/{shape} is not in the specs for device {specs_doc['device']!r}")
