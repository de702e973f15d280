"""Which GPU a job runs on, and when it may measure.

**Binding.** A GPU job binds to one device for its whole life: before CUDA starts, :func:`bind` picks the
visible device with the fewest live kernelscope jobs and sets ``CUDA_VISIBLE_DEVICES`` to its UUID, so
torch's device 0, Triton's device and the NVML handle (opened by that UUID, :mod:`kernelscope.clocks`) are
one card, and every per-case record names it.

**Locking.** Per device, a readers-writer lock made of two files named by the UUID. Sampling (sweep timing,
timing, calibration, Nsight Compute) holds it *exclusively*: nothing else runs on that GPU while samples
are taken. GPU work that tolerates company (correctness runs, first calls, profiles) holds it *shared*.
Imports, input set-up and compiles hold nothing, so they overlap everything. Snakemake's resources then
describe cores and memory only, and many jobs run at once while the GPU measures one at a time.

``fcntl.flock`` locks belong to the open file, so the kernel drops them when a process dies: a crashed or
killed job never keeps a GPU. An exclusive waiter first takes a *gate* that every shared taker passes
through, so a stream of shared holders cannot starve a sampler (writer preference).

The job registry (which live process is bound to which device) is a small JSON file under its own lock;
entries of dead processes are dropped whenever it is read, so it needs no clean-up either.

Under the interpreter nothing is bound and the locks do nothing, unless ``KERNELSCOPE_PRETEND_GPUS=N``
names N pretend devices: then binding, the registry and the locks work as on a real host (tests use it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PRETEND_ENV = "KERNELSCOPE_PRETEND_GPUS"
LOCK_DIR_ENV = "KERNELSCOPE_LOCK_DIR"
#: set in a bound job's environment, so a child process (Nsight Compute's target) stays on the same card
#: and does not take the lock its parent already holds
BOUND_ENV = "KERNELSCOPE_GPU"
INHERITED_LOCK_ENV = "KERNELSCOPE_GPU_LOCK_HELD"
DEFAULT_LOCK_DIR = "/tmp/kernelscope-gpu-locks"


def lock_dir() -> Path:
    path = Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another user's jobs on this host lock the same GPUs
            path.chmod(0o1777)
    return path


def _nvml_uuids() -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
        uuids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        return uuids
    except Exception:  # noqa: BLE001 - no driver or no NVML: no GPU to bind
        return []


def visible_devices() -> list[str]:
    """UUIDs of the GPUs this job may use: all of the host's, or those ``CUDA_VISIBLE_DEVICES`` names (by
    index in PCI order, as NVML counts, or by UUID or UUID prefix, as CUDA accepts). A cluster's scheduler
    sets that variable; kernelscope then chooses among the cards it was given."""
    pretend = os.environ.get(PRETEND_ENV)
    if pretend:
        return [f"PRETEND-{i}" for i in range(int(pretend))]
    host = _nvml_uuids()
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is None or not host:
        return host
    chosen = []
    for token in (t.strip() for t in wanted.split(",") if t.strip()):
        if token.isdigit():
            if int(token) >= len(host):
                break  # CUDA stops at the first invalid index
            chosen.append(host[int(token)])
        else:
            chosen.extend(u for u in host if u.startswith(token) and u not in chosen)
    return chosen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@contextlib.contextmanager
def _registry() -> Iterator[dict[str, Any]]:
    """The registry of live jobs, read and written under its lock; dead processes' entries are dropped."""
    root = lock_dir()
    with open(root / "jobs.lock", "a+") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        path = root / "jobs.json"
        try:
            jobs = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, json.JSONDecodeError):
            jobs = {}  # a registry torn by a killed writer is rebuilt from the live jobs that register next
        jobs = {pid: job for pid, job in jobs.items() if _alive(int(pid))}
        yield jobs
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(jobs))
        tmp.replace(path)


def jobs_running() -> dict[str, int]:
    """Live bound jobs on this host, per device UUID."""
    with _registry() as jobs:
        counts: dict[str, int] = {}
        for job in jobs.values():
            counts[job["uuid"]] = counts.get(job["uuid"], 0) + 1
        return counts


class _Binding:
    def __init__(self) -> None:
        self.uuid: str | None = None
        self.stage = ""
        self.lock: DeviceLock | None = None
        self.sections: list[dict[str, Any]] = []


_BINDING = _Binding()


