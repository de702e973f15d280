"""Device time from the GPU's own kernel timestamps: CUPTI activity records, read through torch.profiler
(kineto), so that what is measured does not depend on the host that launched the work.

A CUDA event pair brackets everything the stream did between two host calls, event bookkeeping
included; on some hosts that adds a constant of one to three microseconds to every sample, which is most
of a short kernel's time. CUPTI's kernel records are the hardware's start and end of each kernel.

One sample is one call of the closure. Calls are separated on the stream by a **delimiter**: a Triton
kernel of kernelscope's own (``DELIMITER_NAME``) that overwrites the L2 flush buffer (twice the L2) when
the L2 is flushed, or 16 words when it is not. Every device record between delimiter *i* and the next
delimiter belongs to call *i*; the delimiters' own records are left out. Per call this gives

* ``sum``: the sum of the durations of the call's kernels, memsets and copies (multi-kernel baselines
  are counted whole, and no gap between kernels is counted), and
* ``span``: the first record's start to the last record's end (gaps between the call's kernels included;
  these gaps can depend on the host when the host launches slower than the device runs).

Samples are enqueued in batches behind a GPU sleep, as the event samples are; a batch ends with a
delimiter of its own, and what runs between that delimiter and the next batch's first one (the sleep) is
discarded. The profiler itself is reached through small seams (``profile_factory``, ``read_records``)
that a CPU test replaces with a stand-in device.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kernelscope import stats

#: the name of the delimiter kernel (a substring of what the profiler reports for it)
DELIMITER_NAME = "kernelscope_l2_flush"
#: the record kinds counted as the closure's device work (kineto's activity names, lower-cased)
_DEVICE_WORK = ("kernel", "memset", "memcpy")


@dataclasses.dataclass(frozen=True)
class DeviceRecord:
    """One record of device work: a kernel, memset or copy, with device timestamps in nanoseconds."""

    name: str
    start_ns: int
    end_ns: int
    stream: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def load(kernel) -> None:
    """Load a compiled Triton kernel's binary and build its launcher now, launching nothing: a driver call
    and, on a Triton that builds a C launcher per signature (3.6 does, with the host's C compiler, cached in
    the cache directory, which is cold in a timing or sweep job), a host compile of about a second. Left to
    the first launch, that compile falls inside whatever GPU lock the launch is under. A kernel object
    without the hook (another Triton, or none) is left as it is."""
    init = getattr(kernel, "_init_handles", None)
    if callable(init):
        init()


@functools.cache
def _delimiter_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def kernelscope_l2_flush(ptr, n, value, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + offs, value, mask=offs < n)

    return kernelscope_l2_flush


class Delimiter:
    """Launches the delimiter kernel over ``buffer`` (the L2 flush buffer: each call flushes the L2) or over
    a one-word buffer (no flush). ``kinds`` records what each launch was for, in launch order: "call"
    (a sample follows) or "end" (the batch ends; what follows is not a sample)."""

    BLOCK = 4096
    SMALL = 16  # words written by a delimiter that does not flush

    def __init__(self, buffer, launch: Callable[[Any], None] | None = None) -> None:
        self.buffer = buffer
        self.flushes = buffer.numel() > self.SMALL
        self.kinds: list[str] = []
        self._launch = launch or self._triton_launch

    def _triton_launch(self, buffer) -> None:
        n = buffer.numel()
        _delimiter_kernel()[(-(-n // self.BLOCK),)](buffer, n, 0x5A5A5A5A, BLOCK=self.BLOCK)

    def compile(self) -> None:
        """Compile the delimiter kernel for this buffer without launching it, so that a caller can compile
        before it takes the GPU lock (a delimiter given its own ``launch`` has nothing to compile)."""
        if self._launch == self._triton_launch:
            self._triton_compile(self.buffer)

    def _triton_compile(self, buffer) -> None:
        warmup = getattr(_delimiter_kernel(), "warmup", None)  # Triton's compile-only launch, where it has one
        if warmup is not None:
            n = buffer.numel()
            load(warmup(buffer, n, 0x5A5A5A5A, BLOCK=self.BLOCK, grid=(-(-n // self.BLOCK),)))

    def __call__(self, kind: str) -> None:
        self._launch(self.buffer)
        self.kinds.append(kind)


def _activity(event) -> str:
    kind = getattr(event, "activity_type", None)
    kind = kind() if callable(kind) else kind
    return str(kind or "").lower()


def read_records(prof) -> list[DeviceRecord]:
    """The device work a finished ``torch.profiler.profile`` saw, in device start order. Reads kineto's raw
    events where this torch exposes them (no per-event Python objects are built), else the parsed events."""
    kineto = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    out = []
    if kineto is not None and hasattr(kineto, "events"):
        for ev in kineto.events():
            if "CUDA" not in str(ev.device_type()) or _is_annotation(ev):
                continue
            out.append(DeviceRecord(ev.name(), int(ev.start_ns()), int(ev.end_ns()), int(ev.device_resource_id())))
    else:  # the parsed events: FunctionEvent with a time range in microseconds
        for ev in prof.events():
            if "CUDA" not in str(getattr(ev, "device_type", "")) or _is_annotation(ev):
                continue
            tr = ev.time_range
            out.append(
                DeviceRecord(ev.name, round(tr.start * 1e3), round(tr.end * 1e3), int(ev.device_resource_id or 0))
            )
    return sorted(out, key=lambda r: (r.start_ns, r.end_ns))


def _is_annotation(ev) -> bool:
    """A device-side span of a user annotation (record_function, torch.compile's regions): no device work."""
    flag = getattr(ev, "is_user_annotation", False)  # a method of kineto's events, a field of parsed ones
    if flag() if callable(flag) else flag:
        return True
    kind = _activity(ev)
    return "annotation" in kind or (bool(kind) and not any(w in kind for w in _DEVICE_WORK))


def split_calls(records: Sequence[DeviceRecord], kinds: Sequence[str]) -> list[dict[str, Any]]:
    """Per call (a delimiter of kind "call" and the records up to the next delimiter): ``sum_us``,
    ``span_us``, ``kernels`` (the records' count) and their names. Raises ValueError when the delimiters
    seen on the device are not the ones launched (a record lost, or a closure that launched a kernel of
    the delimiter's name), or when a call ran no device work: the samples would be misassigned."""
    delims = [i for i, r in enumerate(records) if DELIMITER_NAME in r.name]
    if len(delims) != len(kinds):
        raise ValueError(
            f"{len(delims)} delimiter kernels on the device for {len(kinds)} launched: device records cannot be "
            "assigned to calls"
        )
    calls = []
    bounds = [*delims, len(records)]
    for j, kind in enumerate(kinds):
        if kind != "call":
            continue
        mine = records[bounds[j] + 1 : bounds[j + 1]]
        if not mine:
            raise ValueError(f"call {len(calls)} ran no device work between its delimiters")
        calls.append(
            {
                "sum_us": sum(r.duration_ns for r in mine) / 1e3,
                "span_us": (max(r.end_ns for r in mine) - mine[0].start_ns) / 1e3,
                "kernels": len(mine),
                "names": [r.name for r in mine],
                "streams": sorted({r.stream for r in mine}),
            }
        )
    return calls


def _default_profile():
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CUDA])


