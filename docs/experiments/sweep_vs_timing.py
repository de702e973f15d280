"""Why does the sweep time a config 14 % faster than the timing stage does, for the same code and config?

In the default runs at 8a04a22 and f684623 (docs/kernel-notes.md, session 18), softmax 1024 x 65536
triton_persistent at ``programs_per_sm=1, num_stages=2, num_warps=8`` took 136.0 us in the sweep (fp16; bf16
140.1) and 156.5 us in the timing stage (bf16 160.5), in one job after the other on one card. Over every other
(case, variant) of those runs the two stages agree (median timing/sweep 1.000). The two stages differ in:

* how many placements the device-time samples rotate over (sweep: the inputs and one shared output, 5 copies
  within the 1 GiB budget; timing: the inputs and every implementation's output, 2 copies);
* how many samples (sweep ``device_time_s`` 0.02, about 30-70 calls; timing 0.1, about 600);
* what ran before (the other configs; the baselines).

This script runs phases in one process on one card (``--phases``, in order): ``sweep``, the pipeline's own
sweep of triton_persistent (``sweep.sweep_variants``); ``timing``, its own timing stage (``timing_stage.time_case``,
every variant); ``controlled``, the two configs (and triton_online's default and torch, as controls; ``--closures``
keeps the first N) on the device basis with the samples rotating over ``--copies`` placements and at each of
``--singles`` placements alone; ``torch`` and ``torch_compile``, one first call of that baseline, to see whether
what ran before a kernel's load moves it; ``context``, the CUDA context's stack-size limit and cache preference
(anything a first call may set context-wide); ``carveout``, the pipelined config alone, timed once at each of
``--carveouts`` in order: an integer sets the loaded kernel's preferred shared-memory carve-out (percent of the
SM's maximum; -1 the driver's default), ``cN`` its cache preference (0 none, 1 shared, 2 L1, 3 equal; Triton's
loader sets 1 on every kernel with more than 48 KB of shared memory). The kernel spills, so how much of the SM's
L1 is left beside its shared memory decides where the spills go.
``--import-inductor`` imports Dynamo and Inductor first, as the CLI does
in timing jobs; ``--compile-only`` compiles and loads each closure without a launch first, as both stages do:

    python docs/experiments/sweep_vs_timing.py --dtype float16 --out sweep_vs_timing-fp16.json
    python docs/experiments/sweep_vs_timing.py --phases torch_compile,controlled --closures 1 --copies 1 --out f.json

Device time is kernelscope's basis (timing.measure_device: CUPTI kernel records, L2 flushed before each call).
Used in docs/timing-basis.md, section "The sweep and the timing stage on one wide-row config".
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch
import yaml

from kernelscope import placement, registry, runtime, sweep, timing, timing_stage

SHAPE = "M1024_N65536"
PIPELINED = {"programs_per_sm": 1, "num_stages": 2, "num_warps": 8}
DEFAULT = {"programs_per_sm": 4, "num_stages": 1, "num_warps": 8}


def settings_from_config(path: str) -> tuple[timing.TimingSettings, timing.TimingSettings, float]:
    """The default configuration's sweep and timing settings and the sweep's tie margin, as the CLI reads them."""
    with open(path) as f:
        cfg = yaml.safe_load(f)
    sweep_cfg = cfg["sweep"]
    return (
        timing.TimingSettings.from_config(sweep_cfg["timing"]),
        timing.TimingSettings.from_config(cfg["timing"]),
        float(sweep_cfg.get("keep_default_within", 0.0)),
    )


def brief(rec: dict) -> dict:
    keep = ("median_us", "p20_us", "p80_us", "n", "placements", "status")
    out = {k: rec.get(k) for k in keep}
    samples = rec.get("device_samples_us") or rec.get("samples_us") or []
    if len(samples) >= 20:  # drift inside a record: the first and the last fifth of its samples
        fifth = len(samples) // 5
        out["first_fifth_median_us"] = statistics.median(samples[:fifth])
        out["last_fifth_median_us"] = statistics.median(samples[-fifth:])
    return out


def _libcuda():
    import ctypes

    return ctypes.CDLL("libcuda.so.1")


def context_state() -> dict:
    """The current context's stack-size limit (CU_LIMIT_STACK_SIZE) and cache preference (cuCtxGetCacheConfig)."""
    import ctypes

    cuda = _libcuda()
    stack, cache = ctypes.c_size_t(), ctypes.c_int()
    return {
        "stack_size_rc": cuda.cuCtxGetLimit(ctypes.byref(stack), 0),
        "stack_size": stack.value,
        "cache_config_rc": cuda.cuCtxGetCacheConfig(ctypes.byref(cache)),
        "cache_config": cache.value,
    }


