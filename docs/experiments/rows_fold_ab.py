"""A/B of two versions of ``kernels/_rows_gluon.py`` (gluon_smem of softmax and layernorm) in one process on one
GPU: each at its default config on issue 24's widest rows, every dtype, the versions' launches interleaved round by
round, with the copy bandwidth measured the same way beside them. Written for session 24's change, in which each
element's exponent (softmax) and normalisation (layernorm) became one fused multiply-add, with the division by the
sum folded into the exponent (8 % fewer sm_90a instructions in softmax, 4 % in layernorm, offline builds).

    git show <rev>:kernels/_rows_gluon.py > docs/experiments/_rows_gluon_before.py   # the version to compare with
    python docs/experiments/rows_fold_ab.py docs/experiments/_rows_gluon_before.py > ab.json

Timing basis: CUDA events around ``REPS`` back-to-back launches, divided by ``REPS`` (every launch of a round
reads 256 MB or more, several times the L2, so none reads the previous one's rows from it); ``ROUNDS`` rounds,
the two versions alternating inside each; the median and the spread of the rounds are printed, all samples kept.
Each version's output is checked against fp64 before it is timed (max error, NaN count). Not the pipeline's
basis (device timestamps) and not its gate: this says whether a change is worth a pipeline run, on one card.
"""

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import inputs, interleaved, reference, run_record  # noqa: E402

from kernels import _rows_gluon as after  # noqa: E402
from kernelscope import runtime  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

CASES = [
    ("softmax", 1024, 65536),
    ("softmax", 256, 262144),
    ("layernorm", 1024, 65536),
]
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def load(path: str):
    spec = importlib.util.spec_from_file_location("rows_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    before = load(sys.argv[1])
    versions = {"before": before, "after": after}
    limits = runtime.device_limits()
    out = run_record()
    for kernel, m, n in CASES:
        for dtype in DTYPES:
            x, extra = inputs(kernel, m, n, dtype)
            ref = reference(kernel, x, extra)
            config = after.default_for(kernel)(Shape({"M": m, "N": n}, "ab"), dtype)
            runs, outs, errors = {}, {}, {}
            for name, mod in versions.items():
                outs[name] = torch.full_like(x, float("nan"))
                runs[name] = mod.launch(x, outs[name], config, limits, **extra)
                runs[name]()  # compile and size the grid
                torch.cuda.synchronize()
                err = (outs[name].double() - ref).abs()
                errors[name] = {"max_abs_err": err.max().item(), "nan": int(outs[name].isnan().sum())}
            times = interleaved(runs)
            moved = 2 * x.numel() * x.element_size()
            case = {"kernel": kernel, "M": m, "N": n, "dtype": str(dtype)[6:], "config": config}
            for name in versions:
                med = statistics.median(times[name])
                case[name] = {
                    "median_us": med,
                    "min_us": min(times[name]),
                    "max_us": max(times[name]),
                    "pct_of_copy": 100 * moved / med / 1e3 / out["copy_GBps"],
                    "samples_us": times[name],
                    **errors[name],
                }
            case["after_over_before"] = case["after"]["median_us"] / case["before"]["median_us"]
            out["cases"].append(case)
            print(
                f"{kernel} {m}x{n} {case['dtype']}: before {case['before']['median_us']:.1f} us "
                f"({case['before']['pct_of_copy']:.1f} %), after {case['after']['median_us']:.1f} us "
                f"({case['after']['pct_of_copy']:.1f} %), err {errors['before']['max_abs_err']:.2e} / "
                f"{errors['after']['max_abs_err']:.2e}",
                file=sys.stderr,
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
