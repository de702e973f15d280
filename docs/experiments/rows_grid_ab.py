"""Does gluon_smem lose its last round of rows? An A/B of grid sizes for ``kernels/_rows_gluon.py`` in one
process on one GPU, on issue 24's widest rows, each at its default config.

gluon_smem is persistent: the grid is as many whole teams as are resident at once (``teams.split_grid``), and team
``t`` takes rows ``t, t + teams, ...``. At 1024 rows with 198 teams (the 16-bit 1024 x 65536 default on 132 SMs),
164 teams take 5 rows and 34 take 6, so the last round runs 34 rows on about one program an SM: few bytes in
flight, and its loads were issued a round earlier. The hypothesis: that thin round costs about a whole round's
time, and a grid of ``ceil(M / rounds)`` teams (every team the same number of rows, give or take one) moves the
same rows in the same number of rounds with every round full.

Variants, each case:

- ``resident``: the grid as it is (every resident team);
- ``balanced``: ``ceil(M / ceil(M / teams))`` teams, the fewest that keep the resident grid's number of rounds;
- ``balanced+1``: one round more, ``ceil(M / (rounds + 1))`` teams;
- ``whole-rounds``: the resident grid on the first ``rounds_full * teams`` rows only (M cut to whole rounds), to
  see what the thin round costs: with the thin round priced at its rows' share, this takes ``M' / M`` of
  ``resident``'s time; priced at a round, ``(rounds - 1) / rounds``.

Then, for the 16-bit cases of ``SCALING``, the resident grid on 1, 2, ... whole rounds of rows: the slope is a
full round's time, the intercept what a launch costs beyond its rounds (filling the slots at the start, draining
the last stores at the end).

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS`` (each launch reads 64 MB or
more, well past the 50 MB L2); ``ROUNDS`` rounds with the variants interleaved inside each; medians, extremes and
every sample printed. Each variant's output is checked against fp64 first (max error, NaN count). Not the
pipeline's basis or gate: this says whether a grid policy is worth a pipeline run, on one card.

    python docs/experiments/rows_grid_ab.py > rows_grid_ab.json
"""

import json
import math
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import ROUNDS, inputs, interleaved, per_launch_us, reference, run_record  # noqa: E402

from kernels import _rows_gluon as rows  # noqa: E402
from kernelscope import runtime, teams  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

CASES = [
    ("softmax", 1024, 65536, torch.float16),
    ("softmax", 1024, 65536, torch.bfloat16),
    ("softmax", 1024, 65536, torch.float32),
    ("softmax", 256, 262144, torch.float16),
    ("softmax", 256, 262144, torch.float32),
    ("layernorm", 1024, 65536, torch.float16),
    ("layernorm", 1024, 65536, torch.bfloat16),
    ("layernorm", 1024, 65536, torch.float32),
]
SCALING = [("softmax", 1024, 65536, torch.float16), ("layernorm", 1024, 65536, torch.float16)]


def run_with_teams(x, out, config, limits, extra, n_teams):
    """``rows.launch`` with the grid set to ``n_teams`` teams (None: the resident grid); returns the run and the
    teams it launched."""
    seen = {}
    real = teams.split_grid

    def grid(n_rows, parts, per_sm, resident, sms):
        full = real(n_rows, parts, per_sm, resident, sms)
        seen["resident_teams"] = full // parts
        want = full // parts if n_teams is None else n_teams(full // parts)
        seen["teams"] = want
        return want * parts

    rows.split_grid = grid
    try:
        run = rows.launch(x, out, config, limits, **extra)
        run()  # compile and size the grid (with the patched policy)
        torch.cuda.synchronize()
    finally:
        rows.split_grid = real
    return run, seen


