"""Does layernorm's affine step (weight and bias read from L2 in pass 2) keep gluon_smem below softmax's
bandwidth? One process on one GPU, issue 24's widest layernorm rows.

Why: on the H100 16-bit layernorm sits at 84.3-85.4 % of copy bandwidth where softmax, the same machine without
the affine step, reaches 86-88 % (docs/kernel-notes.md, "Session 25" and "Session 26"); session 25's rounds fit put
layernorm's steady state at 2.60 TB/s against softmax's 2.68. Layernorm's pass 2 loads each slot's weight and bias
from L2 (two bytes of them for every byte of x in 16 bits) after the team exchange, slot by slot. Two causes fit:
the loads' L2 latency, exposed once a slot, or the L2 traffic itself. The variants tell them apart:

- ``default``: the module's default config with ``WB_AHEAD=0`` (the module's default until session 27);
- ``ahead1``: the first slot's weight and bias loaded before the team exchange (``WB_AHEAD=1``);
- ``ahead2``: and every next slot's one slot ahead (``WB_AHEAD=2``; more registers);
- ``window`` (a knockout: wrong results, time only): every slot's weight and bias read from the first slot's
  columns of the first part, so the same instructions hit a few KB that stay in L1 and L2: the affine step
  without its L2 traffic;
- ``softmax``: the softmax kernel's default on the same rows, the machine without the affine step.

If ``ahead*`` closes the gap the cause is latency; if only ``window`` does, it is traffic, and the fix is fewer
bytes of weight and bias a row (several rows a program sharing them). ``ahead*`` and ``default`` are checked against
fp64 first (max error, NaN count); ``window`` and ``softmax`` compute something else and are not.

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS`` (each launch reads 64 MB or
more, past the 50 MB L2); ``ROUNDS`` rounds with the variants interleaved inside each; medians, extremes and every
sample printed. With ``--ncu`` the script reruns itself under Nsight Compute (``kernelscope.ncu``'s metrics, clocks
left alone), each variant once inside its NVTX range after three warm-up calls, and adds the counters.

    python docs/experiments/rows_affine_ab.py [--ncu] > rows_affine_ab.json
"""

import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import inputs, interleaved, reference, run_record  # noqa: E402

from kernels import _rows_gluon as rows  # noqa: E402
from kernelscope import ncu, runtime  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

CASES = [("layernorm", 1024, 65536, dtype) for dtype in (torch.float16, torch.bfloat16, torch.float32)]
SOURCE = (ROOT / "kernels" / "_rows_gluon.py").read_text()
#: the knockout: every pass-2 load of weight and bias from the first slot's columns of part 0
WINDOW = [
    ("w = gl.load(w_ptr + cols0 + c * SLOT)", "w = gl.load(w_ptr + offs)", 1),
    ("b = gl.load(b_ptr + cols0 + c * SLOT)", "b = gl.load(b_ptr + offs)", 1),
]
CHECKED = ("default", "ahead1", "ahead2", "ahead2_8w")


def knockout(subs, tmp: Path):
    source = SOURCE
    for old, new, count in subs:
        if source.count(old) != count:
            raise SystemExit(f"window: expected {count} of {old!r}, found {source.count(old)}")
        source = source.replace(old, new)
    path = tmp / "_rows_window.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variants(window, m: int, n: int, dtype: torch.dtype) -> dict:
    """name -> (module, kernel, config)."""
    default = rows.default_for("layernorm")(Shape({"M": m, "N": n}, "ab"), dtype)
    eight = dict(default, num_warps=8) if default["num_warps"] == 4 else dict(default, num_warps=16)
    return {
        "default": (rows, "layernorm", dict(default, WB_AHEAD=0)),
        "ahead1": (rows, "layernorm", dict(default, WB_AHEAD=1)),
        "ahead2": (rows, "layernorm", dict(default, WB_AHEAD=2)),
        "ahead2_8w": (rows, "layernorm", dict(eight, WB_AHEAD=2)),
        "window": (window, "layernorm", dict(default, WB_AHEAD=0)),
        "softmax": (rows, "softmax", rows.default_for("softmax")(Shape({"M": m, "N": n}, "ab"), dtype)),
    }


