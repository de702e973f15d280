"""gluon_persistent (kernels/_matmul_gluon.py) against triton_persistent's default and cuBLAS, in one process on one
GPU, on issue 24's matmul target shapes; first a check of every config against an fp32 reference and of the
negative control (``gluon_short_k``, which must be wrong).

Why: ``triton_persistent`` is 0.975-0.978x cuBLAS at 4096^3 and 8192^2 x 1000 bf16 on the H100
(docs/kernel-notes.md, "Session 26"); ``gluon_persistent`` writes cuBLAS's cooperative partitions out by hand. This
says whether it is worth a pipeline run, on this card; the pipeline's sweep and gate decide the rest.

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS``; ``ROUNDS`` rounds with the
implementations interleaved inside each; medians, extremes and every sample printed.

    python docs/experiments/matmul_gluon_ab.py > matmul_gluon_ab.json
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
    dict(M=8192, N=8192, K=8192),
]
DTYPES = (torch.float16, torch.bfloat16)


def main() -> None:
    import triton

    spec = registry.get("matmul")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out["cases"] = []
    for params in CASES:
        for dtype in DTYPES:
            if params["K"] == 8192 and dtype == torch.bfloat16:
                continue  # one 8192^3 case: each takes ~1.6 ms a launch
            shape = Shape(params, "ab")
            inputs = spec.make_inputs(shape, dtype, torch.device("cuda"), 0)
            ref = inputs["a"].float() @ inputs["b"].float()
            tol = spec.tolerances[dtype]
            impls = {"torch": ("torch", {}), "triton_persistent": ("triton_persistent", None)}
            for i, config in enumerate(gluon_mm.CONFIGS):
                impls[f"gluon{i}"] = ("gluon_persistent", config)
            impls["gluon_short_k"] = ("gluon_short_k", gluon_mm.CONFIGS[gluon_mm.DEFAULT])
            case = {**params, "dtype": str(dtype)[6:], "impls": {}}
            runs = {}
            for name, (impl, config) in impls.items():
                record = {"implementation": impl, "config": config}
                try:
                    if impl == "triton_persistent":
                        config = spec.implementation(impl).default_config(shape, dtype)
                        record["config"] = config
                    c = torch.full((params["M"], params["N"]), float("nan"), dtype=dtype, device="cuda")
                    fn = spec.implementation(impl).prepare(inputs, c, config or {})
                    got = fn()
                    torch.cuda.synchronize()
                    err = (got.float() - ref).abs()
                    bound = tol.atol + tol.rtol * ref.abs()
                    record.update(
                        max_abs_err=err.max().item(),
                        outside=int((err > bound).sum()),
                        nan=int(got.isnan().sum()),
                    )
                    if name != "gluon_short_k":
                        runs[name] = fn
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
                        f"  {name} {rec['config']}: {med:.1f} us ({rec['vs_torch']:.3f}x torch) "
                        f"err {rec['max_abs_err']:.1e} outside {rec['outside']} nan {rec['nan']}",
                        file=sys.stderr,
                    )
                elif "failed" in rec:
                    print(f"  {name}: FAILED {rec['failed'][:400]}", file=sys.stderr)
                else:
                    print(f"  {name} (control): outside {rec['outside']} nan {rec['nan']}", file=sys.stderr)
            out["cases"].append(case)
            del inputs, ref
            torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
