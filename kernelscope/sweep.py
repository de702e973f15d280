"""Launch-config sweep of every Triton variant of one case, every config recorded as data.

Not ``@triton.autotune``: autotune keeps only the winner, while the report needs every config's fate
(pruned and why, failed to compile and why, wrong result, or its compile, first-call and steady time),
the spread from worst to best and where the hand-written default config stands.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from kernelscope import correctness, faults, gpus, placement, runtime, timing
from kernelscope.spec import Implementation, KernelSpec, Shape


def config_key(config: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(config.items()))


def candidate_configs(impl: Implementation, shape: Shape, dtype: torch.dtype, max_configs: int | None) -> list[dict]:
    """The variant's declared space, default config first (always kept), capped at ``max_configs``."""
    default = dict(impl.default_config(shape, dtype))
    configs = [default] + [dict(c) for c in impl.configs(shape, dtype) if dict(c) != default]
    return configs[:max_configs] if max_configs else configs


def _prepare_config(spec: KernelSpec, impl: Implementation, inputs, config: dict[str, Any], out) -> dict[str, Any]:
    """Build the closure over ``out`` and compile one config (no GPU lock: compiles launch nothing). Every
    config writes the one output: they run one at a time, each checked right after its call."""
    try:
        fn = impl.prepare(inputs, out, config)
        kernels: list[dict[str, Any]] = []
        return {"out": out, "fn": fn, "compile_ms": timing.compile_only(fn, kernels), "kernels": kernels}
    except Exception as exc:  # compile failures (OutOfResources, ...) are data
        return {
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "fault": faults.status(exc),
            "traceback": traceback.format_exc(limit=6),
        }


def _failed(rec: dict[str, Any], exc: BaseException) -> None:
    """Record a config that raised (compile, launch, OOM, hang: ``fault`` says which) and clean up after it."""
    rec.update(
        {
            "status": "failed",
            "fault": faults.status(exc),
            "reason": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exc(limit=6),
        }
    )
    faults.after_failure()


#: what a config's record keeps of a measurement
_KEPT = ("median_us", "p20_us", "p80_us", "min_us", "max_us", "n", "ci95_low_us", "ci95_high_us", "l2_flushed")


def _time_config(fn, settings: timing.TimingSettings, flush: timing.L2Flusher, first_call_us: float) -> dict[str, Any]:
    """One config's time, for ranking: device time (CUPTI kernel timestamps), sized by its first call; event
    medians of kernels of a few µs carry the host's launch path, and two runs' sweeps picked different configs
    by them (docs/timing-basis.md). Where the device basis does not run (no CUPTI), event samples instead;
    ``basis`` says which."""
    for _ in range(settings.warmup):
        fn()
    device = timing.measure_device(fn, settings, flush, first_call_us)
    if device.get("status") == "ok":
        return {**{k: device[k] for k in _KEPT}, "device_samples_us": device["samples_us"], "basis": "device"}
    # warmed above, the clock too (once per case, by the caller)
    warm = dataclasses.replace(settings, warmup=0, clock_warmup_s=0.0)
    measured = timing.measure(fn, warm, with_first_call=False, flush=flush)
    out = {**{k: measured[k] for k in _KEPT}, "samples_us": measured["samples_us"], "basis": "event"}
    if device.get("status") == "failed":
        out["device_failure"] = device.get("reason")
    return out


@dataclasses.dataclass(eq=False)  # slots are found by identity
class _Checked:
    """One variant after its configs were compiled and checked, before the exclusive section times them:
    every config's record, and the correct ones with their closures (``timed``)."""

    impl: Implementation
    records: list[dict[str, Any]]
    timed: list[tuple[dict[str, Any], Any]]


