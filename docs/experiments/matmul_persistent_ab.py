"""triton_persistent's default against variants of it that the pipeline's sweep has never timed (the ``GROUP_M``
swizzle width, and cuBLAS's 256 x 128 tile with the default's four stages and halved epilogue), beside cuBLAS and
gluon_persistent, in one process on one GPU, on issue 24's matmul shapes under 1 ms. Every config's output is first
checked against an fp32 product (and must hold no NaN) before it is timed.

Why: triton_persistent misses 0.98x cuBLAS at 4096^3 bf16 on two H100 hosts (0.975, 0.976; docs/kernel-notes.md,
"Session 28"), and Nsight Compute shows 12-17 % more bytes through L2 than cuBLAS at the same tile (sessions
27-29). The swizzle width decides how many A row-panels and B column-panels the programs in flight share in L2; the
sweep only ever ran ``GROUP_M=8``. This says whether another width or the 256 x 128 tile is worth a pipeline
run, on this card.

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS`` (``rows_ab.per_launch_us``);
``ROUNDS`` rounds with the implementations interleaved inside each; medians, extremes and every sample kept. Not the
pipeline's basis (device timestamps, cold L2) and not its gate.

    python docs/experiments/matmul_persistent_ab.py > matmul_persistent_ab.json
"""

import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import interleaved  # noqa: E402

from kernels import _matmul_gluon as gluon_mm  # noqa: E402
from kernelscope import registry  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

CASES = [
    dict(M=4096, N=4096, K=4096),
    dict(M=4096, N=4096, K=4096, transB=1),
    dict(M=8192, N=8192, K=1000),
]
DTYPES = (torch.float16, torch.bfloat16)
# name -> the entries that replace the default's (128 x 256 x 64, GROUP_M 8, 8 warps, 4 stages, flattened, C stored
# in two halves)
VARIANTS = {
    "default": {},
    "default-again": {},  # the default a second time: the method's own resolution, an A/A pair in every run
    "G4": {"GROUP_M": 4},
    "G16": {"GROUP_M": 16},
    "G32": {"GROUP_M": 32},
    "256x128": {"BLOCK_M": 256, "BLOCK_N": 128},
}


def main() -> None:
    import triton

    spec = registry.get("matmul")
    persistent = spec.implementation("triton_persistent")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out["cases"] = []
    for params in CASES:
        for dtype in DTYPES:
            shape = Shape(params, "ab")
            inputs = spec.make_inputs(shape, dtype, torch.device("cuda"), 0)
            ref = inputs["a"].float() @ inputs["b"].float()
            tol = spec.tolerances[dtype]
            default = persistent.default_config(shape, dtype)
            impls = {"torch": ("torch", {})}
            impls |= {f"tp_{name}": ("triton_persistent", {**default, **v}) for name, v in VARIANTS.items()}
            impls["gluon"] = ("gluon_persistent", gluon_mm.CONFIGS[gluon_mm.DEFAULT])
            case = {**params, "dtype": str(dtype)[6:], "impls": {}}
            runs = {}
            for name, (impl, config) in impls.items():
                record = {"implementation": impl, "config": config}
                try:
                    c = torch.full((params["M"], params["N"]), float("nan"), dtype=dtype, device="cuda")
                    fn = spec.implementation(impl).prepare(inputs, c, config)
                    got = fn()
                    torch.cuda.synchronize()
                    err = (got.float() - ref).abs()
                    bound = tol.atol + tol.rtol * ref.abs()
                    record.update(
                        max_abs_err=err.max().item(), outside=int((err > bound).sum()), nan=int(got.isnan().sum())
                    )
                    if record["outside"] == 0 and record["nan"] == 0:
                        runs[name] = fn  # a wrong config is recorded, never timed
                    del err, bound
                except Exception as exc:  # one that fails to build or launch is recorded, the others still run
                    record["failed"] = f"{type(exc).__name__}: {exc}"[:1500]
                case["impls"][name] = record
            times = interleaved(runs)
            base = statistics.median(times["torch"]) if times.get("torch") else None
            print(f"matmul {params} {case['dtype']}:", file=sys.stderr)
            for name, rec in case["impls"].items():
                if name in times:
                    med = statistics.median(times[name])
                    rec.update(median_us=med, min_us=min(times[name]), max_us=max(times[name]), samples_us=times[name])
                    rec["vs_torch"] = base / med if base else None
                    print(
                        f"  {name}: {med:.1f} us ({rec['vs_torch']:.3f}x torch) [{rec['min_us']:.1f}-"
                        f"{rec['max_us']:.1f}] err {rec['max_abs_err']:.1e}",
                        file=sys.stderr,
                    )
                elif "failed" in rec:
                    print(f"  {name}: FAILED {rec['failed'][:400]}", file=sys.stderr)
                else:
                    print(f"  {name}: WRONG outside {rec['outside']} nan {rec['nan']}", file=sys.stderr)
            out["cases"].append(case)
            del inputs, ref
            torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
