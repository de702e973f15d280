"""First contact of gluon_flash with a GPU, before any pipeline run: every config, causal and not, fp16 and bf16,
on a few small shapes (a ragged S, a short one, D = 64), against fp32 attention. Each config runs in its own
process under a time limit, so a kernel that hangs (an mbarrier phase wrong) costs seconds and is named, instead
of stalling the pipeline's gate. Not a correctness gate: the pipeline's is (fp64, three seeds, poisoned outputs,
negative controls); this only decides whether that run is worth starting.

    python docs/experiments/gluon_smoke.py [--warp-specialized]   # one line per config and case; exit 1 on a failure
"""

import json
import pathlib
import sys

from smoke_run import run_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPES = [(1, 4, 4096, 128), (2, 3, 1000, 128), (1, 16, 128, 128), (1, 4, 1024, 64)]

ONE = r"""
import json, math, sys
import torch
sys.path.insert(0, sys.argv[2])
from kernels import _attention_gluon as ag
config = json.loads(sys.argv[1])
rows = []
for b, h, s, d in json.loads(sys.argv[3]):
    for causal in (False, True):
        for dtype in (torch.float16, torch.bfloat16):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", generator=g).to(dtype) for _ in range(3))
            out = torch.full_like(q, float("nan"))
            ag.launch(q, k, v, out, config, causal=causal)()
            torch.cuda.synchronize()
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            err = (out.float() - ref).abs().max().item()
            rows.append({"shape": [b, h, s, d], "causal": causal, "dtype": str(dtype)[6:], "max_abs_err": err,
                         "nan": bool(out.isnan().any())})
print(json.dumps(rows))
"""


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from kernels import _attention_gluon as ag

    only_ws = "--warp-specialized" in sys.argv
    failed = 0
    for config in ag.CONFIGS:
        if only_ws and not config.get("WARP_SPECIALIZE"):
            continue
        failed += run_config(str(config), ONE, [json.dumps(config), str(ROOT), json.dumps(SHAPES)], 2e-2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