def prepared(window, limits, m: int, n: int, dtype: torch.dtype, case: dict) -> dict:
    """Each variant launched once and (where it computes layernorm) checked; name -> run."""
    x, extra = inputs("layernorm", m, n, dtype)
    ref = reference("layernorm", x, extra)
    runs = {}
    for name, (module, kernel, config) in variants(window, m, n, dtype).items():
        o = torch.full_like(x, float("nan"))
        record = {"config": config, "kernel": kernel}
        try:
            run = module.launch(x, o, config, limits, **(extra if kernel == "layernorm" else {}))
            run()
            torch.cuda.synchronize()
            if name in CHECKED:
                record.update(max_abs_err=(o.double() - ref).abs().max().item(), nan=int(o.isnan().sum()))
            runs[name] = run
        except Exception as exc:  # a variant that does not build or launch is recorded, the others still run
            record["failed"] = f"{type(exc).__name__}: {exc}"[:1500]
        case["variants"][name] = record
    return runs


def ncu_target(window, limits) -> None:
    """Inside ncu: every case's variants warmed up, then each called once inside its NVTX range."""
    for _, m, n, dtype in CASES:
        case = {"variants": {}}
        runs = prepared(window, limits, m, n, dtype, case)
        for run in runs.values():
            for _ in range(3):
                run()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for name, run in runs.items():
            torch.cuda.nvtx.range_push(ncu.nvtx_range(f"{str(dtype)[6:]}_{name}"))
            run()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


def counters() -> list[dict] | str:
    """This script's variants under Nsight Compute: the counters of each, or why there are none."""
    exe = shutil.which("ncu")
    if exe is None:
        return "ncu is not on PATH"
    names = [f"{str(d)[6:]}_{v}" for _, _, _, d in CASES for v in variants(None, 1024, 65536, d)]
    cmd = ncu.command([sys.executable, __file__, "--ncu-target"], names, exe)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    got = ncu.parse_csv(proc.stdout)
    if proc.returncode or not got:
        return f"ncu exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}"
    return got


def main() -> None:
    limits = runtime.device_limits()
    with tempfile.TemporaryDirectory() as tmp:
        window = knockout(WINDOW, Path(tmp))
        if "--ncu-target" in sys.argv:
            ncu_target(window, limits)
            return
        out = run_record()
        for kernel, m, n, dtype in CASES:
            case = {"kernel": kernel, "M": m, "N": n, "dtype": str(dtype)[6:], "variants": {}}
            runs = prepared(window, limits, m, n, dtype, case)
            times = interleaved(runs)
            moved = 2 * m * n * torch.tensor([], dtype=dtype).element_size()
            print(f"{kernel} {m}x{n} {case['dtype']}:", file=sys.stderr)
            for name, rec in case["variants"].items():
                if name in times:
                    med = statistics.median(times[name])
                    rec.update(
                        median_us=med,
                        min_us=min(times[name]),
                        max_us=max(times[name]),
                        pct_of_copy=100 * moved / med / 1e3 / out["copy_GBps"],
                        samples_us=times[name],
                    )
                    err = f" err {rec['max_abs_err']:.1e} nan {rec['nan']}" if "nan" in rec else ""
                    print(f"  {name} {rec['config']}: {med:.1f} us ({rec['pct_of_copy']:.1f} %){err}", file=sys.stderr)
                else:
                    print(f"  {name}: FAILED {rec['failed'][:300]}", file=sys.stderr)
            out["cases"].append(case)
    if "--ncu" in sys.argv:
        out["ncu"] = counters()
        for row in out["ncu"] if isinstance(out["ncu"], list) else []:
            dram, l2 = row["dram_throughput_pct"], row.get("l2_throughput_pct")
            print(
                f"  ncu {row['implementation']}: {row['duration_ns'] / 1e3:.1f} us, DRAM {dram} %, L2 {l2} %, "
                f"L2 bytes {row.get('l2_bytes')}, global loads {row.get('global_load_bytes')}",
                file=sys.stderr,
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
