"""``python -m kernelscope <stage> ...``: the command each workflow rule runs.

Every stage reads its case from ``specs.json`` and writes one JSON file. A failing implementation is
recorded inside that file; the job itself fails only on bad input (unknown case, wrong device), with a
message that names what is wrong. Output is written atomically, so an interrupted job leaves no
half-written result for Snakemake to mistake for a finished one.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_MAIN_STARTED = time.perf_counter()
#: wall-clock start of this job (epoch seconds): a run's wall time is its first job's start to its last job's end
_STARTED_AT = time.time()
#: seconds from the start of main to the end of each named phase of a per-case job (recorded in job_s, so a
#: GPU session can see where its per-job time goes: most of it is not the measurement)
_PHASES: dict[str, float] = {}

# torch.compile compiles in this process instead of starting a pool of compile workers: one small graph
# per job gains nothing from the pool, and starting and stopping it cost seconds of every GPU job (it is
# read when Inductor is imported, so it is set before anything imports torch).
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
_TEMP_DIRS: list[str] = []


def _cold_caches() -> dict[str, str]:
    """Fresh Triton and Inductor cache directories for this process, so first-call times are cold
    compiles rather than cache hits from an earlier job."""
    root = tempfile.mkdtemp(prefix="kernelscope-cold-")
    _TEMP_DIRS.append(root)
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    dirs = {"TRITON_CACHE_DIR": os.path.join(root, "triton"), "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}
    os.environ.update(dirs)
    return dirs


def _write_json(path: str, doc: dict[str, Any]) -> None:
    """The job's result, written atomically (``results.atomic``); from the rename on the job cannot be
    interrupted (see below)."""
    from kernelscope import results

    with results.atomic(path) as tmp:
        tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        _ignore_interrupts()


def _ignore_interrupts() -> None:
    """Once its result is in place, the job only exits: an interrupt of the workflow (SIGTERM from `kill` or a
    scheduler's time limit, SIGINT from Ctrl-C) no longer ends it, so it exits 0 and Snakemake records the result
    as finished. Ended by the signal between the rename and its exit, it would count as a failed job, and
    Snakemake deletes a failed job's output as possibly corrupt: a finished result thrown away. The rules
    `exec` this process, so no shell stands between it and Snakemake to die of the signal instead. Only the
    main thread can change how signals are handled; the watchdog (kernelscope.faults) writes from its own
    thread and ends the process at once."""
    if threading.current_thread() is threading.main_thread():
        for interrupt in (signal.SIGTERM, signal.SIGINT):
            signal.signal(interrupt, signal.SIG_IGN)


def _load(path: str) -> dict[str, Any]:
    from kernelscope import results

    try:
        return results.load(path)
    except FileNotFoundError:
        sys.exit(f"kernelscope: {path} does not exist")
    except results.CorruptResult as exc:
        sys.exit(f"kernelscope: {exc}")


def _case_header(specs: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import triton

    from kernelscope import container, environment, gpus, registry, runtime, sources
    from kernelscope.spec import Shape

    # imported, so its source file is known wherever the package is installed
    declared = registry.get(case["kernel"])
    source = sys.modules[f"kernels.{case['kernel']}"].__file__
    root = Path(source).resolve().parent.parent
    kernel_sources = sources.kernel_sources(case["kernel"], root)
    return {
        "device": specs["device"],
        "hardware": runtime.runtime_device_key(),
        "kernel": case["kernel"],
        "shape": case["shape"],
        "params": case["params"],
        "reason": case["reason"],
        "dtype": case["dtype"],
        "interpreter": specs["interpreter"],
        "torch": torch.__version__,
        "triton": triton.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # the module alone (what records before kernel_sources_sha256 carry), and the module with every
        # module of this repository it imports: what comparisons call a code change
        "kernel_module_sha256": container.sha256_file(source),
        "kernel_sources": kernel_sources,
        "kernel_sources_sha256": sources.digest(kernel_sources, root),
        # the card this job ran on and its GPU-lock sections (None under the interpreter)
        "gpu": gpus.summary(),
        "job_started_at": _STARTED_AT,
        "job_ended_at": time.time(),
        # the commit of this job's code: a run resumed over several sessions can span commits
        "git": environment.git_info(),
        # the stage's part of the job's wall time (the Snakemake job-time file, results/<device>/jobtimes/, has
        # the whole, start and exit included)
        "job_s": {"stage": time.perf_counter() - _MAIN_STARTED, **_PHASES},
        # what the reading side needs of the kernel's declaration (kernelscope.spec.KernelSpec.declaration):
        # the report and comparisons read it here, never from the modules installed when they are read
        "declaration": declared.declaration(Shape(case["params"], case["reason"]), case["dtype"]),
    }


#: stages that read results and measure nothing: they import neither torch, triton nor the kernel modules
READING_STAGES = ("report", "compare", "index")
#: stages that run the torch.compile baselines
_TORCH_COMPILE_STAGES = ("correctness", "timing", "profile", "ncu-target")


def _resolve(args) -> tuple[dict, Any, Any, Any, dict]:
    from kernelscope import cases, runtime
    from kernelscope.spec import DTYPES

    specs = _load(args.specs)
    runtime.check_device_key(specs.get("hardware", specs["device"]))
    spec, shape, case = cases.load_case(specs, args.kernel, args.shape, args.dtype)
    if runtime.select_backend() == "cuda":
        import torch

        # the CUDA context (a second or more) is made here, before any GPU lock, not inside a locked section
        torch.empty(1, device="cuda")
    if args.stage in _TORCH_COMPILE_STAGES and any(i.kind == "compile" for i in spec.implementations):
        # torch.compile's first use imports Dynamo and Inductor (seconds of CPU); done here, before any GPU
        # lock is taken, so that no sampler on this card waits for an import
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    from kernelscope import faults

    # a hang that only ending the process can stop still leaves this job's result (kernelscope.faults)
    faults.configure(
        specs.get("limits", {}).get("implementation_s"),
        salvage=lambda doc: _write_json(args.out, {**_case_header(specs, case), **doc}),
    )
    # imports (torch, triton, the kernel module) and CUDA initialisation (the device-key check)
    _PHASES["setup"] = time.perf_counter() - _MAIN_STARTED
    return specs, spec, shape, DTYPES[args.dtype], case


def cmd_environment(args) -> None:
    from kernelscope import environment, runtime

    specs = _load(args.specs)
    runtime.check_device_key(specs.get("hardware", specs["device"]))
    extra = json.loads(args.extra) if args.extra else {}
    _write_json(args.out, environment.record(specs["device"], specs["config_hash"], extra))


def cmd_reruns(args) -> None:
    from kernelscope import reruns

    specs = _load(args.specs)
    if args.source:
        record = {**reruns.load_record(args.source), "status": "ok", "source": args.source}
    else:
        record = {
            "status": "none",
            "reason": f"no rerun calibration for {specs.get('hardware', specs['device'])}: no "
            "calibration/<device>.json and no config rerun_calibration",
        }
    _write_json(args.out, {"device": specs["device"], **record})


def cmd_calibrate(args) -> None:
    from kernelscope import calibration, gpus, runtime

    specs = _load(args.specs)
    runtime.check_device_key(specs.get("hardware", specs["device"]))
    dtypes = specs["calibration"].get("dtypes", ["float16", "bfloat16", "float32"])
    with gpus.exclusive("calibrate"):
        result = calibration.calibrate(dtypes)
    _write_json(
        args.out,
        {
            "device": specs["device"],
            **result,
            "gpu": gpus.summary(),
            "job_started_at": _STARTED_AT,
            "job_ended_at": time.time(),
        },
    )


def cmd_correctness(args) -> None:
    from kernelscope import correctness, registry

    specs, spec, shape, dtype, case = _resolve(args)
    # the kernel's every implementation, beside those the plan selected: a control sits out where its variant would
    declared = registry.get(spec.name).implementations
    result = correctness.check_case(spec, shape, dtype, specs["seeds"], declared)
    _write_json(args.out, {**_case_header(specs, case), **result})


def cmd_sweep(args) -> None:
    from kernelscope import sweep, timing

    specs, spec, shape, dtype, case = _resolve(args)
    settings = timing.TimingSettings.from_config(specs["sweep"]["timing"])
    result = sweep.sweep_case(
        spec,
        shape,
        dtype,
        settings,
        specs["sweep"].get("max_configs"),
        compile_workers=int(specs["sweep"].get("compile_workers") or 1),
        keep_default_within=float(specs["sweep"].get("keep_default_within", 0.0)),
    )
    _write_json(args.out, {**_case_header(specs, case), "cold_caches": args.cold_caches, **result})


def cmd_timing(args) -> None:
    from kernelscope import gpus, sweep, timing, timing_stage

    specs, spec, shape, dtype, case = _resolve(args)
    settings = timing.TimingSettings.from_config(specs["timing"])
    gate = _load(args.correctness)
    failed = {r["implementation"]: r.get("failure") for r in gate["implementations"] if r.get("ok") is False}
    timing.prepare_device_basis(lambda: gpus.shared("device basis"))
    seed_case = any(
        (r.get("kernel"), r.get("shape"), r.get("dtype")) == (case["kernel"], case["shape"], case["dtype"])
        for r in specs.get("external_references", [])
    )
    result = timing_stage.time_case(
        spec,
        shape,
        dtype,
        sweep.best_configs(_load(args.sweep)),
        settings,
        failed_correctness=failed,
        seed_method=seed_case,
    )
    _write_json(args.out, {**_case_header(specs, case), "cold_caches": args.cold_caches, **result})


def cmd_profile(args) -> None:
    from kernelscope import profiling, sweep

    specs, spec, shape, dtype, case = _resolve(args)
    result = profiling.profile_case(
        spec, shape, dtype, sweep.best_configs(_load(args.sweep)), int(specs["profile"].get("calls", 5))
    )
    _write_json(args.out, {**_case_header(specs, case), **result})


def cmd_ncu(args) -> None:
    from kernelscope import ncu, runtime, sweep

    specs, spec, shape, dtype, case = _resolve(args)
    best = sweep.best_configs(_load(args.sweep))
    implementations = ncu.profiled_implementations(spec, shape, dtype, best)
    argv = ncu.target_argv(args.specs, args.kernel, args.shape, args.dtype, args.sweep)
    result = ncu.run(argv, implementations, runtime.select_backend() == "cuda")
    _write_json(args.out, {**_case_header(specs, case), **result})


def cmd_ncu_target(args) -> None:
    from kernelscope import ncu, sweep

    specs, spec, shape, dtype, case = _resolve(args)
    ncu.target(spec, shape, dtype, sweep.best_configs(_load(args.sweep)))


def cmd_compare(args) -> None:
    from kernelscope import compare

    for path in (args.a, args.b):
        if not (Path(path) / "specs.json").exists():
            sys.exit(
                f"kernelscope compare: {path}/specs.json does not exist: pass a results/<device> directory "
                f"of a finished run"
            )
    verdict = compare.build(
        args.a, args.b, args.out, label_a=args.label_a, label_b=args.label_b, calibration=args.calibration
    )
    print(
        f"{args.a} vs {args.b}: {verdict['kind']}"
        + (f" ({'; '.join(verdict['reasons'])})" if verdict["reasons"] else "")
    )


def cmd_report(args) -> None:
    from kernelscope import report

    report.build(args.results, args.out)


def cmd_index(args) -> None:
    from kernelscope import index

    index.build(args.reports)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kernelscope", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)

    def stage(name: str, fn, case: bool = True, cold: bool = False):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn, cold=cold)
        if name not in READING_STAGES:
            p.add_argument("--specs", required=True, help="results/<device>/specs.json")
        if name != "index":
            p.add_argument("--out", required=True)
        if case:
            p.add_argument("--kernel", required=True)
            p.add_argument("--shape", required=True)
            p.add_argument("--dtype", required=True)
        return p

    stage("environment", cmd_environment, case=False).add_argument("--extra", help="JSON merged into the record")
    stage("calibrate", cmd_calibrate, case=False)
    stage("reruns", cmd_reruns, case=False).add_argument("--source", default="", help="a rerun calibration record")
    stage("correctness", cmd_correctness)
    stage("sweep", cmd_sweep, cold=True)
    p = stage("timing", cmd_timing, cold=True)
    p.add_argument("--correctness", required=True)
    p.add_argument("--sweep", required=True)
    stage("profile", cmd_profile).add_argument("--sweep", required=True)
    stage("ncu", cmd_ncu).add_argument("--sweep", required=True)
    stage("ncu-target", cmd_ncu_target).add_argument("--sweep", required=True)
    stage("report", cmd_report, case=False).add_argument("--results", required=True)
    p = stage("compare", cmd_compare, case=False)
    p.add_argument("--a", required=True, help="results/<device> of run A")
    p.add_argument("--b", required=True, help="results/<device> of run B")
    p.add_argument("--label-a", help="name of run A in the document (default: its device key)")
    p.add_argument("--label-b", help="name of run B in the document (default: its device key)")
    p.add_argument(
        "--calibration",
        help="a rerun calibration record (python -m kernelscope.reruns) to judge the pairs by, in place of the one "
        "run A recorded (results/<A>/reruns.json): for runs made before their card had one",
    )
    stage("index", cmd_index, case=False).add_argument(
        "--reports", required=True, help="the reports/ folder: every run and comparison in it"
    )

    args = parser.parse_args(argv)
    # One line in the job's log says where the job ran, as seen from inside: the check that every job of a
    # --use-singularity run ran in the image (tests/test_container_e2e.py). Apptainer sets the variable.
    image = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    print(
        f"kernelscope {args.stage}: " + (f"in Apptainer image {image}" if image else "not in an Apptainer container"),
        file=sys.stderr,
        flush=True,
    )
    from kernelscope.cases import ConfigError
    from kernelscope.results import CorruptResult

    refused: tuple[type[Exception], ...] = (ConfigError, CorruptResult, KeyError)
    if args.stage not in READING_STAGES:
        # before anything initialises CUDA: this job's one card for its whole life
        from kernelscope import gpus, runtime

        gpus.bind(args.stage)
        # Cold compile caches on a GPU, where first-call time is a reported result. Under the interpreter
        # compile times mean nothing and a cold Inductor cache costs a C++ build per job, so the shared
        # cache is kept. (Inductor and Triton read these variables when they compile, not at import.)
        args.cold_caches = _cold_caches() if args.cold and runtime.select_backend() == "cuda" else None
        refused += (runtime.DeviceMismatch,)
    try:
        args.fn(args)
    except refused as exc:
        sys.exit(f"kernelscope {args.stage}: {exc.args[0] if exc.args else exc}")


def exit_now(code: int = 0) -> None:
    """End a ``python -m kernelscope`` process once its output is on disk, skipping interpreter
    teardown (CUDA context, NVML, Inductor and Triton state), which costs seconds per GPU job and
    writes nothing. Not for ``ncu-target``: Nsight Compute collects from a process that exits normally."""
    if "ncu-target" in sys.argv[1:2]:
        return
    for root in _TEMP_DIRS:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
