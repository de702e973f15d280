"""Correctness gate: every implementation against the fp64 reference, over several seeds.

For each seed the output is poisoned (NaN) before the run, so an element the kernel never wrote shows
up as NaN and fails; NaN or Inf where the reference is finite always fails. On the first seed the run
is repeated with a different poison (a large finite sentinel), and the two outputs must agree bit for
bit: that catches unwritten elements where the reference itself is NaN, and races (a result that moves
between identical runs). The inputs must come back unchanged.

A reference that raises is the kernel declaration's fault, not the implementation's: every record of the
case gets status ``reference_error`` (not checked, so never timed) and the case's ``reference_error`` says
what the reference raised.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from kernelscope import faults, gpus, runtime, timing
from kernelscope.spec import Declined, Implementation, Inputs, KernelSpec, Shape

SENTINEL = -1234.5  # second poison: finite, exactly representable in fp16/bf16/fp32, not a plausible result
REFERENCE_ERROR = "reference_error"


class ReferenceFailed(Exception):
    """The kernel's fp64 reference raised: no implementation can be checked against it."""


def compare(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> dict[str, Any]:
    """Error metrics of ``actual`` against the fp64 ``expected``; ``ok`` only if every element is close.

    Where the reference is NaN or +-Inf, the output must be the same non-finite value; where it is
    finite, the output must be finite and within ``atol + rtol * |expected|``.
    """
    if actual.shape != expected.shape:
        return {"ok": False, "failure": f"shape {tuple(actual.shape)} != reference shape {tuple(expected.shape)}"}
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(device=a.device, dtype=torch.float64)
    finite_ref = torch.isfinite(e)
    a_f, e_f = a[finite_ref], e[finite_ref]
    nonfinite_out = int((~torch.isfinite(a_f)).sum())
    nan_out = int(torch.isnan(a).sum())
    # Non-finite reference positions: same NaN-ness and same infinity.
    a_n, e_n = a[~finite_ref], e[~finite_ref]
    special_mismatch = int((~((torch.isnan(a_n) & torch.isnan(e_n)) | (a_n == e_n))).sum())
    diff = (a_f - e_f).abs()
    bound = atol + rtol * e_f.abs()
    bad = int(((diff > bound) | ~torch.isfinite(diff)).sum())
    # a NaN or infinite output where the reference is finite makes the error NaN or infinite, never 0
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / e_f.abs().clamp_min(torch.finfo(torch.float64).tiny)
    ref_norm = float(torch.linalg.vector_norm(e_f)) if e_f.numel() else 0.0
    err_norm = float(torch.linalg.vector_norm(torch.nan_to_num(a_f - e_f, nan=math.inf))) if e_f.numel() else 0.0
    failures = []
    if nonfinite_out:
        failures.append(f"{nonfinite_out} non-finite outputs where the reference is finite")
    if special_mismatch:
        failures.append(f"{special_mismatch} outputs differ where the reference is NaN/Inf")
    if bad > nonfinite_out:
        failures.append(f"{bad - nonfinite_out} elements outside atol={atol:g} rtol={rtol:g}")
    return {
        "ok": not failures,
        "failure": "; ".join(failures) or None,
        "max_abs_err": max_abs,
        "max_rel_err": float(rel.max()) if rel.numel() else 0.0,
        "rel_l2_err": err_norm / ref_norm if ref_norm > 0 else err_norm,
        "n_elements": int(a.numel()),
        "n_bad": bad + special_mismatch,
        "n_nan": nan_out,
        "worst_index": _worst_index(diff, bound, finite_ref) if bad else None,
    }


def _worst_index(diff: torch.Tensor, bound: torch.Tensor, finite_ref: torch.Tensor) -> list[int]:
    excess = torch.where(torch.isfinite(diff), diff - bound, torch.full_like(diff, math.inf))
    flat = int(torch.argmax(excess))
    positions = torch.nonzero(finite_ref, as_tuple=False)[flat]
    return [int(i) for i in positions]


def reference_for(spec: KernelSpec, inputs: Inputs) -> torch.Tensor:
    """The fp64 reference, computed on the inputs' device from float64 copies; :class:`ReferenceFailed`
    (saying what it raised) where the kernel's ``reference()`` raises."""
    upcast = {
        k: v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in inputs.items()
    }
    try:
        with torch.no_grad():
            return spec.reference(upcast)
    except Exception as exc:
        raise ReferenceFailed(f"the reference of {spec.name} raised {type(exc).__name__}: {exc}") from exc


def run_poisoned(
    impl: Implementation, spec: KernelSpec, inputs: Inputs, config: Mapping[str, Any], poison: float
) -> torch.Tensor:
    out = spec.make_output(inputs)
    out.fill_(poison)
    if not impl.writes_out:
        _poison_allocator(out, poison)
    closure = impl.prepare(inputs, out, config)
    with torch.no_grad():
        result = closure()
    runtime.synchronize()
    return result


def _poison_allocator(like: torch.Tensor, poison: float) -> None:
    """Fill freed allocator blocks of the output's size with poison, so that an implementation that
    returns a fresh ``torch.empty`` without writing every element cannot inherit a correct result."""
    scratch = [torch.full_like(like, poison) for _ in range(2)]
    del scratch


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal, NaN in the same places counting as equal (``torch.equal`` says NaN != NaN, so an
    input holding a NaN would always read as modified)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a[~nan_a], b[~nan_b])