def main() -> None:
    limits = runtime.device_limits()
    out = run_record()
    for kernel, m, n, dtype in CASES:
        x, extra = inputs(kernel, m, n, dtype)
        config = rows.default_for(kernel)(Shape({"M": m, "N": n}, "ab"), dtype)

        _, seen = run_with_teams(x, torch.empty_like(x), config, limits, extra, None)
        resident = seen["resident_teams"]
        rounds = math.ceil(m / resident)
        full_rounds_rows = (m // resident) * resident
        variants = {
            "resident": (x, None),
            "balanced": (x, lambda r, m=m: math.ceil(m / math.ceil(m / r))),
            "balanced+1": (x, lambda r, m=m: math.ceil(m / (math.ceil(m / r) + 1))),
        }
        if full_rounds_rows and full_rounds_rows != m:
            variants["whole-rounds"] = (x[:full_rounds_rows], None)
        runs, case = {}, {"kernel": kernel, "M": m, "N": n, "dtype": str(dtype)[6:], "config": config}
        case.update(resident_teams=resident, rounds=rounds, whole_rounds_rows=full_rounds_rows)
        for name, (xs, policy) in variants.items():
            o = torch.full_like(xs, float("nan"))
            run, seen = run_with_teams(xs, o, config, limits, extra, policy)
            err = (o.double() - reference(kernel, xs, extra)).abs()
            case[name] = {
                "teams": seen["teams"],
                "rows": xs.shape[0],
                "max_abs_err": err.max().item(),
                "nan": int(o.isnan().sum()),
                "moved_bytes": 2 * xs.numel() * xs.element_size(),
            }
            runs[name] = run
            del err
        times = interleaved(runs)
        for name in runs:
            med = statistics.median(times[name])
            case[name].update(
                median_us=med,
                min_us=min(times[name]),
                max_us=max(times[name]),
                pct_of_copy=100 * case[name]["moved_bytes"] / med / 1e3 / out["copy_GBps"],
                samples_us=times[name],
            )
        out["cases"].append(case)
        print(
            f"{kernel} {m}x{n} {case['dtype']} {config}: resident {resident} teams, {rounds} rounds; "
            + "; ".join(
                f"{name} {case[name]['teams']}t/{case[name]['rows']}r {case[name]['median_us']:.1f} us "
                f"({case[name]['pct_of_copy']:.1f} %) err {case[name]['max_abs_err']:.1e} nan {case[name]['nan']}"
                for name in runs
            ),
            file=sys.stderr,
        )
    out["scaling"] = []
    for kernel, m, n, dtype in SCALING:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(m, n, device="cuda", generator=g) * 4 + 8).to(dtype)
        extra = {}
        if kernel == "layernorm":
            extra = dict(
                weight=torch.ones(n, device="cuda", dtype=dtype), bias=torch.zeros(n, device="cuda", dtype=dtype)
            )
        config = rows.default_for(kernel)(Shape({"M": m, "N": n}, "ab"), dtype)
        _, seen = run_with_teams(x, torch.empty_like(x), config, limits, extra, None)
        resident = seen["resident_teams"]
        points = []
        for k in range(1, m // resident + 1):
            xs = x[: k * resident]
            run, _ = run_with_teams(xs, torch.empty_like(xs), config, limits, extra, None)
            samples = [per_launch_us(run) for _ in range(ROUNDS)]
            points.append(
                {"rounds": k, "rows": k * resident, "median_us": statistics.median(samples), "samples_us": samples}
            )
        fit = statistics.linear_regression([p["rounds"] for p in points], [p["median_us"] for p in points])
        out["scaling"].append(
            {
                "kernel": kernel,
                "N": n,
                "dtype": str(dtype)[6:],
                "teams": resident,
                "points": points,
                "us_per_round": fit.slope,
                "intercept_us": fit.intercept,
            }
        )
        print(
            f"scaling {kernel} N={n} {dtype}: {resident} teams, "
            + ", ".join(f"{p['rounds']}: {p['median_us']:.1f}" for p in points)
            + f" us; {fit.slope:.2f} us a round + {fit.intercept:.2f} us",
            file=sys.stderr,
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
