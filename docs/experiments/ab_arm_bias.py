"""Why the A/B's first arm of a config is slower than an identical second arm (session 30: 0.07-0.94 % in 12 of 12
case-runs on an H100, with the order rotated each round; docs/kernel-notes.md, "Session 30").

Two candidates, told apart here:

- *the arm itself*: its own output buffer (where it lies), or being prepared first. Then the arm stays slower
  whatever comes before it.
- *what ran before it*: ``rows_ab.interleaved`` rotated a fixed cyclic order (session 30), so every arm always
  followed the same arm. In the matmul A/B the default followed cuBLAS (``torch``) in 13 of 15 rounds and its twin
  always followed the default. Then the slowness goes with the predecessor, in the first launches of a sample.

Each case has four arms: the baseline (``torch``) and three copies of one kernel config (``a``, ``b``, ``c``), each
prepared with its own output buffer, in that order. Two phases:

1. ``cyclic``: ``ROUNDS`` rounds in the session-30 helper's rotated order (reproduces its reading);
2. ``random``: ``RANDOM_ROUNDS`` rounds, each a seeded random permutation, so every copy follows every arm.

Every sample is ``REPS`` back-to-back launches, as in the A/B, but with an event between every two launches, so each
launch's time is kept. Every record carries its phase, round, place in the round, arm and predecessor (the arm of
the sample before it, across rounds too). Then, as a check of the fix this led to, ``ROUNDS`` rounds of the helper as
it now is (``rows_ab.interleaved``: one untimed launch before each sample's start event, a seeded random order), and
the copies' per-round ratios, an A/A on the method the A/B scripts now use.

Each copy's output is checked before timing: matmul against an fp32 product, layernorm against fp64, both within
the spec's tolerance, and no NaN.

    python docs/experiments/ab_arm_bias.py > ab_arm_bias.json      (a summary on stderr)
"""

import json
import random
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import REPS, ROUNDS, interleaved  # noqa: E402
from rows_ab import inputs as row_inputs  # noqa: E402

from kernels import _rows_gluon as rows  # noqa: E402
from kernelscope import registry, runtime  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

RANDOM_ROUNDS = 45
COPIES = ("a", "b", "c")
CASES = [
    ("matmul", dict(M=4096, N=4096, K=4096), torch.float16),
    ("matmul", dict(M=4096, N=4096, K=4096), torch.bfloat16),
    ("matmul", dict(M=8192, N=8192, K=1000), torch.float16),
    ("layernorm", dict(M=1024, N=65536), torch.float16),
    ("layernorm", dict(M=1024, N=65536), torch.bfloat16),
]


def _check(what: str, got: torch.Tensor, ref: torch.Tensor, tol) -> None:
    """Stop the experiment where an arm's output (``got``, in ``ref``'s precision) is outside the spec's tolerance
    of the reference anywhere, or holds NaN."""
    torch.cuda.synchronize()
    err = (got - ref).abs()
    bad = int((err > tol.atol + tol.rtol * ref.abs()).sum()) + int(got.isnan().sum())
    if bad:
        raise SystemExit(f"{what}: {bad} elements wrong or NaN")


def matmul_arms(params: dict, dtype: torch.dtype) -> dict:
    """torch (cuBLAS) and three copies of triton_persistent's default, each with its own C, checked first."""
    spec = registry.get("matmul")
    shape = Shape(params, "bias")
    x = spec.make_inputs(shape, dtype, torch.device("cuda"), 0)
    ref = x["a"].float() @ x["b"].float()
    tol = spec.tolerances[dtype]
    config = spec.implementation("triton_persistent").default_config(shape, dtype)
    arms = {}
    for name, impl in [("torch", "torch"), *((c, "triton_persistent") for c in COPIES)]:
        out = torch.full((params["M"], params["N"]), float("nan"), dtype=dtype, device="cuda")
        fn = spec.implementation(impl).prepare(x, out, config if impl != "torch" else {})
        _check(f"matmul {params} {dtype} {name}", fn().float(), ref, tol)
        arms[name] = fn
    return {"config": config, "arms": arms}