def check_seed(
    spec: KernelSpec,
    impl: Implementation,
    shape: Shape,
    dtype: torch.dtype,
    seed: int,
    config: Mapping[str, Any],
    repeat: bool,
) -> dict[str, Any]:
    device = runtime.device()
    tol = spec.tolerance(dtype)
    inputs = spec.make_inputs(shape, dtype, device, seed)
    before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    expected = reference_for(spec, inputs)
    actual = run_poisoned(impl, spec, inputs, config, math.nan)
    record = {"seed": seed, **compare(actual, expected, tol.atol, tol.rtol)}
    failures = [record["failure"]] if record["failure"] else []
    if actual.dtype != dtype:
        failures.append(f"output dtype {actual.dtype} != input dtype {dtype}")
    for inv in spec.invariants:
        err = inv.measure(actual, inputs)
        limit = inv.limit(dtype, inputs)
        record[inv.name] = err
        if not err <= limit:
            failures.append(f"{inv.name}={err:.3g} exceeds {limit:.3g} ({inv.reason})")
    changed = [k for k in before if not _same(inputs[k], before[k])]
    if changed:
        failures.append(f"inputs modified: {changed}")
    if repeat:
        again = run_poisoned(impl, spec, inputs, config, SENTINEL)
        same = torch.equal(
            torch.nan_to_num(again.float(), nan=0.0), torch.nan_to_num(actual.float(), nan=0.0)
        ) and torch.equal(torch.isnan(again), torch.isnan(actual))
        record["repeat_identical"] = bool(same)
        if not same:
            failures.append("a second run with another poison differs: unwritten elements or a race")
    record["ok"] = not failures
    record["failure"] = "; ".join(failures) or None
    return record


