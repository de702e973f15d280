"""gluon_persistent of matmul (kernels/_matmul_gluon.py) on a machine without a GPU.

Gluon kernels do not run on Triton's interpreter, so the kernel's numbers are checked only on the GPU (the
correctness gate, with its negative control ``gluon_short_k``). Here: the offline sm_90a build of every config (the
partitions and their registers, the MMAs a K step, TMA in and out, no spills, the shared memory within a block's),
the descriptors, and why the variant sits out where it cannot run.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from kernels import _matmul_gluon as mg
from kernels import matmul
from kernelscope.spec import Shape

pytestmark = pytest.mark.skipif(not mg.HAS_GLUON_HOPPER, reason="this Triton has no Gluon Hopper module")

_SM90_GLUON_MATMUL = (
    helpers.GLUON_SM90_PREAMBLE
    + r"""
from kernels import _matmul_gluon as mg
out = []
for build in json.loads(sys.argv[1]):
    config, dtype = build["config"], getattr(torch, build["dtype"])
    M, N, K = build["M"], build["N"], build["K"]
    a = torch.zeros(M, K, dtype=dtype)
    b = torch.zeros(N, K, dtype=dtype).T if build["b_t"] else torch.zeros(K, N, dtype=dtype)
    a_desc, b_desc, c_desc, b_t = mg.descriptors(a, b, torch.zeros(M, N, dtype=dtype), config)
    sig = {"a_desc": mangle_type(a_desc), "b_desc": mangle_type(b_desc), "c_desc": mangle_type(c_desc),
           "M": "i32", "N": "i32", "K": "i32"}
    const = dict(STAGES=config["STAGES"], GROUP_M=config["GROUP_M"], B_T=b_t, STEPS_SHORT=0,
                 CONSUMER_REGS=mg.CONSUMER_REGS, num_warps=4)
    sig |= dict.fromkeys(const, "constexpr")
    k = triton.compile(GluonASTSource(fn=mg._gluon_matmul_kernel, signature=sig, constexprs=const, attrs={}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": 168})
    ptx = k.asm["ptx"]
    regs, spill = ptxas_usage(ptx)
    out.append({"b_t": b_t, "wgmma": ptx.count("wgmma.mma_async"), "shared": k.metadata.shared,
                "tma_in": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global", ptx)),
                "tma_out": len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared", ptx)),
                "partitions": k.asm["ttgir"].count("ttg.warp_specialize"),
                "consumer_regs": ptx.count(f"setmaxnreg.inc.sync.aligned.u32 \t{mg.CONSUMER_REGS};"),
                "producer_regs": ptx.count("setmaxnreg.dec.sync.aligned.u32 \t24;"),
                "regs": regs, "spill": spill})
print(json.dumps({"builds": out}))
"""
)

#: the most shared memory a block may opt into on sm_90 (H100 and H200 alike)
SM90_SHARED = 232448


def test_every_config_builds_as_three_partitions_without_spills():
    """Every config, B row-major in fp16 and column-major in bf16: one warp_specialize op (a producer, two consumer
    warpgroups), the consumers raising their registers to CONSUMER_REGS and the producer giving its back, two
    consumers' worth of wgmma a K step (BLOCK_K / 16 each), TMA loads and TMA stores, no spills, the ring and the
    output buffers within a block's shared memory (and as ``_gluon_prune`` counts them)."""
    builds = [
        {"config": c, "dtype": dtype, "b_t": b_t, "M": 4096, "N": 4096, "K": 4096}
        for c in mg.CONFIGS
        for dtype, b_t in (("float16", False), ("bfloat16", True))
    ]
    results = helpers.offline_sm90(_SM90_GLUON_MATMUL, builds)["builds"]
    for build, r in zip(builds, results, strict=True):
        c = build["config"]
        assert r["b_t"] == build["b_t"] and r["partitions"] == 1, (build, r)
        assert r["consumer_regs"] >= 1 and r["producer_regs"] >= 1, (build, r)
        assert r["wgmma"] == 2 * c["BLOCK_K"] // 16, (build, r)
        assert r["tma_in"] >= 3 and r["tma_out"] >= 1 and r["spill"] == 0, (build, r)
        counted = c["STAGES"] * (mg.BLOCK_M * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * 2
        counted += 2 * mg.HALF_M * c["BLOCK_N"] * 2
        assert counted <= r["shared"] <= counted + 1024 and r["shared"] <= SM90_SHARED, (build, r)


def test_descriptors_read_a_column_major_b_through_its_transpose():
    config = dict(mg.CONFIGS[mg.DEFAULT])
    a = torch.zeros(256, 128, dtype=torch.float16)
    row_b, col_b = torch.zeros(128, 512, dtype=torch.float16), torch.zeros(512, 128, dtype=torch.float16).T
    out = torch.zeros(256, 512, dtype=torch.float16)
    a_desc, b_desc, c_desc, b_t = mg.descriptors(a, row_b, out, config)
    assert not b_t and list(b_desc.block_shape) == [config["BLOCK_K"], config["BLOCK_N"]]
    assert list(a_desc.block_shape) == [mg.HALF_M, config["BLOCK_K"]]
    assert list(c_desc.block_shape) == [mg.HALF_M, config["BLOCK_N"]]
    _, b_desc, _, b_t = mg.descriptors(a, col_b, out, config)
    assert b_t and list(b_desc.block_shape) == [config["BLOCK_N"], config["BLOCK_K"]]
    assert list(b_desc.shape) == [512, 128]
    # one program an SM at most, fewer where there are fewer tiles (the persistent variants' grid, 128-row tiles)
    tiles = {"BLOCK_M": mg.BLOCK_M, "BLOCK_N": config["BLOCK_N"]}
    assert matmul.persistent_grid(4096, 4096, tiles, 132) == (132,)
    assert matmul.persistent_grid(256, 256, tiles, 132) == (2,)


def _shape(**params) -> Shape:
    return Shape({"M": 4096, "N": 4096, "K": 4096, **params}, "test")


def test_the_variant_says_why_it_sits_out():
    assert "16-bit" in matmul._gluon_supports(_shape(), torch.float32)
    assert "column-major A" in matmul._gluon_supports(_shape(transA=1), torch.float16)
    assert "K = 1001" in matmul._gluon_supports(_shape(K=1001), torch.bfloat16)
    assert "N = 4100" in matmul._gluon_supports(_shape(N=4100), torch.float16)  # 8200 B rows
    assert "interpreter" in matmul._gluon_supports(_shape(N=4104), torch.float16)  # 8208 B rows: aligned
    # under the interpreter (this machine) the feature check says why, for every case it would otherwise run
    assert "interpreter" in matmul._gluon_supports(_shape(K=1000, transB=1), torch.float16)
    limits = {"max_shared_mem_per_block": SM90_SHARED}
    assert matmul._gluon_prune(dict(mg.CONFIGS[mg.DEFAULT]), _shape(), torch.float16, limits) is None
    too_deep = dict(mg.CONFIGS[mg.DEFAULT], STAGES=4)
    assert "exceeds" in matmul._gluon_prune(too_deep, _shape(), torch.float16, limits)
    assert "padding" in matmul._gluon_prune(dict(mg.CONFIGS[mg.DEFAULT]), _shape(N=64), torch.float16, limits)
    with pytest.raises(ValueError, match="cannot run here"):
        a = torch.zeros(64, 64, dtype=torch.float16)
        matmul._prepare_gluon({"a": a, "b": a}, torch.empty_like(a), None)
