"""Faults of one implementation (fails to compile, runs out of memory, hangs) recorded as data, so the
other implementations of the case still run and the report lists what went wrong.

A hang is bounded by a time limit per implementation (config ``implementation_time_limit_s``), in two tiers:

1. ``SIGALRM`` (the job's main thread, POSIX): when the limit passes, the signal handler raises
   :class:`ImplementationTimeout` inside whatever Python code is running: an endless loop in a kernel under
   Triton's interpreter, a host-side wait, a Python closure that sleeps. The stage records the
   implementation as ``timeout`` and goes on with the next one.
2. A watchdog thread, for what a signal cannot interrupt: on a GPU, a kernel that never finishes leaves the
   main thread inside a CUDA call (a synchronize) that does not return to Python, so the handler never
   runs, and the CUDA context is unusable from then on anyway. ``GRACE_S`` after the limit, the watchdog
   asks the stage for its partial result (every implementation finished so far, this one recorded as
   abandoned), has the CLI write it atomically as the job's result, and ends the process with
   ``os._exit(0)``: the case is complete as far as it can be, the rerun of the workflow does not retry
   it, and the GPU is freed for the next job when the process dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: seconds between the limit and the watchdog: time for the signal to land when it can
GRACE_S = 5.0
#: status of an implementation stopped by the time limit, one that ran out of memory, one whose kernel
#: did not compile
TIMEOUT, OOM, COMPILE_ERROR = "timeout", "oom", "compile_error"

_limit_s: float | None = None
#: the CLI's writer of this job's result file (header added), used by the watchdog
_salvage: Callable[[dict[str, Any]], None] | None = None
#: the running stage's partial result, given the label of the implementation being abandoned
_partial: Callable[[str], dict[str, Any]] | None = None


class ImplementationTimeout(Exception):
    """An implementation ran past the job's per-implementation time limit."""


def configure(limit_s: float | None, salvage: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Set the per-implementation limit (None: unbounded) and how the watchdog writes the result."""
    global _limit_s, _salvage
    _limit_s, _salvage = limit_s, salvage


def on_abandon(partial: Callable[[str], dict[str, Any]] | None) -> None:
    """Register the running stage's partial result, which the watchdog writes if a hang cannot be stopped."""
    global _partial
    _partial = partial


def status(exc: BaseException) -> str:
    """The recorded status of an implementation that raised ``exc``."""
    chain = list(_chain(exc))
    # the interpreter (or a library) may wrap the signal handler's exception in one of its own
    if any(isinstance(e, ImplementationTimeout) for e in chain):
        return TIMEOUT
    names = {type(e).__name__ for e in chain}
    if names & {"OutOfMemoryError"} or "out of memory" in str(exc).lower():
        return OOM
    if names & {"CompilationError", "OutOfResources"}:
        return COMPILE_ERROR
    return "error"


#: an out-of-memory fault on a GPU is tried this many times in all, ``OOM_WAIT_S`` apart, before it is recorded: the
#: workflow runs a card's jobs side by side (kernelscope.gpus), so the memory a job lacks may be other jobs', which
#: they give back as they finish. A kernel that needs more than the card has fails every time and is recorded.
OOM_ATTEMPTS = 3
OOM_WAIT_S = 15.0


def oom_attempts() -> int:
    """Attempts at a run that ends out of memory: ``OOM_ATTEMPTS`` where a CUDA device is shared by this host's
    jobs, one elsewhere (the interpreter's CPU tensors share no card)."""
    torch = sys.modules.get("torch")
    return OOM_ATTEMPTS if torch is not None and torch.cuda.is_available() else 1


def retry_oom(run: Callable[[], T], retries: list[str] | None = None) -> T:
    """``run()``, run again after an out-of-memory fault (cached blocks released, ``OOM_WAIT_S`` waited) up to
    :func:`oom_attempts` times in all; the last fault, and any other exception, propagates. ``retries``, where
    given, receives each retried fault's message. Call it outside any exclusive section: a job that waits while
    holding the card keeps the others, and the memory they hold, from moving."""
    attempts = oom_attempts()
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except Exception as exc:
            if attempt == attempts or status(exc) != OOM:
                raise
            after_failure()
            if retries is not None:
                retries.append(f"{type(exc).__name__}: {exc}"[:300])
            time.sleep(OOM_WAIT_S)
    raise AssertionError("unreachable")  # the loop returns or raises


def after_failure() -> None:
    """Release what a failed implementation left behind (cached blocks after an OOM) before the next runs."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def abandoned_record(label: str, kind: str | None = None) -> dict[str, Any]:
    """The record of an implementation whose hang only ending the process could stop."""
    return {
        "implementation": label,
        "kind": kind,
        "status": TIMEOUT,
        "ok": False,
        "failure": f"still running after the {_limit_s:g} s limit and not interruptible (blocked in a device "
        f"call): the job wrote what it had and ended",
        "reason": f"abandoned after the {_limit_s:g} s limit",
    }


@contextlib.contextmanager
def bounded(label: str) -> Iterator[None]:
    """Run the body under the per-implementation time limit (see the module docstring)."""
    if not _limit_s:
        yield
        return
    use_signal = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")

    def on_alarm(signum, frame):
        raise ImplementationTimeout(f"{label}: still running after the {_limit_s:g} s limit")

    watchdog = threading.Timer(_limit_s + (GRACE_S if use_signal else 0.0), _abandon, args=(label,))
    watchdog.daemon = True
    previous = signal.signal(signal.SIGALRM, on_alarm) if use_signal else None
    if use_signal:
        signal.setitimer(signal.ITIMER_REAL, _limit_s)
    watchdog.start()
    try:
        yield
    finally:
        if use_signal:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        watchdog.cancel()


def _abandon(label: str) -> None:
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(
        f"kernelscope: {label} still running {GRACE_S:g} s past its {_limit_s:g} s limit; writing the partial "
        f"result and ending the job",
        file=sys.stderr,
        flush=True,
    )
    code = 124
    if _salvage is not None and _partial is not None:
        doc = _partial(label)
        doc["abandoned"] = {
            "implementation": label,
            "limit_s": _limit_s,
            "at": started,
            "reason": "the implementation could not be interrupted; implementations after it in this job were not run",
        }
        _salvage(doc)
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
