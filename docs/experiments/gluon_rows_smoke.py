"""First contact of the gluon_smem kernels (softmax and layernorm, ``kernels/_rows_gluon.py``) with a GPU, before
any pipeline run: every config of each, every dtype whose rows fit, on a few shapes (one row a program, several
rows a program, a row count that leaves the last wave short), against torch in fp32. Each config runs in its own
process under a time limit, so a kernel that hangs (an mbarrier phase wrong) costs seconds and is named. Not a
correctness gate: the pipeline's is; this only decides whether that run is worth starting.

    python docs/experiments/gluon_rows_smoke.py        # one line per config and case; exit 1 on a failure
"""

import json
import pathlib
import sys

from smoke_run import run_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPES = [(1024, 65536), (300, 65536), (2000, 8192), (7, 16384)]

ONE = r"""
import json, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, sys.argv[2])
from kernels import _rows_gluon as rg
kernel, config = sys.argv[3], json.loads(sys.argv[1])
sms = torch.cuda.get_device_properties(0).multi_processor_count
rows = []
for m, n in json.loads(sys.argv[4]):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        if rg.shape_reason(n, torch.empty((), dtype=dtype).element_size()) or rg.config_reason(config, n):
            continue
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(m, n, device="cuda", generator=g) * 4 + 100).to(dtype)
        out = torch.full_like(x, float("nan"))
        if kernel == "softmax":
            rg.launch(x, out, config, sms)()
            ref = torch.softmax(x.float(), dim=-1)
        else:
            w = (0.5 + torch.rand(n, device="cuda", generator=g)).to(dtype)
            b = torch.randn(n, device="cuda", generator=g).to(dtype)
            rg.launch(x, out, config, sms, weight=w, bias=b)()
            ref = F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
        torch.cuda.synchronize()
        err = (out.float() - ref).abs().max().item()
        rows.append({"shape": [m, n], "dtype": str(dtype)[6:], "max_abs_err": err, "nan": bool(out.isnan().any())})
print(json.dumps(rows))
"""

#: a loose bound for a go / no-go: the gate's per-dtype tolerances are far tighter
LIMIT = {"softmax": 1e-2, "layernorm": 5e-2}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from kernels import _rows_gluon as rg

    failed = 0
    for kernel, configs in rg.CONFIGS.items():
        for config in configs:
            args = [json.dumps(config), str(ROOT), kernel, json.dumps(SHAPES)]
            failed += run_config(f"{kernel} {config}", ONE, args, LIMIT[kernel])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