def set_kernel_preference(jit_fn, value: str) -> list[dict]:
    """Set every loaded binary of ``jit_fn``: an integer string -> CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    (9), ``cN`` -> cuFuncSetCacheConfig(N). Returns what the driver reads back per binary."""
    import ctypes

    cuda = None
    done = []
    for caches in getattr(jit_fn, "device_caches", {}).values():
        for kernel in caches[0].values():
            fn = getattr(kernel, "function", None)
            if not fn:
                continue
            cuda = cuda or _libcuda()
            handle = ctypes.c_void_p(fn)
            if value.startswith("c"):
                rc = cuda.cuFuncSetCacheConfig(handle, int(value[1:]))
            else:
                rc = cuda.cuFuncSetAttribute(handle, 9, int(value))
            back = ctypes.c_int()
            cuda.cuFuncGetAttribute(ctypes.byref(back), 9, handle)
            done.append({"kernel": kernel.name, "set": value, "rc": rc, "carveout_read_back": back.value})
    return done


def carveout_phase(spec, shape, dtype, settings, values) -> list[dict]:
    """The pipelined config, timed on one placement after each preference in ``values`` is set."""
    from kernels import softmax as softmax_module

    flush = timing.L2Flusher(True)
    impl = spec.implementation("triton_persistent")
    inputs = spec.make_inputs(shape, dtype, runtime.device(), 0)
    out = spec.make_output(inputs)
    fn = impl.prepare(inputs, out, PIPELINED)
    fn()
    runtime.synchronize()
    rows = []
    for value in values:
        applied = set_kernel_preference(softmax_module._persistent_softmax_kernel, value)
        for _ in range(settings.warmup):
            fn()
        rec = timing.measure_device(fn, settings, flush, 150.0)
        rows.append({"value": value, "applied": applied, **brief(rec)})
        print(f"carveout/cache {value}: {rec.get('median_us')} us {applied}", flush=True)
    return rows


def pipeline_sweep(spec, shape, dtype, settings, keep_default_within: float) -> dict:
    impl = spec.implementation("triton_persistent")
    started = time.perf_counter()
    doc = sweep.sweep_variants(spec, [impl], shape, dtype, settings, keep_default_within=keep_default_within)[0]
    return {
        "wall_s": time.perf_counter() - started,
        "configs": {c["key"]: brief(c) for c in doc["configs"] if c.get("status") == "ok"},
        "best": doc.get("best"),
    }


def pipeline_timing(spec, shape, dtype, settings, persistent_config) -> dict:
    best = {impl.name: dict(impl.default_config(shape, dtype)) for impl in spec.triton_variants}
    best["triton_persistent"] = dict(persistent_config)
    doc = timing_stage.time_case(spec, shape, dtype, best, settings)
    out = {}
    for rec in doc["implementations"]:
        name = rec["implementation"] + (f" ({rec['block']})" if rec.get("block") else "")
        dev = rec.get("device") or {}
        out[name] = {"config": rec.get("config"), "event_median_us": rec.get("median_us"), **brief(dev)}
    return out