def _worst(errors: Iterable[float]) -> float:
    """The largest error, NaN if any is NaN (``max`` would keep or drop a NaN depending on its position)."""
    values = list(errors)
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def check_implementation(
    spec: KernelSpec,
    impl: Implementation,
    shape: Shape,
    dtype: torch.dtype,
    seeds: Sequence[int],
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Check one implementation over all seeds; exceptions are recorded, never raised."""
    result: dict[str, Any] = {"implementation": impl.name, "kind": impl.kind, "config": dict(config or {})}
    reason = impl.unsupported_reason(shape, dtype)
    if reason:
        return {
            **result,
            "status": "unsupported",
            "reason": reason,
            "declined": isinstance(reason, Declined),
            "ok": None,
            "seeds": [],
        }
    records: list[dict[str, Any]] = []
    retried: list[str] = []

    def check_seeds() -> None:
        records.clear()
        with faults.bounded(impl.name):
            for i, seed in enumerate(seeds):
                records.append(check_seed(spec, impl, shape, dtype, seed, config or {}, repeat=(i == 0)))

    try:
        faults.retry_oom(check_seeds, retried)
    except ReferenceFailed as exc:  # not this implementation's fault: it was not checked
        faults.after_failure()
        return {
            **result,
            **_oom_retries(retried),
            "status": REFERENCE_ERROR,
            "ok": False,
            "seeds": records,
            "failure": f"not checked: {exc} (seed {seeds[len(records)]})",
            "reference_error": str(exc),
            "traceback": traceback.format_exc(limit=8),
        }
    except Exception as exc:  # a crashing, hanging or OOM kernel is a failing kernel, recorded with its error
        faults.after_failure()
        return {
            **result,
            **_oom_retries(retried),
            "status": faults.status(exc),
            "ok": False,
            "seeds": records,
            "failure": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        }
    ok = all(r["ok"] for r in records)
    summary = {
        key: _worst(r.get(key, math.inf) for r in records)
        for key in ("max_abs_err", "max_rel_err", "rel_l2_err", *(inv.name for inv in spec.invariants))
    }
    failure = next((f"seed {r['seed']}: {r['failure']}" for r in records if not r["ok"]), None)
    return {
        **result,
        **_oom_retries(retried),
        "status": "pass" if ok else "fail",
        "ok": ok,
        "failure": failure,
        **summary,
        "seeds": records,
    }


def _oom_retries(retried: list[str]) -> dict[str, Any]:
    """The record's ``oom_retries`` (each out-of-memory fault that was run again, kernelscope.faults.retry_oom)."""
    return {"oom_retries": list(retried)} if retried else {}


def _compile_ahead(
    spec: KernelSpec, impl: Implementation, shape: Shape, dtype: torch.dtype, seed: int, config: Mapping[str, Any]
) -> None:
    """Compile a Triton closure's kernels (a variant's, or a negative control's) before its checks take the
    GPU lock (compiles launch nothing), so the locked section holds GPU work only. Nothing to do for other
    kinds, under the interpreter, or where the case is unsupported. Any failure is left to the checks
    themselves to record."""
    if impl.kind != "triton" or runtime.select_backend() != "cuda" or impl.unsupported_reason(shape, dtype):
        return
    try:
        with gpus.shared(f"correctness inputs {impl.name}"):
            inputs = spec.make_inputs(shape, dtype, runtime.device(), seed)
        timing.compile_only(impl.prepare(inputs, spec.make_output(inputs), config))
    except Exception:  # noqa: BLE001 - the checks run it again and record what fails
        pass


def check_case(
    spec: KernelSpec,
    shape: Shape,
    dtype: torch.dtype,
    seeds: Sequence[int],
    declared: Sequence[Implementation] | None = None,
) -> dict[str, Any]:
    """Every implementation (Triton variants at their default config, baselines) and every negative
    control. A control counts as rejected only when it ran and failed by its numbers (status "fail"); one that
    crashed tested nothing (``rejected`` False, the exception in ``control_error``), nor did one the reference
    could not judge. A control unsupported here for the reason an implementation of the kernel is (the two sit
    out together) has ``rejected`` None and does not count; unsupported for a reason no implementation shares, it
    is a ``control_error``. ``declared``: every implementation the kernel module declares, where ``spec`` is
    narrowed to those a plan selected (the default: ``spec``'s own), so that a control whose variant the plan
    left out sits out for that variant's reason rather than erring. ``gate_live`` is False if any negative
    control was accepted (the tolerance is too loose) or crashed, or if none ran. ``reference_error``: what the
    reference raised, where it did (else None)."""
    implementations, controls = [], []
    tol = spec.tolerance(dtype)

    def doc() -> dict[str, Any]:
        faulted = [r for r in implementations + controls if r["status"] == REFERENCE_ERROR]
        return {
            "reference_error": faulted[0]["reference_error"] if faulted else None,
            "tolerance": {"atol": tol.atol, "rtol": tol.rtol, "reason": tol.reason},
            "seeds": list(seeds),
            "implementations": implementations,
            "negative_controls": controls,
            # live only if every declared control was rejected, but those sitting out beside the implementation
            # they guard (``rejected`` None), and at least one ran
            "gate_live": len(controls) == len(spec.negative_controls)
            and all(c["rejected"] for c in controls if c["rejected"] is not None)
            and any(c["rejected"] is not None for c in controls),
        }

    # if a hang cannot be interrupted, the job writes what it has (faults.bounded)
    faults.on_abandon(lambda label: {**doc(), "implementations": [*implementations, faults.abandoned_record(label)]})
    for impl in spec.implementations:
        config = impl.default_config(shape, dtype) if impl.kind == "triton" else {}
        _compile_ahead(spec, impl, shape, dtype, seeds[0], config)
        with gpus.shared(f"correctness {impl.name}"):  # one implementation at a time: samplers get in between
            implementations.append(check_implementation(spec, impl, shape, dtype, seeds, config))
    for impl in spec.negative_controls:
        _compile_ahead(spec, impl, shape, dtype, seeds[0], {})
        with gpus.shared(f"correctness {impl.name}"):
            rec = check_implementation(spec, impl, shape, dtype, seeds, {})
        rec["rejected"] = rec["status"] == "fail"
        if rec["status"] in ("error", "timeout", "oom", "compile_error", REFERENCE_ERROR):  # kernelscope.faults
            rec["control_error"] = rec["failure"]
        elif rec["status"] == "unsupported":
            if rec["reason"] in _sit_out_reasons(implementations, declared, shape, dtype):
                # it sits out beside the implementation it guards (same reason: e.g. a GPU-only variant under
                # the interpreter), so there is nothing here for it to guard: neither rejected nor accepted
                rec["rejected"] = None
            else:
                rec["control_error"] = f"unsupported ({rec['reason']}) where no implementation sits out for that reason"
        controls.append(rec)
    return doc()


def _sit_out_reasons(ran: list[dict], declared: Sequence[Implementation] | None, shape: Shape, dtype) -> set[str]:
    """Why implementations of the kernel sit out on this case: those this job ran, and those a narrowed plan left
    out (asked here, without running them)."""
    reasons = {r.get("reason") for r in ran if r["status"] == "unsupported"}
    names = {r["implementation"] for r in ran}
    left_out = {i.unsupported_reason(shape, dtype) for i in declared or () if i.name not in names}
    return (reasons | left_out) - {None}
