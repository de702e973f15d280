"""A stand-in CUDA device for CPU tests: the CUDA-only branches of the measuring code run against a
simulated stream with a virtual clock, so every time they compute is known exactly.

The model: one in-order stream and a virtual host clock, both in microseconds from 0. Work enqueued at
host time ``h`` starts at ``max(h, end of the work before it)`` and runs for its declared duration; an
event is stamped when the stream reaches it; a synchronisation moves the host clock to the stream's
end. Host time passes only where a test declares it: a kernel's launch cost (``launch_us``, spent before
its enqueue) and a graph replay's (``graph_launch_us``). ``time.perf_counter`` in
:mod:`kernelscope.timing` reads the host clock.

Declaring work (``dev`` is what the ``standin_cuda`` fixture returns)::

    k = dev.kernel(10.0, name="k", launch_us=30.0)   # a closure of 10 us device time, 30 us host cost
    k = dev.kernel(lambda i: 1000.0 if i == 0 else 10.0)   # by call index (0: the first call)
    k = dev.kernel(10.0, stream=7)   # its record names side stream 7 (it still runs in stream order)
    k = dev.kernels(("a", 3.0), ("b", 4.0, 7), launch_us=20.0)   # two kernels a call (b on stream 7)

Reading it back: ``dev.records`` lists a :class:`KernelRecord` (name, start_us, end_us, stream) for every
kernel that ran on the stream, in stream order: ``"sleep"`` for ``torch.cuda._sleep``'s head start,
``"l2_flush"`` for the L2 flusher's fill, ``devicetime.DELIMITER_NAME`` for the device-time delimiter
(``flush_us`` over the flush buffer, ``delimiter_us`` over its small one), and the kernels a CUDA-graph
replay runs. ``dev.named("k")`` picks one kernel's records.

The profiler: ``torch.profiler`` as :mod:`kernelscope.devicetime` uses it is a :class:`FakeProfile` whose
records, after its session, are the kernel records the stream ran during it, as
``devicetime.DeviceRecord`` in nanoseconds (set ``dev.profiler_error`` to make it raise on entry).

Graphs record the kernels launched while capturing (nothing runs then) and enqueue them back to back at
each replay. The L2 flusher is the real :class:`kernelscope.timing.L2Flusher` on a CPU buffer of
``2 * dev.l2_bytes`` whose fill is also a ``flush_us`` kernel on the stream.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from kernelscope import clocks, devicetime, runtime, timing
from kernelscope.spec import Implementation, KernelSpec, Shape, Tolerance

#: the real flusher class; the fixture replaces ``timing.L2Flusher`` with :meth:`StandinDevice.flusher`
REAL_L2_FLUSHER = timing.L2Flusher


@dataclasses.dataclass(frozen=True)
class KernelRecord:
    name: str
    start_us: float
    end_us: float
    stream: int = 0

    @property
    def us(self) -> float:
        return self.end_us - self.start_us


Duration = float | Callable[[int], float]  # microseconds, or a function of the call index


class FakeKernel:
    """A closure under test: each call, for each of its kernels ``(name, us, stream)``, spends ``launch_us``
    of host time, then enqueues the kernel (``us``: a number, or a function of the call index) on the
    stand-in stream, its record naming ``stream``."""

    def __init__(self, dev: StandinDevice, parts: list[tuple[str, Duration, int]], launch_us: float) -> None:
        self.dev, self.parts, self.launch_us = dev, parts, launch_us
        self.calls = 0

    def __call__(self) -> None:
        i = self.calls
        self.calls += 1
        for name, us, stream in self.parts:
            self.dev.host_us += self.launch_us
            self.dev.launch(name, us(i) if callable(us) else us, stream)


class FakeMonitor:
    """A clock monitor: ``read()`` returns ``readings`` one by one (the last one repeats)."""

    available = True

    def __init__(self, readings: list[dict[str, Any]] | None = None, steady_sm_mhz: float = 1980.0) -> None:
        self.steady_sm_mhz = steady_sm_mhz
        self.readings = readings or [{"sm_mhz": steady_sm_mhz}]
        self.reads = 0

    def read(self) -> dict[str, Any]:
        reading = self.readings[min(self.reads, len(self.readings) - 1)]
        self.reads += 1
        return dict(reading)

    def settle(self, workload: Callable[[], Any], seconds: float = 1.0) -> None:
        pass  # the steady clock is given

    def static_info(self) -> dict[str, Any]:
        return {"nvml": "stand-in monitor"}


class FakeProfile:
    """``torch.profiler.profile(activities=[CUDA])``: a context manager whose ``records``, after it exits,
    are the kernel records the stand-in stream ran during the session (``devicetime.DeviceRecord``, ns)."""

    def __init__(self, dev: StandinDevice) -> None:
        self.dev, self.records, self._first = dev, [], 0

    def __enter__(self) -> FakeProfile:
        if self.dev.profiler_error is not None:
            raise self.dev.profiler_error
        self._first = len(self.dev.records)
        return self

    def __exit__(self, *exc: object) -> None:
        self.records = [
            devicetime.DeviceRecord(r.name, round(r.start_us * 1e3), round(r.end_us * 1e3), r.stream)
            for r in self.dev.records[self._first :]
        ]


class _FlushBuffer(torch.Tensor):
    """A CPU buffer whose fill is also a kernel of known duration on the stand-in stream."""

    def fill_(self, value):
        self.standin.launch("l2_flush", self.standin.flush_us)
        return super().fill_(value)


class _Event:
    def __init__(self, dev: StandinDevice, enable_timing: bool = False, **_: Any) -> None:
        self.dev, self.enable_timing, self.t_us = dev, enable_timing, None

    def record(self, stream: Any = None) -> None:
        self.t_us = self.dev.reached_us()

    def synchronize(self) -> None:
        self.dev.host_us = max(self.dev.host_us, self.t_us)

    def elapsed_time(self, end: _Event) -> float:
        if not (self.enable_timing and end.enable_timing) or self.t_us is None or end.t_us is None:
            raise RuntimeError("elapsed_time needs two recorded events created with enable_timing=True")
        return (end.t_us - self.t_us) / 1e3  # milliseconds, as CUDA's


class _Stream:
    def wait_stream(self, other: _Stream) -> None:
        pass  # one in-order stream stands in for all


class _Graph:
    def __init__(self, dev: StandinDevice) -> None:
        self.dev = dev
        self.kernels: list[tuple[str, float, int]] = []

    def replay(self) -> None:
        self.dev.host_us += self.dev.graph_launch_us
        for kernel in self.kernels:
            self.dev.launch(*kernel)


class StandinDevice:
    def __init__(
        self,
        flush_us: float = 5.0,
        l2_bytes: int = 4096,
        graph_launch_us: float = 0.0,
        clock_khz: int = 1_000_000,
        delimiter_us: float = 0.5,
    ) -> None:
        self.flush_us, self.l2_bytes, self.delimiter_us = flush_us, l2_bytes, delimiter_us
        self.graph_launch_us, self.clock_khz = graph_launch_us, clock_khz
        self.host_us = 0.0
        self.stream_end_us = 0.0
        self.records: list[KernelRecord] = []
        self.capturing: _Graph | None = None
        self.monitor = FakeMonitor()
        self.profiler_error: Exception | None = None

    # --- what tests use
    def kernel(self, us: Duration, name: str = "kernel", launch_us: float = 0.0, stream: int = 0) -> FakeKernel:
        return FakeKernel(self, [(name, us, stream)], launch_us)

    def kernels(self, *parts: tuple[str, Duration] | tuple[str, Duration, int], launch_us: float = 0.0) -> FakeKernel:
        """A closure of several kernels a call, each ``(name, us)`` or ``(name, us, stream)``, with
        ``launch_us`` of host time before each."""
        return FakeKernel(self, [(p[0], p[1], p[2] if len(p) > 2 else 0) for p in parts], launch_us)

    def named(self, name: str) -> list[KernelRecord]:
        return [r for r in self.records if r.name == name]

    def flusher(self, enabled: bool = True, l2_bytes: int | None = None) -> timing.L2Flusher:
        """The real L2 flusher, on a CPU buffer whose fill is an ``l2_flush`` kernel of ``flush_us``."""
        flush = REAL_L2_FLUSHER(enabled, device="cpu", l2_bytes=self.l2_bytes if l2_bytes is None else l2_bytes)
        if flush.buffer is not None:
            flush.buffer = flush.buffer.as_subclass(_FlushBuffer)
            flush.buffer.standin = self
        return flush

    # --- the simulation
    def launch(self, name: str, us: float, stream: int = 0) -> None:
        if self.capturing is not None:
            self.capturing.kernels.append((name, us, stream))
            return
        start = max(self.host_us, self.stream_end_us)
        self.stream_end_us = start + us
        self.records.append(KernelRecord(name, start, self.stream_end_us, stream))

    def launch_delimiter(self, buffer: torch.Tensor) -> None:
        """``Delimiter._triton_launch``: a delimiter kernel, ``flush_us`` long over the flush buffer."""
        self.launch(devicetime.DELIMITER_NAME, self.flush_us if isinstance(buffer, _FlushBuffer) else self.delimiter_us)

    def reached_us(self) -> float:
        """When the stream reaches work enqueued now."""
        return max(self.host_us, self.stream_end_us)

    def synchronize(self) -> None:
        if self.capturing is not None:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        self.host_us = self.reached_us()

    def perf_counter(self) -> float:
        return self.host_us / 1e6

    def sleep(self, cycles: int) -> None:
        self.launch("sleep", cycles * 1000 / self.clock_khz)

    @contextlib.contextmanager
    def graph(self, graph: _Graph, **_: Any) -> Iterator[None]:
        self.synchronize()  # as torch.cuda.graph does before capturing
        self.capturing = graph
        try:
            yield
        finally:
            self.capturing = None

    def properties(self, index: int = 0) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            name="stand-in",
            clock_rate=self.clock_khz,
            L2_cache_size=self.l2_bytes,
            multi_processor_count=4,
            major=9,
            minor=0,
            shared_memory_per_block_optin=228 * 1024,
        )


# --- what the test modules share


def sampling_settings(**kw) -> timing.TimingSettings:
    """Sampling with nothing outside the samples unless a test asks: no warm-up, no clock warm-up."""
    base = dict(
        warmup=0,
        min_samples=10,
        max_samples=10,
        min_time_s=0,
        max_time_s=10.0,
        target_rel_ci=0.01,
        batch=10,
        head_start_us_per_sample=10.0,
        clock_warmup_s=0,
        placements=1,  # the tensors as allocated: a test of the rotation asks for more
    )
    return timing.TimingSettings(**{**base, **kw})


SHAPE = Shape({"N": 4}, "stand-in")


def standin_spec(dev: StandinDevice, torch_us, compile_us=18.0, triton_us=15.0, compile_launch_us=0.0) -> KernelSpec:
    """torch (eager, the primary baseline, declared last), torch_compile and one Triton variant, each a
    stand-in kernel of known device time."""

    def impl(name, kind, us, launch_us=0.0):
        kernel = dev.kernel(us, name=name, launch_us=launch_us)
        extra = {"configs": lambda s, d: [{}], "default_config": lambda s, d: {}} if kind == "triton" else {}
        return Implementation(name, kind, lambda inputs, out, config: kernel, **extra)

    return KernelSpec(
        name="standin",
        description="kernels of known device time",
        make_inputs=lambda shape, dtype, device, seed: {"x": torch.zeros(4, dtype=dtype, device=device)},
        make_output=lambda inputs: torch.zeros_like(inputs["x"]),
        reference=lambda inputs: inputs["x"],
        implementations=[
            impl("triton_a", "triton", triton_us),
            impl("torch_compile", "compile", compile_us, compile_launch_us),
            impl("torch", "eager", torch_us),
        ],
        tolerances={torch.float32: Tolerance(0, 0, "exact")},
        flops=lambda s: 0.0,
        bytes_moved=lambda s, d: 0.0,
        shape_sets={"cpu": [SHAPE]},
    )


def install(monkeypatch: pytest.MonkeyPatch, dev: StandinDevice | None = None) -> StandinDevice:
    """Make kernelscope see ``dev`` as its CUDA device (inputs stay on the CPU)."""
    dev = dev or StandinDevice()
    runtime.device_limits.cache_clear()  # cached per process: the stand-in's limits must neither see nor stay
    monkeypatch.setattr(runtime, "select_backend", lambda: "cuda")
    monkeypatch.setattr(runtime, "device", lambda: torch.device("cpu"))
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=dev.perf_counter))
    monkeypatch.setattr(timing, "L2Flusher", lambda enabled, device=None, l2_bytes=None: dev.flusher(enabled, l2_bytes))
    monkeypatch.setattr(clocks, "ClockMonitor", lambda uuid=None: dev.monitor)
    monkeypatch.setattr(devicetime, "_default_profile", lambda: FakeProfile(dev))
    monkeypatch.setattr(devicetime, "read_records", lambda prof: prof.records)
    monkeypatch.setattr(devicetime.Delimiter, "_triton_launch", lambda self, buffer: dev.launch_delimiter(buffer))
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "Event", lambda enable_timing=False, **kw: _Event(dev, enable_timing))
    monkeypatch.setattr(cuda, "Stream", lambda *a, **kw: _Stream())
    monkeypatch.setattr(cuda, "current_stream", lambda *a, **kw: _Stream())
    monkeypatch.setattr(cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(cuda, "CUDAGraph", lambda *a, **kw: _Graph(dev))
    monkeypatch.setattr(cuda, "graph", dev.graph)
    monkeypatch.setattr(cuda, "synchronize", lambda *a, **kw: dev.synchronize())
    monkeypatch.setattr(cuda, "_sleep", dev.sleep, raising=False)
    monkeypatch.setattr(cuda, "get_device_properties", dev.properties)
    try:  # compile_only wraps Triton's launch path once per process: undo it after the test
        from triton.runtime.jit import JITFunction

        monkeypatch.setattr(JITFunction, "run", JITFunction.run)
    except ImportError:
        pass
    return dev


@pytest.fixture
def standin_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandinDevice]:
    """A stand-in CUDA device (see the module docstring); everything is restored after the test, and the
    device limits it cached are forgotten (else a later interpreter test reads the stand-in's: a sweep under
    the stand-in left them, and 15 softmax tests run after it failed)."""
    yield install(monkeypatch)
    runtime.device_limits.cache_clear()