def controlled(
    spec,
    shape,
    dtype,
    settings,
    rng: random.Random,
    copies_list,
    singles: int,
    n_closures: int = 4,
    compile_first: bool = False,
) -> list[dict]:
    """Each closure on the device basis, rotating over k placements of its input and output, and at each of
    ``singles`` placements alone (a spacer of 1-64 MiB before each)."""
    flush = timing.L2Flusher(True)
    closures = [
        ("triton_persistent", PIPELINED),
        ("triton_persistent", DEFAULT),
        ("triton_online", None),
        ("torch", {}),
    ][:n_closures]
    rows = []
    inputs = spec.make_inputs(shape, dtype, runtime.device(), 0)
    for name, config in closures:
        impl = spec.implementation(name)
        config = dict(impl.default_config(shape, dtype)) if config is None else config
        out = spec.make_output(inputs)
        fn = impl.prepare(inputs, out, config)
        if compile_first:  # as both stages do: compiled and loaded without a launch, then called
            timing.compile_only(fn)
        fn()
        runtime.synchronize()
        tensors = [inputs["x"], out]
        row = {"implementation": name, "config": config, "rotating": {}, "singles_us": []}
        for k in copies_list:
            places = placement.Placements(tensors, k)
            call = places.rotating(fn)
            places.warm(fn)
            for _ in range(settings.warmup):
                call()
            rec = timing.measure_device(call, settings, flush, 150.0)
            row["rotating"][str(k)] = brief(rec)
            # back at copy 0, and the clones freed before the next k
            while places.index != 0:
                places.advance()
            del places, call
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        spacers = []
        for _ in range(singles):
            spacers.append(torch.empty(rng.randint(1, 64) << 20, dtype=torch.uint8, device=runtime.device()))
            x = inputs["x"].clone()
            o = torch.empty_like(out)
            one = impl.prepare({**inputs, "x": x}, o, config)
            for _ in range(settings.warmup):
                one()
            rec = timing.measure_device(one, settings, flush, 150.0)
            row["singles_us"].append(rec.get("median_us"))
            del x, o, one
        del spacers
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        rows.append(row)
        s = [v for v in row["singles_us"] if v is not None] or [float("nan")]
        print(
            f"{name} {config}: rotating "
            + ", ".join(f"{k}: {v['median_us']}" for k, v in row["rotating"].items())
            + f" us; {singles} placements alone {min(s):.1f}-{max(s):.1f} us (spread {max(s) / min(s) - 1:.1%})",
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--seed", type=int, default=0, help="seeds the spacer sizes (placement), not the inputs")
    ap.add_argument("--singles", type=int, default=8)
    ap.add_argument("--shape-set", default="gpu", help="cpu: a smoke test under the interpreter")
    ap.add_argument("--shape", default=SHAPE)
    ap.add_argument("--phases", default="sweep,timing,controlled,sweep", help="which phases, in order")
    ap.add_argument("--compile-only", action="store_true", help="timing.compile_only before the first call")
    ap.add_argument("--closures", type=int, default=4, help="the first N closures of the controlled phase")
    ap.add_argument("--copies", default="1,2,5,8", help="placements to rotate over in the controlled phase")
    ap.add_argument(
        "--import-inductor",
        action="store_true",
        help="import torch._dynamo and torch._inductor.compile_fx first, as the CLI does in timing jobs",
    )
    ap.add_argument("--carveouts", default="-1,100,0,c2,c1,-1", help="the carveout phase's settings, in order")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.import_inductor:
        import importlib

        importlib.import_module("torch._dynamo")
        importlib.import_module("torch._inductor.compile_fx")
    spec = registry.get("softmax")
    shape = spec.shape(args.shape_set, args.shape)
    dtype = getattr(torch, args.dtype)
    sweep_settings, timing_settings, tie_margin = settings_from_config(args.config)
    timing.prepare_device_basis()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    doc = {"shape": args.shape, "dtype": args.dtype, "torch": torch.__version__, "device": device}
    import triton

    doc["triton"] = triton.__version__
    doc["import_inductor"] = args.import_inductor
    rng = random.Random(args.seed)
    copies = tuple(int(k) for k in args.copies.split(","))
    for i, phase in enumerate(args.phases.split(",")):
        key = f"{i}_{phase}"
        if phase == "sweep":
            doc[key] = pipeline_sweep(spec, shape, dtype, sweep_settings, tie_margin)
            print(key, {k: v["median_us"] for k, v in doc[key]["configs"].items()}, flush=True)
        elif phase == "timing":
            doc[key] = pipeline_timing(spec, shape, dtype, timing_settings, PIPELINED)
            print(key, {k: (v["median_us"], v["event_median_us"], v["placements"]) for k, v in doc[key].items()})
        elif phase in ("torch", "torch_compile"):  # one call of a baseline (for torch_compile: its compile)
            impl = spec.implementation(phase)
            inputs = spec.make_inputs(shape, dtype, runtime.device(), 0)
            out = spec.make_output(inputs)
            started = time.perf_counter()
            impl.prepare(inputs, out, {})()
            runtime.synchronize()
            doc[key] = {"first_call_s": time.perf_counter() - started}
            print(key, doc[key], flush=True)
        elif phase == "context":
            doc[key] = context_state()
            print(key, doc[key], flush=True)
        elif phase == "carveout":
            doc[key] = carveout_phase(spec, shape, dtype, timing_settings, args.carveouts.split(","))
        elif phase == "controlled":
            doc[key] = controlled(
                spec, shape, dtype, timing_settings, rng, copies, args.singles, args.closures, args.compile_only
            )
        else:
            ap.error(f"unknown phase {phase!r}")
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, default=str)


if __name__ == "__main__":
    main()