def bind(stage: str) -> str | None:
    """Bind this process to one GPU for its life; call before anything initialises CUDA. Returns the UUID,
    or None where there is no GPU (the interpreter). A child of a bound job keeps its parent's card."""
    if _BINDING.uuid:
        return _BINDING.uuid
    inherited = os.environ.get(BOUND_ENV)
    devices = [inherited] if inherited else visible_devices()
    if not devices:
        return None
    with _registry() as jobs:
        load = {uuid: 0 for uuid in devices}
        for job in jobs.values():
            if job["uuid"] in load:
                load[job["uuid"]] += 1
        uuid = min(devices, key=lambda u: (load[u], devices.index(u)))
        jobs[str(os.getpid())] = {"uuid": uuid, "stage": stage, "started": time.time()}
    os.environ[BOUND_ENV] = uuid
    if not uuid.startswith("PRETEND-"):
        os.environ["CUDA_VISIBLE_DEVICES"] = uuid
    _BINDING.uuid, _BINDING.stage = uuid, stage
    _BINDING.lock = DeviceLock(uuid, held_by_parent=os.environ.get(INHERITED_LOCK_ENV) == uuid)
    return uuid


def bound_uuid() -> str | None:
    return _BINDING.uuid


class DeviceLock:
    """A readers-writer lock on one device, fair to writers (see the module docstring)."""

    def __init__(self, uuid: str, held_by_parent: bool = False) -> None:
        root = lock_dir()
        self.uuid = uuid
        self.held_by_parent = held_by_parent
        self._gate = open(root / f"{uuid}.gate", "a+")  # noqa: SIM115 - held for the life of the process
        self._main = open(root / f"{uuid}.lock", "a+")  # noqa: SIM115
        self.mode: str | None = None

    def acquire(self, mode: str) -> None:
        if self.mode is not None:
            raise RuntimeError(f"GPU lock on {self.uuid} already held {self.mode}; {mode} sections do not nest")
        if mode == "exclusive":
            fcntl.flock(self._gate, fcntl.LOCK_EX)  # new shared takers queue behind this sampler
            try:
                fcntl.flock(self._main, fcntl.LOCK_EX)  # wait for the shared holders already inside
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
        elif mode == "shared":
            fcntl.flock(self._gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(self._main, fcntl.LOCK_SH)
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
        else:
            raise ValueError(f"lock mode must be 'shared' or 'exclusive', got {mode!r}")
        self.mode = mode

    def release(self) -> None:
        fcntl.flock(self._main, fcntl.LOCK_UN)
        self.mode = None


@contextlib.contextmanager
def _section(mode: str, what: str) -> Iterator[None]:
    lock = _BINDING.lock
    if lock is None or lock.held_by_parent or lock.mode == "exclusive" or lock.mode == mode:
        yield  # unbound (interpreter), the parent holds it, or already inside an equal or stronger section
        return
    _give_back_cached_memory()
    asked = time.time()
    lock.acquire(mode)
    got = time.time()
    entry: dict[str, Any] = {"mode": mode, "what": what, "wait_s": got - asked, "start": got}
    if mode == "exclusive":
        # how many jobs were alive on this host while this section measured (they may compile or run
        # shared GPU work on other cards; on this card they wait)
        entry["jobs_on_host"] = sum(jobs_running().values())
    try:
        yield
    finally:
        entry["end"] = time.time()  # before the release, so the recorded sections of one card never overlap
        lock.release()
        _BINDING.sections.append(entry)


def _give_back_cached_memory() -> None:
    """Before a job waits for its card: the memory its allocator caches but no tensor uses goes back to the card,
    so that the jobs beside it on that card (the workflow runs them side by side) can allocate it. A wait that
    held it could leave the job in the lock short of memory (kernelscope.faults.retry_oom)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def shared(what: str = "") -> contextlib.AbstractContextManager[None]:
    """GPU work that tolerates company on the card (but not a sampler): correctness runs, first calls."""
    return _section("shared", what)


def exclusive(what: str = "") -> contextlib.AbstractContextManager[None]:
    """Sampling: nothing else of kernelscope's runs on this card meanwhile."""
    return _section("exclusive", what)


def child_environment() -> dict[str, str]:
    """Environment for a child process that works on this job's card under the lock this job holds."""
    env = dict(os.environ)
    if _BINDING.uuid:
        env[BOUND_ENV] = _BINDING.uuid
        if _BINDING.lock is not None and _BINDING.lock.mode is not None:
            env[INHERITED_LOCK_ENV] = _BINDING.uuid
    return env


def summary() -> dict[str, Any] | None:
    """What this job's per-case record says about its card and its lock sections (None when unbound)."""
    if not _BINDING.uuid:
        return None
    held = {m: sum(s["end"] - s["start"] for s in _BINDING.sections if s["mode"] == m) for m in ("shared", "exclusive")}
    return {
        "uuid": _BINDING.uuid,
        "pretend": _BINDING.uuid.startswith("PRETEND-"),
        "stage": _BINDING.stage,
        "exclusive_s": held["exclusive"],
        "shared_s": held["shared"],
        "lock_wait_s": sum(s["wait_s"] for s in _BINDING.sections),
        "sections": list(_BINDING.sections),
    }
