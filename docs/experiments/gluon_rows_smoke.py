"""First contact of the gluon_smem kernels (softmax and layernorm, ``kernels/_rows_gluon.py``) with a GPU, before
any pipeline run: every config of each at every split of a row over a team (PARTS), every dtype, on a few shapes
(several rows a program, a row count that leaves the last wave short, rows split over teams of up to 16), against
torch in fp32, each launched twice (the team workspace must be restored by the kernel itself). Each config runs
in its own process under a time limit, so a kernel that hangs (an mbarrier phase wrong) costs seconds and is named.
Not a correctness gate: the pipeline's is; this only decides whether that run is worth starting.

    python docs/experiments/gluon_rows_smoke.py        # one line per config and case; exit 1 on a failure
"""

import json
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

from smoke_run import run_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPES = [(300, 65536), (64, 262144), (7, 16384), (2000, 8192)]

ONE = r"""
import json, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, sys.argv[2])
from kernels import _rows_gluon as rg
from kernelscope import runtime
from kernelscope.spec import Shape
kernel, base = sys.argv[3], json.loads(sys.argv[1])
limits = runtime.device_limits()
rows = []
for m, n in json.loads(sys.argv[4]):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        size = torch.empty((), dtype=dtype).element_size()
        if rg.shape_reason(n, size):
            continue
        for config in rg.configs_for(kernel)(Shape({"M": m, "N": n}, "smoke"), dtype):
            if dict(config, PARTS=None) != dict(base, PARTS=None) or rg.config_reason(config, n, size):
                continue
            g = torch.Generator(device="cuda").manual_seed(0)
            x = (torch.randn(m, n, device="cuda", generator=g) * 4 + 100).to(dtype)
            if kernel == "softmax":
                ref = torch.softmax(x.float(), dim=-1)
                extra = {}
            else:
                w = (0.5 + torch.rand(n, device="cuda", generator=g)).to(dtype)
                b = torch.randn(n, device="cuda", generator=g).to(dtype)
                ref = F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
                extra = dict(weight=w, bias=b)
            out = torch.full_like(x, float("nan"))
            run = rg.launch(x, out, config, limits, **extra)
            errs = []
            for _ in range(2):
                out.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                errs.append((out.float() - ref).abs().max().item())
            rows.append({"shape": [m, n], "dtype": str(dtype)[6:], "PARTS": config["PARTS"], "max_abs_err": max(errs),
                         "nan": bool(out.isnan().any()), "arrived_reset": bool((run.workspace.arrived == 0).all())})
print(json.dumps(rows))
"""

#: a loose bound for a go / no-go: the gate's per-dtype tolerances are far tighter
LIMIT = {"softmax": 1e-2, "layernorm": 5e-2}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from kernels import _rows_gluon as rg

    jobs = [
        (f"{kernel} {config}", ONE, [json.dumps(config), str(ROOT), kernel, json.dumps(SHAPES)], LIMIT[kernel])
        for kernel, configs in rg.CONFIGS.items()
        for config in configs
    ]
    # each config in its own process (a hang costs its time limit only), several side by side (compiles dominate)
    with ThreadPoolExecutor(max_workers=6) as pool:
        failed = sum(pool.map(lambda job: run_config(*job, timeout=240), jobs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