def sample(
    fn: Callable[[], Any],
    delimiter: Delimiter,
    n: int,
    batch: int,
    head_start: Callable[[int], Any],
    synchronize: Callable[[], None],
    monitor=None,
    profile_factory: Callable[[], Any] | None = None,
    records: Callable[[Any], list[DeviceRecord]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``n`` calls of ``fn`` in one profiler session, in batches of ``batch`` behind ``head_start(batch)``
    (a GPU sleep); after each batch the host synchronises and reads the clocks once (``monitor``). Returns
    the per-call device times and a clock reading per call. ``profile_factory`` and ``records`` default to
    the module's ``_default_profile`` and ``read_records``, looked up at call time (a test replaces them)."""
    profile_factory = profile_factory or _default_profile
    records = records or read_records
    delimiter.kinds.clear()
    readings: list[dict[str, Any]] = []
    with profile_factory() as prof:
        done = 0
        while done < n:
            k = min(batch, n - done)
            head_start(k)
            for _ in range(k):
                delimiter("call")
                fn()
            delimiter("end")
            synchronize()
            if monitor is not None:
                readings.extend([monitor.read()] * k)
            done += k
    return split_calls(records(prof), delimiter.kinds), readings


def summary(calls: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The device-time record of a set of calls: both measures' samples and statistics (``sum`` is the one
    the claims use; ``span`` is kept beside it), and the kernels a call ran."""
    calls = list(calls)
    sums = [c["sum_us"] for c in calls]
    spans = [c["span_us"] for c in calls]
    counts = sorted({c["kernels"] for c in calls})
    names = sorted({name for c in calls for name in c["names"]})
    return {
        "status": "ok",
        "samples_us": [round(s, 4) for s in sums],
        "span_samples_us": [round(s, 4) for s in spans],
        **stats.summarize(sums),
        "span_median_us": float(np.median(spans)),
        "kernels_per_call": counts[0] if len(counts) == 1 else counts,
        "kernel_names": names[:20],
        "streams": sorted({s for c in calls for s in c["streams"]}),
    }
