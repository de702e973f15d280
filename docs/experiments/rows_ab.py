"""What the gluon_smem A/B experiments (``rows_fold_ab.py``, ``rows_configs_ab.py``, ``rows_grid_ab.py``,
``rows_hold_ab.py``, ``rows_knockout.py``) share: their timing basis, the copy bandwidth measured on it, their inputs
and fp64 references.

Timing basis: CUDA events around ``REPS`` back-to-back launches, divided by ``REPS``, after one untimed launch that
keeps the stream busy while the first timed launch is queued (each launch reads 64 MB or more, past the 50 MB L2, so
none reads the previous one's rows from it); the scripts take ``ROUNDS`` rounds with their variants in a seeded random
order inside each, and keep every sample. Not the pipeline's basis (device timestamps) and not its gate: these say
whether a change is worth a pipeline run, on one card.

Before the session-31 change (docs/experiments/ab_arm_bias.py) a sample began on an idle stream, so its first launch
also counted the host's launch latency, which depends on what the process ran before; and the order was fixed (before
session 30) or rotated (session 30), so an arm always followed the same arm. Results recorded before it carry that
bias (docs/kernel-notes.md, "Session 31").
"""

import random
import statistics
import sys

import torch
import torch.nn.functional as F

REPS, ROUNDS = 10, 15


def per_launch_us(fn) -> float:
    """One sample: ``REPS`` back-to-back calls of ``fn`` between two CUDA events, in µs a call. One call before the
    start event is not timed: the start event is queued behind it, so the host's launch latency of the first timed call
    (on an H100, 50-130 µs more than a launch queued behind a running kernel, depending on what ran before) is not
    counted."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(REPS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / REPS


def interleaved(runs: dict, seed: int = 0) -> dict[str, list[float]]:
    """``ROUNDS`` rounds of :func:`per_launch_us` with ``runs`` (name -> callable) inside each round in a seeded random
    order, so a drift of the card's state falls on every variant alike and no variant always follows the same one:
    name -> every sample (in round order), µs a call.

    A rotated order (session 30) keeps every arm behind the same arm; with the first launch of a sample timed from an
    idle stream, two copies of one config then differed by up to 2.7 % (docs/experiments/ab_arm_bias.py). An
    experiment still times one variant twice and reads its differences against that pair's."""
    names, rng = list(runs), random.Random(seed)
    times = {name: [] for name in names}
    for _ in range(ROUNDS):
        order = list(names)
        rng.shuffle(order)
        for name in order:
            times[name].append(per_launch_us(runs[name]))
    return times


def run_record() -> dict:
    """An experiment's output record: the device and stack, the copy bandwidth on this basis and an empty list of
    cases; the device and the copy bandwidth also on stderr."""
    import triton

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out["copy_GBps"] = copy_gbps()
    out["cases"] = []
    print(f"{out['device']} copy {out['copy_GBps']:.0f} GB/s", file=sys.stderr)
    return out


def copy_gbps(size: int = 1 << 31) -> float:
    """The copy bandwidth on the same basis: a 2 GiB buffer copied (read + write), the median of ``ROUNDS``."""
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy = [per_launch_us(lambda: dst.copy_(src)) for _ in range(ROUNDS)]
    return 2 * size / statistics.median(copy) / 1e3


def inputs(kernel: str, m: int, n: int, dtype: torch.dtype):
    """Seeded rows ``x`` (N(8, 4)) and, for layernorm, the ``weight`` and ``bias`` keyword arguments of a launch."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(m, n, device="cuda", generator=g) * 4 + 8).to(dtype)
    extra = {}
    if kernel == "layernorm":
        extra = dict(
            weight=(0.5 + torch.rand(n, device="cuda", generator=g)).to(dtype),
            bias=torch.randn(n, device="cuda", generator=g).to(dtype),
        )
    return x, extra


def reference(kernel: str, x: torch.Tensor, extra: dict) -> torch.Tensor:
    """fp64 softmax or LayerNorm (eps 1e-5) of ``x``."""
    if kernel == "softmax":
        return torch.softmax(x.double(), dim=-1)
    return F.layer_norm(x.double(), (x.shape[1],), extra["weight"].double(), extra["bias"].double(), 1e-5)


def time_configs(rows, limits, kernel: str, m: int, n: int, dtype: torch.dtype, configs: dict, copy: float) -> dict:
    """Each of ``configs`` (name -> config) launched through ``rows.launch`` on one seeded case: its output checked
    against fp64 first (max error, NaN count; a config that fails to build or launch is recorded and the others
    still run), then ``ROUNDS`` rounds with the configs interleaved inside each. The case's record, with every
    sample and the % of ``copy`` (GB/s) each median reaches; a line a config on stderr."""
    x, extra = inputs(kernel, m, n, dtype)
    ref = reference(kernel, x, extra)
    runs, case = {}, {"kernel": kernel, "M": m, "N": n, "dtype": str(dtype)[6:], "configs": {}}
    for name, config in configs.items():
        o = torch.full_like(x, float("nan"))
        record = {"config": config}
        try:
            run = rows.launch(x, o, config, limits, **extra)
            run()
            torch.cuda.synchronize()
            err = (o.double() - ref).abs()
            record.update(max_abs_err=err.max().item(), nan=int(o.isnan().sum()))
            runs[name] = run
            del err
        except Exception as exc:  # a config that does not build or launch is recorded, the others still run
            record["failed"] = f"{type(exc).__name__}: {exc}"[:1500]
        case["configs"][name] = record
    times = interleaved(runs)
    moved = 2 * x.numel() * x.element_size()
    for name in runs:
        med = statistics.median(times[name])
        case["configs"][name].update(
            median_us=med,
            min_us=min(times[name]),
            max_us=max(times[name]),
            pct_of_copy=100 * moved / med / 1e3 / copy,
            samples_us=times[name],
        )
    print(f"{kernel} {m}x{n} {case['dtype']}:", file=sys.stderr)
    for name, rec in case["configs"].items():
        if "failed" in rec:
            print(f"  {name}: FAILED {rec['failed'][:200]}", file=sys.stderr)
        else:
            print(
                f"  {name} {rec['config']}: {rec['median_us']:.1f} us ({rec['pct_of_copy']:.1f} %) "
                f"err {rec['max_abs_err']:.1e} nan {rec['nan']}",
                file=sys.stderr,
            )
    return case
