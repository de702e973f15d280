"""gluon_flash (kernels/_attention_gluon.py) on a machine without a GPU.

Gluon kernels do not run on Triton's interpreter, so the kernel's numbers are checked only on the GPU (the
correctness gate, with its two negative controls). Here: what can be checked without one. The offline sm_90a
build shows the schedule the kernel exists for (each key block's exponentials issue while the previous block's PV
MMA is in flight), that no config spills or outgrows shared memory; the descriptors cover one head each; and the
variant says why it sits out where it cannot run.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from kernels import _attention_gluon as ag
from kernels import attention
from kernelscope.spec import Shape

pytestmark = pytest.mark.skipif(not ag.HAS_GLUON_HOPPER, reason="this Triton has no Gluon Hopper module")

_SM90_GLUON = (
    helpers.GLUON_SM90_PREAMBLE
    + r"""
from kernels import _attention_gluon as ag
out = []
for build in json.loads(sys.argv[1]):
    config, dtype = build["config"], getattr(torch, build["dtype"])
    x = torch.zeros(1, 2, 256, 128, dtype=dtype)
    sig = {"q_desc": mangle_type(ag.descriptor(x, config["BLOCK_M"])),
           "k_desc": mangle_type(ag.descriptor(x, config["BLOCK_N"])),
           "v_desc": mangle_type(ag.descriptor(x, config["BLOCK_N"])),
           "o_ptr": "*fp16" if dtype == torch.float16 else "*bf16", "qk_scale": "fp32", "seq_len": "i32"}
    ws = bool(config.get("WARP_SPECIALIZE"))
    if ws:
        sig["q_desc"] = mangle_type(ag.descriptor(x, config["BLOCK_M"] // 2))
    const = dict(HEAD_DIM=128, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], STAGES=config["STAGES"],
                 CAUSAL=build["causal"], RESCALE_ACC=True, num_warps=config["num_warps"])
    options = {"num_warps": config["num_warps"]}
    if ws:
        const["CONSUMER_REGS"] = 240
        options["maxnreg"] = 168
    sig |= dict.fromkeys(const, "constexpr")
    fn = ag._gluon_attention_ws_kernel if ws else ag._gluon_attention_kernel
    k = triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=const, attrs={(3,): [["tt.divisibility", 16]]}),
                       target=GPUTarget("cuda", 90, 32), options=options)
    ptx = k.asm["ptx"]
    in_flight, beside, total, waits = False, 0, 0, []
    for line in ptx.splitlines():
        if "wgmma.commit_group" in line:
            in_flight = True
        elif m := re.search(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", line):
            waits.append(int(m.group(1)))
            in_flight = int(m.group(1)) > 0
        elif "ex2.approx" in line:
            total += 1
            beside += in_flight
    registers, spill = ptxas_usage(ptx)
    out.append({"beside": beside, "ex2": total, "waits": waits, "shared": k.metadata.shared, "ws": ws,
                "partitions": k.asm["ttgir"].count("ttg.warp_specialize"), "setmaxnreg": ptx.count("setmaxnreg"),
                "registers": registers, "spill": spill})
print(json.dumps({"builds": out}))
"""
)

#: the most shared memory a block may opt into on sm_90 (H100 and H200 alike)
SM90_SHARED = 232448


def test_each_key_blocks_softmax_issues_beside_the_previous_blocks_pv_mma_and_no_config_spills():
    """Every GPU config, causal and not, in both dtypes' builds: the loop waits for one of its two MMA groups
    (``wait_group 1``) before the softmax and for the other after it, so the exponentials of every block after the
    first (half of those in the PTX: the first block's are apart, before the loop) issue while an MMA runs. The
    one-tile triton_flash has 0 (docs/experiments/results/attention_subtiles-*.txt)."""
    builds = [
        {"config": c, "causal": causal, "dtype": dtype}
        for c in ag.CONFIGS
        for causal, dtype in ((False, "bfloat16"), (True, "float16"))
    ]
    results = helpers.offline_sm90(_SM90_GLUON, builds)["builds"]
    for build, r in zip(builds, results, strict=True):
        if r["ws"]:
            # FA3's partitions: one warp_specialize op, registers moved between them, and each of the two
            # consumer warpgroups keeps its PV MMA in flight through the softmax (the partitions' blocks are
            # laid out out of program order, so the exponentials are not counted linearly here)
            assert r["partitions"] >= 1 and r["setmaxnreg"] > 0, (build, r)
            assert r["waits"].count(1) == 2, (build, r)
        else:
            assert r["ex2"] > 0 and r["beside"] * 2 == r["ex2"], (build, r)
            assert 1 in r["waits"], (build, r)
        assert r["spill"] == 0 and r["registers"] <= 255, (build, r)
        assert r["shared"] <= SM90_SHARED, (build, r)


def test_the_descriptors_cover_one_head_each():
    """[B*H, S, D] with [1, block, D] boxes: a tile that hangs past S is zero-filled by the TMA unit, never read
    from the next head."""
    x = torch.zeros(2, 3, 40, 128, dtype=torch.bfloat16)
    desc = ag.descriptor(x, 64)
    assert list(desc.shape) == [6, 40, 128] and list(desc.block_shape) == [1, 64, 128]
    assert list(desc.strides) == [40 * 128, 128, 1]


def _shape(**params):
    return Shape({"B": 1, "H": 2, "S": 4096, "D": 128, "causal": 0, **params}, "test")


def test_gluon_flash_sits_out_where_it_cannot_run_and_says_why(monkeypatch):
    # under the interpreter (this machine): the variant, not the case, is the reason
    assert "interpreter" in attention._gluon_supports(_shape(), torch.bfloat16)
    assert "16-bit" in attention._gluon_supports(_shape(), torch.float32)
    assert "head dim 32" in attention._gluon_supports(_shape(D=32), torch.float16)
    assert "[B, S, H, D]" in attention._gluon_supports(_shape(bshd=1), torch.float16)
    # on a GPU, by compute capability: Hopper only
    gpu = {"interpreter": False, "capability": (9, 0), "num_sms": 132, "max_shared_mem_per_block": SM90_SHARED}
    monkeypatch.setattr(attention.runtime, "device_limits", lambda: gpu)
    assert attention._gluon_supports(_shape(), torch.bfloat16) is None
    gpu["capability"] = (10, 0)
    assert "sm_90" in attention._gluon_supports(_shape(), torch.bfloat16)
    monkeypatch.setattr(attention.gluon_flash, "HAS_GLUON_HOPPER", False)
    assert "no triton.experimental.gluon" in attention._gluon_supports(_shape(), torch.bfloat16)


def test_prepare_refuses_strided_tensors_by_name(monkeypatch):
    monkeypatch.setattr(attention, "_gluon_feature_reason", lambda: None)
    q = torch.zeros(1, 64, 2, 128, dtype=torch.float16).transpose(1, 2)  # [B, S, H, D] storage
    inputs = {"q": q, "k": q.contiguous(), "v": q.contiguous(), "causal": False}
    with pytest.raises(ValueError, match="Q has strides"):
        attention._prepare_gluon(inputs, q.contiguous(), None)


def test_the_prune_rule_drops_tiles_past_shared_memory_and_mostly_padding():
    limits = {"max_shared_mem_per_block": SM90_SHARED}
    three_slots = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "STAGES": 3}
    assert attention._gluon_prune(three_slots, _shape(), torch.bfloat16, limits) is None
    assert "exceeds" in attention._gluon_prune({**three_slots, "STAGES": 4}, _shape(), torch.bfloat16, limits)
    assert "padding" in attention._gluon_prune(three_slots, _shape(S=40), torch.bfloat16, limits)
    # the default is in the space, and under one wave of 128-row programs it is a 64-row tile
    gpu = {"interpreter": False, "capability": (9, 0), "num_sms": 132, "max_shared_mem_per_block": SM90_SHARED}
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(attention.runtime, "device_limits", lambda: gpu)
    try:
        assert attention._gluon_default(_shape(), torch.bfloat16) in ag.CONFIGS
        assert attention._gluon_default(_shape(S=128, H=16), torch.bfloat16)["BLOCK_M"] == 64
    finally:
        monkeypatch.undo()
