"""Offline sm_90a build of matmul's persistent TMA kernel with ``num_ctas=2`` (a cluster of two CTAs): does this
stack's ``triton.language`` compile it, and does the PTX multicast the shared operand's TMA loads across the
cluster, as cuBLAS's ``nvjet_sm90_*_1x2_*`` kernels do? Checked without a GPU (issue 24 asks where cuBLAS's
choice is out of Triton's reach).

    cd docs/experiments && TRITON_INTERPRET= python matmul_ctas_build.py 2> err.txt > results/ctas-<triton>.txt
    grep "LLVM ERROR" err.txt | cut -c1-220 >> results/ctas-<triton>.txt   # why the failures failed
"""

import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kernels import matmul as mm  # noqa: E402

# the kernel's signature and the launch's specialisation, as in matmul_ws_build.py (importing that runs its builds)
SIG = {"a_ptr": "*{dt}", "b_ptr": "*{dt}", "c_ptr": "*{dt}"}
SIG |= dict.fromkeys(("M", "N", "K", *(f"stride_{s}" for s in ("am", "ak", "bk", "bn", "cm", "cn"))), "i32")
CONSTS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "USE_TMA", "A_COL_MAJOR", "B_COL_MAJOR", "DOT_IN_FP32")
CONSTS += ("ALIGN_AM", "ALIGN_AK", "ALIGN_BK", "ALIGN_BN", "ALIGN_K", "FLATTEN", "EPILOGUE_SUBTILE", "WARP_SPECIALIZE")
SIG |= dict.fromkeys(CONSTS, "constexpr")
DIVISIBLE = (0, 1, 2, 3, 4, 6, 9, 11)


def build(tile, flatten, subtile, ctas):
    bm, bn, bk, gm, warps, stages = tile
    const = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, USE_TMA=True, A_COL_MAJOR=False, B_COL_MAJOR=False)
    const |= dict(DOT_IN_FP32=False, ALIGN_AM=8, ALIGN_AK=1, ALIGN_BK=16, ALIGN_BN=1, ALIGN_K=8)
    const |= dict(FLATTEN=flatten, EPILOGUE_SUBTILE=subtile, WARP_SPECIALIZE=False)
    sig = {k: v.format(dt="fp16") for k, v in SIG.items()}
    src = ASTSource(
        fn=mm._matmul_persistent_kernel,
        signature=sig,
        constexprs=const,
        attrs={(i,): [["tt.divisibility", 16]] for i in DIVISIBLE},
    )
    options = {"num_warps": warps, "num_stages": stages, "num_ctas": ctas}
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    ptx = k.asm["ptx"]
    return {
        "multicast": len(re.findall(r"multicast", ptx)),
        "cluster": len(re.findall(r"cluster", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "shared": k.metadata.shared,
    }


print(f"triton {triton.__version__}, sm_90a, fp16, 8192 x 8192 x 1000")
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages): the large-problem default's tile and two others
for tile in [(128, 256, 64, 8, 8, 4), (128, 128, 64, 8, 8, 4), (256, 128, 64, 8, 8, 3)]:
    for ctas in (1, 2):
        for flatten, subtile in ((1, 1), (0, 0)):
            try:
                res = build(tile, bool(flatten), bool(subtile), ctas)
            except Exception as e:  # a config the compiler refuses is a finding too
                res = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
            print(f"{tile} num_ctas={ctas} FLATTEN={flatten} EPILOGUE_SUBTILE={subtile}: {res}", flush=True)
