"""Environment record: everything a reader needs to know what produced the numbers.

Software (Python, torch, triton, CUDA runtime, cuDNN), hardware (GPU, capability, SMs, memory, clocks,
driver, CPU, OS), provenance (git commit and dirty flag, config hash, container identity) and the
execution mode (CUDA, or Triton's interpreter on the CPU).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch
import triton

from kernelscope import __version__, clocks, container, gpus, runtime


def _run(cmd: list[str], cwd: str | None = None) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True, cwd=cwd).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def container_info() -> dict[str, Any]:
    """Which container (if any) this process runs in, from the variables the runtimes set."""
    image = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    if image:
        runtime_name = "apptainer" if os.environ.get("APPTAINER_CONTAINER") else "singularity"
        found = {
            "containerized": True,
            "runtime": runtime_name,
            "image": image,
            "image_name": os.environ.get("APPTAINER_NAME") or os.environ.get("SINGULARITY_NAME"),
            "labels": container.image_labels(),
        }
    elif Path("/.dockerenv").exists() or os.environ.get("container") == "docker":  # noqa: SIM112 (lower-case: the name container engines set)
        found = {"containerized": True, "runtime": "docker", "image": os.environ.get("KERNELSCOPE_IMAGE")}
        found["labels"] = None
    else:
        return {"containerized": False, "runtime": None, "image": None}
    # Is it the lock's image? Its torch and triton (this process's) against the checkout's lock, and its labels
    # against the recipe's: an image assembled from another stack says so in the record and the report.
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    return {**found, "image_versions": versions, **container.versus_lock(versions, found["labels"])}


def git_info(repo: str | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the code that ran. KERNELSCOPE_GIT_COMMIT / KERNELSCOPE_GIT_DIRTY, set by
    whoever sent the working tree to a GPU host or into a container, win over the checkout's own .git:
    a copied tree can carry a stale .git (seen on the H200 host: it reported the previous session's
    commit for a run of a later one)."""
    if os.environ.get("KERNELSCOPE_GIT_COMMIT"):
        dirty = os.environ.get("KERNELSCOPE_GIT_DIRTY")
        return {
            "commit": os.environ["KERNELSCOPE_GIT_COMMIT"],
            "dirty": None if dirty is None else dirty == "1",
            "source": "environment (KERNELSCOPE_GIT_COMMIT)",
        }
    commit = _run(["git", "rev-parse", "HEAD"], cwd=repo)
    if commit:
        status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
        return {"commit": commit, "dirty": bool(status) if status is not None else None, "source": "git"}
    return {"commit": None, "dirty": None, "source": "unknown: no .git and KERNELSCOPE_GIT_COMMIT unset"}


def gpu_info() -> dict[str, Any]:
    if runtime.select_backend() != "cuda":
        return {"name": None, "reason": "no CUDA device: Triton interpreter on the CPU"}
    props = torch.cuda.get_device_properties(0)
    info = {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 2),
        "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 2),
    }
    monitor = clocks.ClockMonitor(gpus.bound_uuid())
    info.update(monitor.static_info())
    info["clocks_now"] = monitor.read()
    if "driver" not in info:
        smi = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        info["driver"] = smi.splitlines()[0] if smi else None
    return info


def record(device_key: str, config_hash: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    backend = runtime.select_backend()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device_key": device_key,
        "backend": backend,
        "triton_interpreter": backend == "interpreter",
        "kernelscope": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": cudnn,
        "gpu": gpu_info(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "os": platform.platform(),
        "hostname_hash": hashlib.sha256(platform.node().encode()).hexdigest()[:12],
        "git": git_info(),
        "config_hash": config_hash,
        "container": container_info(),
        **(extra or {}),
    }