def _check_variant(
    spec: KernelSpec,
    impl: Implementation,
    shape: Shape,
    dtype: torch.dtype,
    inputs,
    expected,
    out,
    max_configs: int | None,
    compile_workers: int,
) -> _Checked:
    """Every config of one variant: pruned by the module's rule, compiled (``compile_workers`` threads, no
    lock), then each checked against the reference (shared GPU lock)."""
    limits = runtime.device_limits()
    tol = spec.tolerance(dtype)
    default = dict(impl.default_config(shape, dtype))
    records: list[dict[str, Any]] = []
    for config in candidate_configs(impl, shape, dtype, max_configs):
        rec: dict[str, Any] = {"config": config, "key": config_key(config), "is_default": config == default}
        reason = impl.prune(config, shape, dtype, limits) if impl.prune else None
        records.append({**rec, "status": "pruned", "reason": reason} if reason else rec)
    todo = [r for r in records if "status" not in r]
    with concurrent.futures.ThreadPoolExecutor(max(1, compile_workers)) as pool:
        built = list(pool.map(lambda r: _prepare_config(spec, impl, inputs, r["config"], out), todo))
    timed: list[tuple[dict[str, Any], Any]] = []
    for rec, made in zip(todo, built):
        if "error" in made:
            rec.update(
                {"status": "failed", "fault": made["fault"], "reason": made["error"], "traceback": made["traceback"]}
            )
            continue
        rec["compile_ms"] = made["compile_ms"]
        if made["kernels"]:  # registers, local (spill) and shared memory, from the driver (timing.kernel_resources)
            rec["kernels"] = made["kernels"]

        def first_call_and_check(made=made, rec=rec) -> dict[str, Any]:
            with gpus.shared(f"sweep check {rec['key']}"), faults.bounded(f"{impl.name} {rec['key']}"):
                made["out"].fill_(float("nan"))
                first_call_ms = timing.first_call(made["fn"])
                rec.setdefault("first_call_ms", first_call_ms)  # a retry's is not a first call
                return correctness.compare(made["fn"](), expected, tol.atol, tol.rtol)

        retried: list[str] = []
        try:
            check = faults.retry_oom(first_call_and_check, retried)
        except Exception as exc:  # launch failures, OOMs and hangs are data too
            _failed(rec, exc)
            continue
        finally:
            if retried:  # out of memory, then run again: the card's memory was (also) other jobs'
                rec["oom_retries"] = retried
        if not check["ok"]:
            rec.update({"status": "wrong", "reason": check["failure"], "max_abs_err": check["max_abs_err"]})
            continue
        timed.append((rec, made["fn"]))
    return _Checked(impl, records, timed)


def _time_checked(
    checked: _Checked,
    settings: timing.TimingSettings,
    flush: timing.L2Flusher,
    places: placement.Placements | None,
) -> None:
    """Time the correct configs of one variant back to back (inside the caller's exclusive section)."""
    name = checked.impl.name
    for rec, fn in checked.timed:
        try:
            with faults.bounded(f"{name} {rec['key']}"):
                call = places.rotating(fn) if places is not None else fn
                rec.update(_time_config(call, settings, flush, rec["first_call_ms"] * 1e3))
                if places is not None and rec.get("basis") == "device":
                    rec["placements"] = places.copies
        except Exception as exc:  # noqa: BLE001 - recorded; the other configs still run
            _failed(rec, exc)
            continue
        rec["status"] = "ok"


def _placements(
    inputs, out, checked: Sequence[_Checked], settings: timing.TimingSettings
) -> placement.Placements | None:
    """Copies of the inputs and the output for every config's device-time calls to rotate over (as the timing
    stage's: kernelscope.placement), each config's closure called at every placement under the shared lock.
    A config that fails there is recorded as failed and not timed."""
    if runtime.select_backend() != "cuda" or settings.placements <= 1 or not any(c.timed for c in checked):
        return None
    with gpus.shared("sweep placements"):
        tensors = [t for t in inputs.values() if isinstance(t, torch.Tensor)] + [out]
        places = placement.for_case(tensors, settings.placements, settings.placement_bytes)
        if places is None:
            return None
        for variant in checked:
            for rec, fn in list(variant.timed):
                try:
                    with faults.bounded(f"{variant.impl.name} {rec['key']}"):
                        places.warm(fn)
                except Exception as exc:  # noqa: BLE001 - recorded; the other configs still run
                    _failed(rec, exc)
                    variant.timed.remove((rec, fn))
        runtime.synchronize()
    return places


