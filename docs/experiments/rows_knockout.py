"""Where gluon_smem's time goes: the kernels of ``kernels/_rows_gluon.py`` with one part of their work knocked
out at a time, timed against the intact kernel in one process on one GPU (16-bit 1024 x 65536, the default
config; the knocked-out kernels compute wrong results, so only their time is read).

- ``intact``: the kernel as it is;
- ``no-exchange``: the team exchange skipped (each part normalises by its own statistics): what the exchange
  through global memory costs, spin included;
- ``no-pass1``: pass 1 only waits for each slot's mbarrier (no reads of the slot, no statistics): what the
  statistics cost while the slots land;
- ``no-store``: pass 2's stores masked by ``y != y`` (never true here; the compiler cannot prove it, so every
  instruction still issues but nothing is written): what writing the output costs.

Each variant is the module's source with one text substitution (checked to match), loaded as its own module.
Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS``; ``ROUNDS`` rounds with the
variants interleaved inside each; medians, extremes and every sample printed.

    python docs/experiments/rows_knockout.py > rows_knockout.json
"""

import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import inputs, interleaved  # noqa: E402

from kernelscope import runtime  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

SOURCE = (ROOT / "kernels" / "_rows_gluon.py").read_text()
SOFTMAX_PASS1 = """            x = slots.index(c).load(layout).to(gl.float32) * LOG2E
            m_new = gl.maximum(m_run, gl.max(x, axis=1))
            m_sub = gl.where(m_new == -float("inf"), 0.0, m_new)  # a box row of -inf so far: nothing to rescale
            s_run = s_run * gl.exp2(m_run - m_sub)
            if not (SKIP_LAST_CHUNK_IN_SUM and c == CHUNKS - 1):
                s_run += gl.sum(gl.exp2(x - gl.expand_dims(m_sub, 1)), axis=1)
            m_run = m_new
"""
LAYERNORM_PASS1 = """            x = slots.index(c).load(layout).to(gl.float32)
            if SKIP_LAST_CHUNK_IN_SUM and c == CHUNKS - 1:  # the negative control: zeros in the last slot's place
                x = x * 0.0
            box_mean = gl.sum(x, axis=1) / BOX_W
            d = x - gl.expand_dims(box_mean, 1)
            delta = box_mean - mean_run
            mean_run = mean_run + delta * (1.0 / (c + 1))
            m2_run = m2_run + gl.sum(d * d, axis=1) + delta * delta * (c * BOX_W / (c + 1))
"""
#: variant -> [(old, new, expected count)]
KNOCKOUTS = {
    "intact": [],
    "no-exchange": [("        if PARTS > 1:\n", "        if PARTS > 1000:\n", 2)],
    "no-pass1": [(SOFTMAX_PASS1, "", 1), (LAYERNORM_PASS1, "", 1)],
    "no-store": [
        (
            "gl.store(base + c * CHUNK_ROWS * BOX_W + offs, y.to(dtype))",
            "gl.store(base + c * CHUNK_ROWS * BOX_W + offs, y.to(dtype), mask=y != y)",
            1,
        ),
        (
            "gl.store(base + cols0 + c * CHUNK_ROWS * BOX_W, y.to(dtype))",
            "gl.store(base + cols0 + c * CHUNK_ROWS * BOX_W, y.to(dtype), mask=y != y)",
            1,
        ),
    ],
}
CASES = [("softmax", 1024, 65536, torch.float16), ("layernorm", 1024, 65536, torch.float16)]


def variant(name: str, subs, tmp: Path):
    source = SOURCE
    for old, new, count in subs:
        if source.count(old) != count:
            raise SystemExit(f"{name}: expected {count} of {old!r}, found {source.count(old)}")
        source = source.replace(old, new)
    path = tmp / f"_rows_{name.replace('-', '_')}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    import triton

    limits = runtime.device_limits()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    out["cases"] = []
    with tempfile.TemporaryDirectory() as tmp:
        modules = {name: variant(name, subs, Path(tmp)) for name, subs in KNOCKOUTS.items()}
        for kernel, m, n, dtype in CASES:
            x, extra = inputs(kernel, m, n, dtype)
            config = modules["intact"].default_for(kernel)(Shape({"M": m, "N": n}, "ko"), dtype)
            runs = {}
            failed = {}
            for name, mod in modules.items():
                try:
                    run = mod.launch(x, torch.empty_like(x), config, limits, **extra)
                    run()
                    torch.cuda.synchronize()
                    runs[name] = run
                except Exception as exc:  # a variant that does not build is recorded, the others still run
                    failed[name] = f"{type(exc).__name__}: {exc}"[:2000]
            times = interleaved(runs)
            case = {"kernel": kernel, "M": m, "N": n, "dtype": str(dtype)[6:], "config": config, "failed": failed}
            for name in runs:
                case[name] = {
                    "median_us": statistics.median(times[name]),
                    "min_us": min(times[name]),
                    "max_us": max(times[name]),
                    "samples_us": times[name],
                }
            out["cases"].append(case)
            print(
                f"{kernel} {m}x{n} {case['dtype']} {config}: "
                + "; ".join(f"{name} {case[name]['median_us']:.1f} us" for name in runs),
                file=sys.stderr,
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
