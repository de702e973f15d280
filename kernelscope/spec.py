"""The one declaration of a kernel that every stage, every test and the report read.

A kernel module in ``kernels/`` builds one :class:`KernelSpec` and binds it to the name ``KERNEL``.
Everything else (which cases exist, how they are checked, timed, swept, profiled and reported) is
derived from that object; no stage hard-codes a kernel.

An *implementation* is anything that computes the kernel's function: a Triton variant with a launch
config space, or a baseline (torch eager, ``torch.compile``, ...). Each one is a factory, in the style
of TritonBench's providers: ``prepare(inputs, out, config)`` does all allocation and set-up and returns
a zero-argument closure that runs the computation once and returns the output tensor. Only the closure
is ever timed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from kernelscope.naming import shape_id

#: dtypes a config may name, by their config spelling.
DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
}

#: named inputs of one problem: tensors, plus plain problem parameters (``causal: True``) that the
#: harness passes through untouched (only tensors are cast for the reference, cloned and compared)
Inputs = dict[str, Any]
Closure = Callable[[], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Element-wise acceptance ``|out - ref| <= atol + rtol * |ref|`` against the fp64 reference."""

    atol: float
    rtol: float
    reason: str

    def __post_init__(self) -> None:
        if self.atol < 0 or self.rtol < 0:
            raise ValueError(f"tolerance must be non-negative, got atol={self.atol} rtol={self.rtol}")
        if not self.reason.strip():
            raise ValueError("a tolerance needs a reason: say where the error comes from")


@dataclasses.dataclass(frozen=True)
class Shape:
    """One problem size, with the reason it is in the set (which regime it probes)."""

    params: Mapping[str, int]
    reason: str

    @property
    def id(self) -> str:
        """Path-safe identifier, e.g. ``M4096_N1000``; used in result paths and wildcards."""
        return shape_id(self.params)

    def __getitem__(self, key: str) -> int:
        return int(self.params[key])


@dataclasses.dataclass(frozen=True)
class Invariant:
    """A property besides closeness (softmax rows sum to 1, ...). ``measure`` returns an error >= 0;
    ``limit(dtype, inputs)`` the largest error allowed (the inputs give sizes that bounds may grow with).

    ``tighter_than_tolerance`` names the dtypes at which the invariant is stricter than the kernel's tolerance
    (under Triton's interpreter, where the tests run): an output as far from the reference as the tolerance
    allows, everywhere, passes the element-wise check by construction and must fail this invariant at those
    dtypes, and pass it at the others (tests/test_gate.py checks both ways).
    """

    name: str
    measure: Callable[[torch.Tensor, Inputs], float]
    limit: Callable[[torch.dtype, Inputs], float]
    reason: str
    tighter_than_tolerance: tuple[torch.dtype, ...] = ()


class Declined(str):
    """A ``supports`` reason that declines a case by a resource budget (memory, time) the implementation
    sets itself, rather than by design: the code would compute the case, but not within the budget. The
    report words the two apart ("declined: ..." vs "unsupported: ..."); everywhere else it is a plain reason."""


#: the metrics a :class:`Target` can set a floor on
TARGET_METRICS = {"speedup": "× {baseline}", "pct_copy_bw": " % of copy bandwidth"}


@dataclasses.dataclass(frozen=True)
class Target:
    """A performance goal a kernel was built for; the report scores it on every case it covers.

    ``metric`` is ``"speedup"`` (``baseline``'s time over ``variant``'s time, ≥ ``at_least``) or
    ``"pct_copy_bw"`` (the variant's minimal traffic per second as % of the run's measured copy bandwidth).
    A target covers the cases whose dtype is in ``dtypes`` (every dtype when empty), whose shape parameters
    lie in ``shapes`` (inclusive ``(low, high)`` bounds, ``None`` for an open end) and whose minimal traffic
    is at least ``min_bytes``.
    """

    variant: str
    metric: str
    at_least: float
    reason: str
    baseline: str | None = None
    dtypes: tuple[str, ...] = ()
    shapes: Mapping[str, tuple[int | None, int | None]] = dataclasses.field(default_factory=dict)
    min_bytes: float = 0.0

    def __post_init__(self) -> None:
        if self.metric not in TARGET_METRICS:
            raise ValueError(
                f"target for {self.variant!r}: metric must be one of {sorted(TARGET_METRICS)}, got {self.metric!r}"
            )
        if (self.metric == "speedup") != (self.baseline is not None):
            raise ValueError(f"target for {self.variant!r}: a speedup target names its baseline, and only it does")
        if not self.reason.strip():
            raise ValueError(f"target for {self.variant!r} needs a reason: say why this number")
        unknown = set(self.dtypes) - set(DTYPES)
        if unknown:
            raise ValueError(f"target for {self.variant!r}: unknown dtypes {sorted(unknown)}")

    @property
    def label(self) -> str:
        """``triton_flash ≥ 0.8× sdpa; bfloat16; D = 128, S ≥ 4096``: the target as one line."""
        goal = f"{self.variant} ≥ {self.at_least:g}" + TARGET_METRICS[self.metric].format(baseline=self.baseline)
        scope = []
        if self.dtypes:
            scope.append(", ".join(self.dtypes))
        bounds = []
        for key, (low, high) in self.shapes.items():
            if low is not None and low == high:
                bounds.append(f"{key} = {low}")
            elif low is not None and high is not None:
                bounds.append(f"{key} {low}–{high}")
            elif low is not None:
                bounds.append(f"{key} ≥ {low}")
            elif high is not None:
                bounds.append(f"{key} ≤ {high}")
        if bounds:
            scope.append(", ".join(bounds))
        if self.min_bytes:
            scope.append(f"≥ {self.min_bytes / 1e6:g} MB moved")
        return "; ".join([goal, *scope])

    def covers(self, params: Mapping[str, int], dtype_name: str, nbytes: float) -> bool:
        if self.dtypes and dtype_name not in self.dtypes:
            return False
        for key, (low, high) in self.shapes.items():
            value = params.get(key)
            if value is None or (low is not None and value < low) or (high is not None and value > high):
                return False
        return nbytes >= self.min_bytes