#: why a checked variant's configs have no time, in what the watchdog writes (kernelscope.faults)
ABANDONED = "not timed: the job was ended by a hang that could not be interrupted before these configs were timed"


def results_so_far(slots: Sequence[dict[str, Any] | _Checked | None], keep_default_within: float) -> list[dict]:
    """The variants' results, in order, up to the first variant not yet checked: a final one as it is, a checked
    one summarized once every config has its fate, else with its untimed configs marked ``ABANDONED`` (those
    already timed keep their times). What the sweep returns, and what a hang leaves for the watchdog to write."""
    out = []
    for slot in slots:
        if slot is None:
            break
        if isinstance(slot, dict):
            out.append(slot)
        elif all("status" in r for r in slot.records):
            out.append(
                {"implementation": slot.impl.name, "status": "ok", **summarize(slot.records, keep_default_within)}
            )
        else:
            records = [r if "status" in r else {**r, "status": "not_timed", "reason": ABANDONED} for r in slot.records]
            name = slot.impl.name
            out.append(
                {"implementation": name, "status": "not_timed", "reason": ABANDONED, "configs": records, "best": None}
            )
    return out


def sweep_variants(
    spec: KernelSpec,
    impls: Sequence[Implementation],
    shape: Shape,
    dtype: torch.dtype,
    settings: timing.TimingSettings,
    max_configs: int | None = None,
    seed: int = 0,
    compile_workers: int = 1,
    keep_default_within: float = 0.0,
    slots: list | None = None,
) -> list[dict[str, Any]]:
    """Every config of every variant in ``impls`` on one case, in three phases: one set of inputs, one fp64
    reference and one output for all of them (shared lock); each variant's configs compiled (no lock) and
    checked against the reference (shared lock); then every correct config timed back to back in **one**
    exclusive section for the whole case. Each GPU-lock acquisition costs the time the shared holders
    already on the card take to leave (docs/timing-basis.md), so a section per variant cost that once per
    variant. Each config is ranked by its device time (CUPTI kernel timestamps) where the device basis ran,
    else by its event median; ``basis`` says which. ``slots`` (filled in place, one per variant) is the state
    that :func:`results_so_far` reads, for the watchdog."""
    slots = [] if slots is None else slots
    slots[:] = [
        {"implementation": i.name, "status": "unsupported", "reason": r, "configs": []} if r else None
        for i, r in ((i, i.unsupported_reason(shape, dtype)) for i in impls)
    ]
    if all(isinstance(slot, dict) for slot in slots):
        return results_so_far(slots, keep_default_within)
    with gpus.shared("sweep inputs"):
        inputs = spec.make_inputs(shape, dtype, runtime.device(), seed)
        try:
            expected = correctness.reference_for(spec, inputs)
        except correctness.ReferenceFailed as exc:  # no config can be checked, so none is timed
            faults.after_failure()
            failed = {
                "status": correctness.REFERENCE_ERROR,
                "reason": f"not swept: {exc}, so no config could be checked",
                "configs": [],
                "best": None,
                "traceback": traceback.format_exc(limit=6),
            }
            slots[:] = [
                s if isinstance(s, dict) else {"implementation": i.name, **failed} for s, i in zip(slots, impls)
            ]
            return results_so_far(slots, keep_default_within)
        runtime.synchronize()
    out = spec.make_output(inputs)
    for i, impl in enumerate(impls):
        if slots[i] is None:
            slots[i] = _check_variant(spec, impl, shape, dtype, inputs, expected, out, max_configs, compile_workers)
    checked = [s for s in slots if isinstance(s, _Checked)]
    places = _placements(inputs, out, checked, settings)
    flush = timing.L2Flusher(settings.flush_l2)
    to_time = [c for c in checked if c.timed]
    if to_time:
        with gpus.exclusive("sweep"):
            # the configs run back to back: the clock leaves idle once, on the first of them
            timing.warm_clocks(to_time[0].timed[0][1], settings.clock_warmup_s)
            for variant in to_time:
                _time_checked(variant, settings, flush, places)
    return results_so_far(slots, keep_default_within)


