"""Does where a case's tensors land in device memory move a short kernel's device time?

The seed case's triton_row fp16 (softmax 4096 x 1000, one config on both sides) took 5.82 us on one machine and
6.14 us on another (5.5 %), while torch's softmax on the same inputs agreed within 0.3 %. This measures, in one
process, the device time of the same closure on several copies of the inputs placed at different addresses
(spacer allocations of random size between them), and the device time when the samples rotate over all the
copies. Run it in several processes (one after another on one card) to see the spread between processes too:

    python docs/experiments/placement.py --copies 16 --out placement-1.json

Device time is kernelscope's own basis (timing.measure_device: CUPTI kernel records, L2 flushed before each
call). Used in docs/timing-basis.md, section "Where a short kernel's tensors lie".
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

import torch

from kernelscope import registry, timing

CASES = [  # (implementation, config): the seed case's configs from the two runs, and the primary baseline
    ("triton_row", {"num_warps": 1, "aligned": 1}),
    ("triton_row", {"num_warps": 4, "aligned": 1}),
    ("triton_persistent", {"programs_per_sm": 8, "num_stages": 1, "num_warps": 4, "aligned": 1}),
    ("torch", {}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--seed", type=int, default=0, help="seeds the spacer sizes (placement), not the inputs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    spec = registry.get("softmax")
    shape = spec.shape("gpu", "M4096_N1000")
    dtype = getattr(torch, args.dtype)
    rng = random.Random(args.seed)
    settings = timing.TimingSettings()
    flush = timing.L2Flusher(True)
    timing.prepare_device_basis()
    spacers, copies = [], []
    for _ in range(args.copies):  # each copy of inputs and output behind a spacer of 1-64 MiB
        spacers.append(torch.empty(rng.randint(1, 64) << 20, dtype=torch.uint8, device="cuda"))
        inputs = spec.make_inputs(shape, dtype, torch.device("cuda"), 0)  # the same values in every copy
        copies.append((inputs, spec.make_output(inputs)))
    doc = {"shape": shape.id if hasattr(shape, "id") else "M4096_N1000", "dtype": args.dtype, "results": []}
    for name, config in CASES:
        impl = spec.implementation(name)
        fns = [impl.prepare(inputs, out, config) for inputs, out in copies]
        for fn in fns:
            fn()
        torch.cuda.synchronize()
        per_copy = []
        for (inputs, _), fn in zip(copies, fns, strict=True):
            rec = timing.measure_device(fn, settings, flush, 6.0)
            per_copy.append({"x_ptr": inputs["x"].data_ptr(), "median_us": rec.get("median_us"), "n": rec.get("n")})
        state = {"i": 0}

        def rotating(fns=fns, state=state):
            state["i"] += 1
            return fns[state["i"] % len(fns)]()

        rot = timing.measure_device(rotating, settings, flush, 6.0)
        medians = [c["median_us"] for c in per_copy]
        row = {
            "implementation": name,
            "config": config,
            "per_copy": per_copy,
            "copy_median_min_us": min(medians),
            "copy_median_max_us": max(medians),
            "copy_spread": max(medians) / min(medians) - 1,
            "median_of_copy_medians_us": statistics.median(medians),
            "rotating_median_us": rot.get("median_us"),
            "rotating_n": rot.get("n"),
        }
        doc["results"].append(row)
        print(
            f"{name} {config}: per copy {row['copy_median_min_us']:.3f}-{row['copy_median_max_us']:.3f} us "
            f"(spread {row['copy_spread']:.1%}), median of copies {row['median_of_copy_medians_us']:.3f}, "
            f"rotating over {args.copies} copies {row['rotating_median_us']:.3f} us"
        )
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
