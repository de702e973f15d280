"""gluon_smem with fewer warps a program and smaller parts: configs outside ``kernels/_rows_gluon.py``'s space,
timed against its default in one process on one GPU, on issue 24's widest rows.

Why: the kernel's top stall is the CTA barrier (Nsight Compute, docs/kernel-notes.md "Session 23" and "Session 24"):
every TMA refill waits for all of the program's warps to have read the slot. The configs swept so far have 8 or 16
warps a program and parts of 32 KB or more. With 1, 2 or 4 warps a program the barrier spans fewer warps (one warp:
no other warp to wait for), and smaller parts put more programs on an SM, in more phases, at the price of larger
teams (more partials exchanged through global memory a row). Each config here is launched through
``rows.launch`` as it is; only the choice of config is outside the module's space.

Timing basis: CUDA events around ``REPS`` back-to-back launches divided by ``REPS`` (each launch reads 64 MB or
more, past the 50 MB L2); ``ROUNDS`` rounds with the configs interleaved inside each; medians, extremes and every
sample printed. Each config's output is checked against fp64 first (max error, NaN count).

    python docs/experiments/rows_configs_ab.py > rows_configs_ab.json
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
    ("softmax", 1024, 65536, torch.float32),
    ("softmax", 256, 262144, torch.float16),
]
#: (CHUNK_ROWS, num_warps, part bytes); PARTS follows from the row's bytes
CONFIGS = [
    (32, 8, 32768),
    (16, 4, 32768),
    (32, 4, 32768),
    (16, 4, 16384),
    (8, 2, 16384),
    (16, 2, 16384),
    (4, 1, 8192),
    (8, 1, 8192),
    (8, 2, 8192),
]


def main() -> None:
    limits = runtime.device_limits()
    out = run_record()
    for kernel, m, n, dtype in CASES:
        default = rows.default_for(kernel)(Shape({"M": m, "N": n}, "ab"), dtype)
        row_bytes = n * torch.tensor([], dtype=dtype).element_size()
        configs = {"default": default}
        for chunk_rows, warps, part_bytes in CONFIGS:
            parts = max(1, row_bytes // part_bytes)
            config = dict(CHUNK_ROWS=chunk_rows, num_warps=warps, PARTS=parts)
            if (n // rows.W) % parts or (n // rows.W // parts) % chunk_rows or config == default:
                continue
            configs[f"{chunk_rows}x{warps}w/{part_bytes // 1024}K"] = config
        out["cases"].append(time_configs(rows, limits, kernel, m, n, dtype, configs, out["copy_GBps"]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
