"""Offline sm_90 build of matmul's persistent TMA kernel with and without ``tl.range(..., warp_specialize=True)``
on its tile loop: does this stack's compiler split the loop into producer and consumer partitions on Hopper (a
``ttg.warp_specialize`` op in the TTGIR, ``setmaxnreg`` in the PTX), at which registers, and with FLATTEN on or off?
Checked before any GPU time is spent on the configs.

    cd docs/experiments && TRITON_INTERPRET= python matmul_ws_build.py > results/matmul_ws_build-<triton>.txt
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kernels import matmul as mm  # noqa: E402

PTXAS = next(pathlib.Path(triton.__file__).parent.glob("backends/nvidia/bin/ptxas"))
SIG = {"a_ptr": "*{dt}", "b_ptr": "*{dt}", "c_ptr": "*{dt}"}
SIG |= dict.fromkeys(("M", "N", "K", *(f"stride_{s}" for s in ("am", "ak", "bk", "bn", "cm", "cn"))), "i32")
CONSTS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "USE_TMA", "A_COL_MAJOR", "B_COL_MAJOR", "DOT_IN_FP32")
CONSTS += ("ALIGN_AM", "ALIGN_AK", "ALIGN_BK", "ALIGN_BN", "ALIGN_K", "FLATTEN", "EPILOGUE_SUBTILE", "WARP_SPECIALIZE")
SIG |= dict.fromkeys(CONSTS, "constexpr")
# 8192 x 8192 x 1000: pointers, M, N, the strides K (1000 = 8 x 125) and N are multiples of 8 elements (16 bytes)
DIVISIBLE = (0, 1, 2, 3, 4, 6, 9, 11)


def build(tile, flatten, ws, subtile=False):
    bm, bn, bk, gm, warps, stages = tile
    const = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, USE_TMA=True, A_COL_MAJOR=False, B_COL_MAJOR=False)
    const |= dict(DOT_IN_FP32=False, ALIGN_AM=8, ALIGN_AK=1, ALIGN_BK=16, ALIGN_BN=1, ALIGN_K=8)
    const |= dict(FLATTEN=flatten, EPILOGUE_SUBTILE=subtile, WARP_SPECIALIZE=ws)
    sig = {k: v.format(dt="fp16") for k, v in SIG.items()}
    src = ASTSource(
        fn=mm._matmul_persistent_kernel,
        signature=sig,
        constexprs=const,
        attrs={(i,): [["tt.divisibility", 16]] for i in DIVISIBLE},
    )
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ttgir, ptx = k.asm["ttgir"], k.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    r = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"], capture_output=True, text=True)
    regs = re.findall(r"Used (\d+) registers", r.stderr + r.stdout)
    return {
        "ttg.warp_specialize": ttgir.count("ttg.warp_specialize("),
        "total warps": re.findall(r'"ttg.total-num-warps" = (\d+)', ttgir),
        "partitions": len(re.findall(r"partition\d+\(", ttgir)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "mbarrier waits": len(re.findall(r"mbarrier\.try_wait", ptx)),
        "registers": regs,
        "shared": k.metadata.shared,
    }


print(f"triton {triton.__version__}, sm_90a, fp16, 8192 x 8192 x 1000 specialisations")
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages): the sweep's TMA tiles, then one-warpgroup tiles
TILES = [(128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3), (128, 128, 64, 8, 8, 4), (128, 128, 64, 8, 4, 4)]
TILES += [(128, 128, 64, 8, 4, 3), (128, 128, 64, 8, 4, 5), (128, 128, 128, 8, 4, 3), (64, 256, 64, 8, 4, 4)]
TILES += [(128, 256, 64, 8, 4, 3), (256, 128, 64, 8, 4, 3), (128, 64, 64, 8, 4, 4)]
for tile in TILES:
    for flatten, ws, subtile in ((0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 1, 1)):
        try:
            res = build(tile, bool(flatten), bool(ws), bool(subtile))
        except Exception as e:  # a config the compiler refuses is a finding too
            res = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{tile} FLATTEN={flatten} WARP_SPECIALIZE={ws} EPILOGUE_SUBTILE={subtile}: {res}")