@dataclasses.dataclass(frozen=True)
class Implementation:
    """One way to compute the kernel.

    ``kind`` is ``"triton"`` for variants written here (swept over ``configs``), ``"eager"`` for torch
    eager baselines and ``"compile"`` for ``torch.compile`` baselines (first call = compile time).
    ``configs(shape, dtype)`` lists the launch-config space; ``default_config(shape, dtype)`` is the
    hand-written heuristic a user would get without tuning, so the report can say where it stands.
    ``prune(config, shape, dtype, limits)`` returns a reason string when a config cannot fit the device
    (shared memory, registers), so it is recorded and not compiled. ``supports(shape, dtype)`` returns a
    reason string when the implementation does not handle the case at all: a :class:`Declined` reason when
    it declines the case by its own resource budget, a plain string when the case is outside its design.

    A negative control says in ``rejected_for`` what the gate must find wrong with it, as the gate words it
    (part of its failure message: ``"elements outside atol"``, ``"non-finite outputs where the reference is
    finite"``, an invariant's name): the tests check that each control is rejected for that, and not by some
    other check it trips by accident, nor by crashing.
    """

    name: str
    kind: str
    prepare: Callable[[Inputs, torch.Tensor | None, Mapping[str, Any]], Closure]
    description: str = ""
    configs: Callable[[Shape, torch.dtype], list[dict[str, Any]]] | None = None
    default_config: Callable[[Shape, torch.dtype], dict[str, Any]] | None = None
    prune: Callable[[Mapping[str, Any], Shape, torch.dtype, Mapping[str, Any]], str | None] | None = None
    supports: Callable[[Shape, torch.dtype], str | None] | None = None
    writes_out: bool = True
    rejected_for: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("triton", "eager", "compile"):
            raise ValueError(f"implementation {self.name!r}: kind must be triton, eager or compile, got {self.kind!r}")
        if self.kind == "triton" and (self.configs is None or self.default_config is None):
            raise ValueError(f"triton implementation {self.name!r} needs configs and default_config")

    @property
    def is_baseline(self) -> bool:
        return self.kind != "triton"

    def unsupported_reason(self, shape: Shape, dtype: torch.dtype) -> str | None:
        return self.supports(shape, dtype) if self.supports else None


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """Everything kernelscope needs to know about one kernel.

    * ``make_inputs(shape, dtype, device, seed)`` returns named input tensors drawn from a seeded
      generator (never zeros), on ``device`` (use :func:`generator` and :func:`randn`), plus any plain
      problem parameters ``prepare`` needs (``prepare`` sees the inputs, not the shape).
    * ``make_output(inputs)`` allocates the output that Triton variants write into (poisoned by the
      correctness stage before each run).
    * ``reference(inputs)`` computes the result in float64 from float64 copies of the floating-point
      input tensors (other values as they are).
    * ``flops(shape)`` and ``bytes_moved(shape, dtype)`` are the minimal work and traffic (each input
      read once, each output written once) from which GFLOP/s, GB/s and the roofline follow.
    * ``shape_sets`` maps a set name (``cpu`` for the interpreter, ``gpu`` for a real device, ...) to
      shapes, each with its reason.
    """

    name: str
    description: str
    make_inputs: Callable[[Shape, torch.dtype, torch.device, int], Inputs]
    make_output: Callable[[Inputs], torch.Tensor]
    reference: Callable[[Inputs], torch.Tensor]
    implementations: Sequence[Implementation]
    tolerances: Mapping[torch.dtype, Tolerance]
    flops: Callable[[Shape], float]
    bytes_moved: Callable[[Shape, torch.dtype], float]
    shape_sets: Mapping[str, Sequence[Shape]]
    invariants: Sequence[Invariant] = ()
    #: deliberately broken implementations that the correctness gate must reject, run in every
    #: correctness job so the report shows the gate is live (KernelBench-style adversarial checks)
    negative_controls: Sequence[Implementation] = ()
    #: implementation that the Triton variants are ranked against (the one users would otherwise call)
    primary_baseline: str = "torch"
    #: the performance goals the kernel was built for, each with its reason; the report scores them
    targets: Sequence[Target] = ()

    def __post_init__(self) -> None:
        names = [impl.name for impl in (*self.implementations, *self.negative_controls)]
        if len(set(names)) != len(names):
            raise ValueError(f"kernel {self.name!r}: implementation names repeat: {names}")
        for control in self.negative_controls:
            if not control.rejected_for.strip():
                raise ValueError(
                    f"kernel {self.name!r}: negative control {control.name!r} must say what the gate must reject it "
                    f"for: rejected_for=<part of the gate's failure message>, e.g. 'elements outside atol' or "
                    f"'non-finite outputs where the reference is finite'"
                )
        if self.primary_baseline not in [impl.name for impl in self.baselines]:
            raise ValueError(
                f"kernel {self.name!r}: primary_baseline {self.primary_baseline!r} is not one of its "
                f"baselines {[impl.name for impl in self.baselines]}"
            )
        # Targets are not checked against the implementations here: a declaration narrowed to some of them (a
        # config's variant selection) keeps every target. That each declared target names a real variant and
        # baseline is checked over the kernel modules (tests/test_targets.py).
        for set_name, shapes in self.shape_sets.items():
            ids = [s.id for s in shapes]
            if len(set(ids)) != len(ids):
                raise ValueError(f"kernel {self.name!r}: shape set {set_name!r} repeats a shape: {ids}")

    def implementation(self, name: str) -> Implementation:
        for impl in (*self.implementations, *self.negative_controls):
            if impl.name == name:
                return impl
        raise KeyError(
            f"kernel {self.name!r} has no implementation {name!r}; it has {[i.name for i in self.implementations]}"
        )

    @property
    def triton_variants(self) -> list[Implementation]:
        return [impl for impl in self.implementations if impl.kind == "triton"]

    @property
    def baselines(self) -> list[Implementation]:
        return [impl for impl in self.implementations if impl.is_baseline]

    def shape(self, shape_set: str, shape_id: str) -> Shape:
        try:
            shapes = self.shape_sets[shape_set]
        except KeyError:
            raise KeyError(
                f"kernel {self.name!r} has no shape set {shape_set!r}; it has {sorted(self.shape_sets)}"
            ) from None
        for shape in shapes:
            if shape.id == shape_id:
                return shape
        raise KeyError(f"kernel {self.name!r}, shape set {shape_set!r} has no shape {shape_id!r}")

    def declaration(self, shape: Shape, dtype_name: str) -> dict[str, Any]:
        """What the reading side needs of this declaration for one case, as data: every per-case result carries
        it (``cli._case_header``), so the report, the claims and a comparison read a run from its results
        alone, never from the kernel modules installed when they are read. FLOPs and bytes keep the type the
        models return (a CSV prints an int and a float apart); targets are those that cover the case; each
        implementation's ``supports`` reason is recorded with whether it is a :class:`Declined` budget."""
        dtype = DTYPES[dtype_name]
        nbytes = self.bytes_moved(shape, dtype)

        def implementation(impl: Implementation) -> dict[str, Any]:
            reason = impl.unsupported_reason(shape, dtype)
            return {
                "name": impl.name,
                "kind": impl.kind,
                "description": impl.description,
                "unsupported": None if reason is None else str(reason),
                "declined": isinstance(reason, Declined),
            }

        return {
            "description": self.description,
            "flops": self.flops(shape),
            "bytes_moved": nbytes,
            "invariants": [{"name": inv.name, "reason": inv.reason} for inv in self.invariants],
            "implementations": [implementation(i) for i in self.implementations],
            "negative_controls": [
                {"name": c.name, "description": c.description, "rejected_for": c.rejected_for}
                for c in self.negative_controls
            ],
            "primary_baseline": self.primary_baseline,
            "targets": [
                {
                    "label": t.label,
                    "variant": t.variant,
                    "baseline": t.baseline,
                    "metric": t.metric,
                    "at_least": t.at_least,
                    "reason": t.reason,
                }
                for t in self.targets
                if t.covers(shape.params, dtype_name, nbytes)
            ],
        }

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        try:
            return self.tolerances[dtype]
        except KeyError:
            raise KeyError(f"kernel {self.name!r} declares no tolerance for {dtype}") from None


def shape_entry(reason: str, **params: int) -> Shape:
    """``shape_entry("why this size", M=4096, N=1000)``: a shape-set entry, reason first so it reads as a list."""
    return Shape(params, reason)


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def numel(*dims: int) -> int:
    return math.prod(int(d) for d in dims)


def randn(
    shape: Sequence[int], dtype: torch.dtype, generator: torch.Generator, scale: float = 1.0, shift: float = 0.0
) -> torch.Tensor:
    """Seeded normal samples ``shift + scale * N(0, 1)``, drawn in fp32 on the generator's device.

    Drawn on the device itself: multi-GB inputs made on the host would dominate a GPU run's wall time.
    """
    x = torch.randn(tuple(shape), generator=generator, dtype=torch.float32, device=generator.device)
    return (x * scale + shift).to(dtype)


def generator(seed: int, device: torch.device | str) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
