"""gluon_smem with the part held in registers (``HOLD``) against the default, in one process on one GPU, on issue 24's
widest rows.

Why: with no stores at all the kernel still read only 1.6-1.7 TB/s on an H100 (``rows_knockout.py``, session 25):
a program refills a slot only in pass 2, after its whole part has landed and its team has exchanged, so most of
the shared memory an SM holds is waiting, not in flight. A held part is read into registers once, as it lands,
and its slot is refilled with the program's next row at once; the exchange and pass 2 run from registers while the
next row streams in. Registers, not shared memory, then bound the programs an SM, so parts are smaller (8-32 KB)
and teams larger. ``HOLD=1`` keeps pass 1's fp32 values, ``HOLD=2`` the 16-bit values (converted again in pass 2),
``HOLD=3`` softmax's exponentials of pass 1 (one exponential an element, not two).

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS`` (``rows_ab.py``); ``ROUNDS``
rounds with the configs interleaved inside each; medians, extremes and every sample printed. Each config's output is
checked against fp64 first (max error, NaN count).

    python docs/experiments/rows_hold_ab.py > rows_hold_ab.json

Measured at 616e543 (the held programs lost in every case, so the code went back at the next commit): run it from
a checkout of that commit, whose ``kernels/_rows_gluon.py`` has ``HOLD``.
"""

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rows_ab import run_record, time_configs  # noqa: E402

from kernels import _rows_gluon as rows  # noqa: E402
from kernelscope import runtime  # noqa: E402
from kernelscope.spec import Shape  # noqa: E402

CASES = [
    ("softmax", 1024, 65536, torch.float16),
    ("layernorm", 1024, 65536, torch.float16),
    ("layernorm", 1024, 65536, torch.bfloat16),
    ("softmax", 1024, 65536, torch.float32),
    ("layernorm", 1024, 65536, torch.float32),
    ("softmax", 256, 262144, torch.float16),
]
#: (num_warps, part bytes) of the held programs, each with HOLD 1 and 2 (the same kernel in fp32), and 3 in softmax
HELD = [(4, 8192), (8, 16384), (8, 32768)]
#: session 25's fastest small program: 16-row slots on 4 warps, 32 KB parts
SMALL = (16, 4, 32768)


def main() -> None:
    if not hasattr(rows, "HOLD_CONFIGS"):  # launch() would drop HOLD and time unheld programs under held names
        raise SystemExit("this checkout's kernels/_rows_gluon.py has no HOLD: run this from a checkout of 616e543")
    limits = runtime.device_limits()
    out = run_record()
    for kernel, m, n, dtype in CASES:
        size = torch.tensor([], dtype=dtype).element_size()
        configs = {"default": rows.default_for(kernel)(Shape({"M": m, "N": n}, "ab"), dtype)}
        small = dict(CHUNK_ROWS=SMALL[0], num_warps=SMALL[1], PARTS=n * size // SMALL[2])
        if small != configs["default"] and not rows.config_reason(small, n, size):
            configs["4w/32K"] = small
        for warps, part_bytes in HELD:
            for hold in [*((1, 2) if size == 2 else (1,)), *((3,) if kernel == "softmax" else ())]:
                config = dict(CHUNK_ROWS=part_bytes // (rows.W * size), num_warps=warps, PARTS=n * size // part_bytes)
                config["HOLD"] = hold
                if not rows.config_reason(config, n, size):
                    configs[f"hold{hold} {warps}w/{part_bytes // 1024}K"] = config
        out["cases"].append(time_configs(rows, limits, kernel, m, n, dtype, configs, out["copy_GBps"]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