def sweep_case(
    spec: KernelSpec,
    shape: Shape,
    dtype: torch.dtype,
    settings: timing.TimingSettings,
    max_configs: int | None = None,
    compile_workers: int = 1,
    keep_default_within: float = 0.0,
) -> dict[str, Any]:
    """Every Triton variant of one case (one job, so process start-up is paid once per case, and one
    exclusive section, so the card is taken once)."""
    slots: list = []
    # CUPTI's first start in a process takes seconds: before any exclusive section (docs/timing-basis.md)
    timing.prepare_device_basis(lambda: gpus.shared("device basis"))
    # if a hang cannot be interrupted, the job writes the variants as far as they got (faults.bounded)
    faults.on_abandon(
        lambda label: {"variants": results_so_far(slots, keep_default_within), "compile_workers": compile_workers}
    )
    variants = sweep_variants(
        spec,
        spec.triton_variants,
        shape,
        dtype,
        settings,
        max_configs,
        compile_workers=compile_workers,
        keep_default_within=keep_default_within,
        slots=slots,
    )
    return {"variants": variants, "compile_workers": compile_workers}


def best_configs(doc: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Variant name -> the config its sweep chose, for the variants that have one."""
    return {v["implementation"]: v["best"]["config"] for v in (doc or {}).get("variants", []) if v.get("best")}


def summarize(records: Sequence[dict[str, Any]], keep_default_within: float = 0.0) -> dict[str, Any]:
    """The sweep's outcome. ``best`` is the config the timing stage times: the module's default where its
    median is within ``keep_default_within`` (a fraction) of the fastest's, else the fastest. Two machines'
    sweeps of one config differ by a few percent (docs/timing-basis.md), so a config "faster" than the
    default by less than that is a tie that another run breaks the other way. ``fastest``, the spread
    (``worst_over_best``) and the default's rank are always against the fastest."""
    ok = [r for r in records if r["status"] == "ok"]
    counts = {s: sum(1 for r in records if r["status"] == s) for s in ("ok", "pruned", "failed", "wrong")}
    out: dict[str, Any] = {"configs": list(records), "counts": counts}
    if not ok:
        out.update(best=None, status="no_valid_config")
        return out
    ranked = sorted(ok, key=lambda r: r["median_us"])
    fastest, worst = ranked[0], ranked[-1]
    default = next((r for r in records if r["is_default"]), None)
    kept = (
        default is not None
        and default is not fastest
        and default["status"] == "ok"
        and default["median_us"] <= fastest["median_us"] * (1.0 + keep_default_within)
    )
    chosen = default if kept else fastest
    out["best"] = {"config": chosen["config"], "key": chosen["key"], "median_us": chosen["median_us"]}
    out["keep_default_within"] = keep_default_within
    if kept:
        out["best"]["chosen_by"] = "default within keep_default_within of the fastest"
        out["fastest"] = {"config": fastest["config"], "key": fastest["key"], "median_us": fastest["median_us"]}
    out["worst_over_best"] = worst["median_us"] / fastest["median_us"]
    if default is not None:
        out["default"] = {
            "config": default["config"],
            "status": default["status"],
            "median_us": default.get("median_us"),
            "over_best": default["median_us"] / fastest["median_us"] if default["status"] == "ok" else None,
            "rank": 1 + ranked.index(default) if default["status"] == "ok" else None,
            "of": len(ranked),
        }
    out["first_call_ms_median"] = float(np.median([r["first_call_ms"] for r in ok]))
    compiles = [r["compile_ms"] for r in ok if r.get("compile_ms") is not None]
    out["compile_ms_median"] = float(np.median(compiles)) if compiles else None
    return out