def layernorm_arms(params: dict, dtype: torch.dtype) -> dict:
    """torch and three copies of gluon_smem layernorm's default, each with its own output, checked first."""
    m, n = params["M"], params["N"]
    x, extra = row_inputs("layernorm", m, n, dtype)
    ref = F.layer_norm(x.double(), (n,), extra["weight"].double(), extra["bias"].double(), 1e-5)
    tol = registry.get("layernorm").tolerances[dtype]
    config = rows.default_for("layernorm")(Shape(params, "bias"), dtype)
    limits = runtime.device_limits()
    arms = {"torch": lambda: F.layer_norm(x, (n,), extra["weight"], extra["bias"], 1e-5)}
    for name in COPIES:
        out = torch.full_like(x, float("nan"))
        run = rows.launch(x, out, config, limits, **extra)
        run()
        _check(f"layernorm {params} {dtype} {name}", out.double(), ref, tol)
        arms[name] = run
    return {"config": config, "arms": arms}


def sample(fn) -> list[float]:
    """``REPS`` back-to-back launches of ``fn`` with an event between every two: each launch's µs."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(REPS + 1)]
    events[0].record()
    for i in range(REPS):
        fn()
        events[i + 1].record()
    events[-1].synchronize()
    return [events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(REPS)]


def orders(names: list[str]):
    """(phase, round, order): the helper's rotated rounds, then seeded random permutations."""
    for r in range(ROUNDS):
        shift = r % len(names)
        yield "cyclic", r, names[shift:] + names[:shift]
    rng = random.Random(0)
    for r in range(RANDOM_ROUNDS):
        order = list(names)
        rng.shuffle(order)
        yield "random", r, order


def after_kind(record: dict) -> str:
    """What ran before a copy's sample: the baseline, the same copy, or another copy of the config."""
    if record["after"] == "torch":
        return "torch"
    return "same copy" if record["after"] == record["arm"] else "other copy"


def summary(records: list[dict]) -> list[str]:
    """Per phase: each arm's median sample mean over copy ``a``'s; then, over the copies, the first launch and the
    rest by what ran before."""
    lines = []
    for phase in ("cyclic", "random"):
        recs = [r for r in records if r["phase"] == phase]
        mean = {a: statistics.median(statistics.fmean(r["launch_us"]) for r in recs if r["arm"] == a) for a in COPIES}
        lines.append(
            f"  {phase}: median sample mean a {mean['a']:.2f} us; b/a {mean['b'] / mean['a']:.4f}, "
            f"c/a {mean['c'] / mean['a']:.4f}"
        )
        for kind in ("torch", "same copy", "other copy"):
            sel = [r for r in recs if r["arm"] in COPIES and r["after"] is not None and after_kind(r) == kind]
            if not sel:
                continue
            first = statistics.median(r["launch_us"][0] for r in sel)
            second = statistics.median(r["launch_us"][1] for r in sel)
            rest = statistics.median(statistics.fmean(r["launch_us"][1:]) for r in sel)
            lines.append(
                f"    after {kind:10s} n={len(sel):3d}: launch 1 {first:.2f} us, launch 2 {second:.2f}, "
                f"launches 2-{REPS} {rest:.2f} (first/rest {first / rest:.4f})"
            )
    return lines


def main() -> None:
    import triton

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out["reps"], out["rounds"], out["random_rounds"], out["cases"] = REPS, ROUNDS, RANDOM_ROUNDS, []
    for kernel, params, dtype in CASES:
        built = (matmul_arms if kernel == "matmul" else layernorm_arms)(params, dtype)
        arms, records, before = built["arms"], [], None
        for phase, rnd, order in orders(list(arms)):
            for place, name in enumerate(order):
                records.append(
                    dict(phase=phase, round=rnd, place=place, arm=name, after=before, launch_us=sample(arms[name]))
                )
                before = name
        helper = interleaved(arms, seed=1)
        case = dict(kernel=kernel, **params, dtype=str(dtype)[6:], config=built["config"], samples=records)
        case["helper_samples_us"] = helper
        out["cases"].append(case)
        print(f"{kernel} {params} {case['dtype']}:", file=sys.stderr)
        print("\n".join(summary(records)), file=sys.stderr)
        ratio = {k: statistics.median(x / y for x, y in zip(helper["a"], helper[k])) for k in ("b", "c")}
        print(f"  helper (lead launch, random order): a/b {ratio['b']:.4f}, a/c {ratio['c']:.4f}", file=sys.stderr)
        del built, arms
        torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
