"""Where kernels run: a CUDA device, or Triton's interpreter on the CPU.

The interpreter must be chosen before any ``@triton.jit`` function is defined (Triton reads
``TRITON_INTERPRET`` at decoration time), so :func:`select_backend` runs before ``kernels`` is imported;
``kernelscope.registry`` calls it.
"""

from __future__ import annotations

import os
from functools import cache

import torch

from kernelscope.naming import ANY_GPU, INTERPRETER_KEY, slug


@cache
def select_backend() -> str:
    """Return ``"cuda"`` or ``"interpreter"``; with no CUDA device, switch Triton to its interpreter."""
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    return "interpreter"


def device() -> torch.device:
    return torch.device("cuda") if select_backend() == "cuda" else torch.device("cpu")


def is_interpreter() -> bool:
    return select_backend() == "interpreter"


def synchronize() -> None:
    if select_backend() == "cuda":
        torch.cuda.synchronize()


def runtime_device_key() -> str:
    """The device key as seen by a job, from the backend it actually uses."""
    if select_backend() == "cuda":
        return slug(torch.cuda.get_device_name(0))
    return INTERPRETER_KEY


class DeviceMismatch(RuntimeError):
    """A job sees another device than the one its results path is keyed by."""


def check_device_key(expected: str) -> None:
    """Refuse to write results under another machine's key (e.g. a container started without ``--nv``)."""
    actual = runtime_device_key()
    if expected == ANY_GPU and actual != INTERPRETER_KEY:
        return
    if actual != expected:
        hint = ""
        if actual == INTERPRETER_KEY:
            hint = (
                " This job sees no CUDA device: in a container, Apptainer needs --nv (profiles/default "
                "supplies it); on the host, check CUDA_VISIBLE_DEVICES."
            )
        raise DeviceMismatch(f"this job was planned for device {expected!r} but runs on {actual!r}.{hint}")


@cache
def device_limits() -> dict:
    """Hardware limits that launchers and config pruning read (SM count for persistent grids, shared
    memory per block and per SM, L2 size for cache flushing). Under the interpreter, nominal values."""
    if select_backend() != "cuda":
        return {
            "num_sms": 4,
            "max_shared_mem_per_block": 228 * 1024,
            "shared_mem_per_sm": 228 * 1024,
            "l2_bytes": 4 * 2**20,
            "capability": (0, 0),
            "interpreter": True,
            "regs_per_sm": 65536,
            "max_threads_per_sm": 2048,
        }
    props = torch.cuda.get_device_properties(0)
    shared = getattr(props, "shared_memory_per_block_optin", None) or getattr(
        props, "max_shared_memory_per_block_optin", None
    )
    if not shared:
        try:
            from triton.runtime import driver

            shared = driver.active.utils.get_device_properties(0)["max_shared_mem"]
        except Exception:  # noqa: BLE001 - a missing driver helper only loses the pruning hint
            shared = 48 * 1024
    return {
        "num_sms": props.multi_processor_count,
        "max_shared_mem_per_block": int(shared),
        # what resident blocks share (each with the hardware's 1 KB reservation: kernelscope.teams)
        "shared_mem_per_sm": int(getattr(props, "shared_memory_per_multiprocessor", 0) or int(shared) + 1024),
        "l2_bytes": int(getattr(props, "L2_cache_size", 50 * 2**20)),
        "capability": (props.major, props.minor),
        "interpreter": False,
        # occupancy inputs (torch names them since 2.x; 64K registers and 2048 threads an SM from sm_70 on)
        "regs_per_sm": int(getattr(props, "regs_per_multiprocessor", 65536)),
        "max_threads_per_sm": int(getattr(props, "max_threads_per_multi_processor", 2048)),
    }
