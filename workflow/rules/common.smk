# Shared definitions: the device key, the case plan, and input functions for the per-case rules.
# All logic lives in the kernelscope package; this file only adapts it to Snakemake. Planning imports
# neither torch nor triton (kernelscope.cases reads kernels/catalog.json), so a GPU-less login node plans
# a GPU run when the config names the device (--config device=nvidia-h200). A kernel module added or changed
# since the catalog was generated regenerates it first (a subprocess, where torch is installed; elsewhere
# planning stops with the command to run), so a new kernels/<name>.py needs no other edit.

import dataclasses
import sys

from kernelscope import cases as ks_cases
from kernelscope import catalog as ks_catalog
from kernelscope import container as ks_container
from kernelscope import sources as ks_sources

# DEVICE names results/<DEVICE>/ (the config's label, else the target device); TARGET is the hardware
# every job must see
ks_catalog.ensure_current(f"{workflow.basedir}/kernels/catalog.json")
TARGET = ks_cases.device_key(config)
DEVICE = ks_cases.results_key(config)
SPECS = f"results/{DEVICE}/specs.json"
try:
    CASES = ks_cases.plan(config, TARGET)
    # What each job reads of specs.json, as a digest: the per-case and calibrate rules take it as a param and
    # specs.json as ancient(), so a job reruns when what it reads changes, not whenever a run narrowed to
    # other cases rewrote specs.json (kernelscope.cases.job_digests)
    JOB_DIGESTS = ks_cases.job_digests(ks_cases.specs(config, TARGET))
    # Cases the optional Nsight Compute stage profiles (config ncu: true, or a list of cases / kernels).
    NCU_CASES = ks_cases.ncu_selection(config["ncu"], [dataclasses.asdict(c) for c in CASES])
    # The rerun calibration the claim rules read (kernelscope.reruns; docs/timing-basis.md): the config's
    # rerun_calibration file, else the published record for the target device where there is one
    RERUN_CALIBRATION = ks_cases.rerun_calibration(config, TARGET, workflow.basedir)
except ks_cases.ConfigError as exc:  # with the file and line that set its key; no traceback
    raise WorkflowError(CONFIG_SOURCES.label(exc.path, str(exc))) from None

# GPU jobs run side by side: each binds to one card and takes that card exclusively only while it samples
# (kernelscope/gpus.py: a per-GPU lock), so no Snakemake resource serialises them. Priorities: a case's
# timing job starts as soon as its correctness and sweep are done, so samplers run throughout the run rather
# than queue at its end; the environment record and the calibration (needed by the report) start first.
# Snakemake's standard GPU resources, which cluster executors turn into a GPU request (the SLURM plugin:
# --gpus / --gres=gpu[:model]:1). An interpreter plan asks for none; gpu_model only where the config names
# the cluster's model name. Timing-sensitive rules (sweep, timing, calibrate, ncu) can also ask for a whole
# node: profiles/slurm sets slurm_extra="--exclusive" for them.
GPU_RESOURCES = {} if ks_cases.is_interpreter(TARGET) else {"gpu": 1}
if config.get("gpu_model") and GPU_RESOURCES:
    GPU_RESOURCES["gpu_model"] = config["gpu_model"]

# Jobs run `python -m kernelscope ...`: inside the container that is the image's python; on the host
# it is the interpreter running Snakemake (so a venv works without being activated).
IN_CONTAINER = "APPTAINER" in {m.name for m in workflow.deployment_settings.deployment_method}
PYTHON = "python" if IN_CONTAINER else sys.executable

# Each containerized job runs in its own container: the per-GPU lock directory (kernelscope/gpus.py; made here on
# the host, world-writable) is bound into every one at its own path and named in its environment, so no image,
# private /tmp (--contain) or cleaned environment (--cleanenv) gives a job a lock of its own
# (kernelscope.container.apptainer_args; docs/container.md).
if IN_CONTAINER:
    from kernelscope import gpus as ks_gpus

    try:
        workflow.deployment_settings.apptainer_args = ks_container.apptainer_args(
            workflow.deployment_settings.apptainer_args, ks_gpus.lock_dir()
        )
    except ks_container.ContainerFileError as exc:
        raise WorkflowError(str(exc)) from None

# The pinned image (workflow/rules/container.smk builds it under --use-singularity, unless config
# container_image names a pre-built .sif or a registry URI pinned by digest, which Snakemake pulls) and its
# identity for the environment record. Rules that run `python -m kernelscope` name it in `container:`
# (ignored on the host) and take a file image as an input through container_image(), since `container:`
# alone adds no dependency.
CONTAINER_BUILT = "build/kernelscope.sif"
CONTAINER_IMAGE = config.get("container_image") or CONTAINER_BUILT
CONTAINER_IS_URI = "://" in CONTAINER_IMAGE
CONTAINER_IDENTITY = "build/kernelscope.sif.json"


def container_image():
    return CONTAINER_IMAGE if IN_CONTAINER and not CONTAINER_IS_URI else []


def container_identity():
    return CONTAINER_IDENTITY if IN_CONTAINER else []


def environment_extra(wildcards, input):
    """In the container: pass the image's identity (sha256, base image, lock hash) to the environment record."""
    return f'--extra "$(cat {input.identity})"' if IN_CONTAINER else ""


wildcard_constraints:
    device=DEVICE,
    kernel="|".join(sorted({c.kernel for c in CASES})) or "none",
    dtype="float16|bfloat16|float32",
    shape=r"[A-Za-z0-9_]+",
    other=r"[a-z0-9][a-z0-9._-]*",


def kernel_sources(wildcards):
    """kernels/<kernel>.py and every module of this repository it imports: a change to any reruns the case."""
    return ks_sources.kernel_sources(wildcards.kernel, workflow.basedir)


def case_results(stage):
    """Every planned case's output of the per-case rule `stage` (included before this is called)."""
    pattern = getattr(rules, stage).output[0]
    return [pattern.format(device=DEVICE, kernel=c.kernel, dtype=c.dtype, shape=c.shape) for c in CASES]


def ncu_results():
    keys = ("kernel", "dtype", "shape")
    return [rules.ncu.output[0].format(device=DEVICE, **dict(zip(keys, case.split("/")))) for case in NCU_CASES]


def case_digest(wildcards):
    return JOB_DIGESTS[f"{wildcards.kernel}/{wildcards.dtype}/{wildcards.shape}"]


def case_args(wildcards):
    return f"--kernel {wildcards.kernel} --shape {wildcards.shape} --dtype {wildcards.dtype}"


# The long-format tables the report rule writes (kernelscope.report.TABLES)
REPORT_TABLES = [
    "correctness.csv",
    "timing.csv",
    "samples.csv.gz",
    "sweep.csv",
    "profile.csv",
    "claims.csv",
    "ratios.csv",
    "targets.csv",
]


def get_other_results(wildcards):
    return f"results/{wildcards.other}"


def get_compare_out(wildcards):
    return f"reports/{DEVICE}/compare/{wildcards.other}"
