"""gluon_smem of softmax and layernorm (kernels/_rows_gluon.py) on a machine without a GPU.

Gluon kernels do not run on Triton's interpreter, so the kernels' numbers are checked only on the GPU (the
correctness gate, with the negative control ``gluon_smem_sum_skips_a_slot`` of each). Here: the offline sm_90a build
(the row arrives by TMA, slot by slot, and each slot is refilled once a row; 16-byte stores; no spills; the
shared memory a row takes), the TMA view of the rows, and why the variant sits out where it cannot run.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from kernels import _rows_gluon as sg
from kernels import layernorm, softmax
from kernelscope import runtime
from kernelscope.spec import Shape

pytestmark = pytest.mark.skipif(not sg.HAS_GLUON_HOPPER, reason="this Triton has no Gluon Hopper module")

_SM90_GLUON_SOFTMAX = (
    helpers.GLUON_SM90_PREAMBLE
    + r"""
from kernels import _rows_gluon as sg
out = []
for build in json.loads(sys.argv[1]):
    config, dtype, n = build["config"], getattr(torch, build["dtype"]), build["N"]
    x = torch.zeros(4, n, dtype=dtype)
    ptr = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}[dtype]
    team = {"stats_ptr": "*fp32", "arrived_ptr": "*i32"}
    sig = {"x_desc": mangle_type(sg.descriptor(x, config["CHUNK_ROWS"])), "y_ptr": ptr, **team, "M": "i32"}
    fn = sg._softmax_smem_kernel
    if build["kernel"] == "layernorm":
        fn = sg._layernorm_smem_kernel
        sig = {"x_desc": sig["x_desc"], "y_ptr": ptr, "w_ptr": ptr, "b_ptr": ptr, **team, "M": "i32", "eps": "fp32"}
    parts = config.get("PARTS", 1)
    chunks = n // sg.W // parts // config["CHUNK_ROWS"]
    const = dict(CHUNK_ROWS=config["CHUNK_ROWS"], CHUNKS=chunks, PARTS=parts, VEC=16 // x.element_size(),
                 SKIP_LAST_CHUNK_IN_SUM=build.get("skip", False), num_warps=config["num_warps"])
    if build["kernel"] == "layernorm":
        const["WB_AHEAD"] = config.get("WB_AHEAD", sg.WB_AHEAD_DEFAULT)
    sig |= dict.fromkeys(const, "constexpr")
    pointers = (1, 2, 3, 4, 5) if build["kernel"] == "layernorm" else (1, 2, 3)
    k = triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=const,
                                      attrs={(i,): [["tt.divisibility", 16]] for i in pointers}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": config["num_warps"]})
    ptx = k.asm["ptx"]
    regs, spill = ptxas_usage(ptx)
    lines = ptx.splitlines()
    waits = [i for i, line in enumerate(lines) if "mbarrier.try_wait" in line]
    atoms = [i for i, line in enumerate(lines) if "atom.global" in line]
    # global loads laid out between pass 1's last slot wait and the team's first atomic: issued before the exchange
    early = sum("ld.global" in line for line in lines[waits[-1]:atoms[0]]) if waits and atoms else None
    out.append({"chunks": chunks, "tma": ptx.count("cp.async.bulk.tensor"), "stv4": ptx.count("st.global.v4"),
                "ldv4": ptx.count("ld.global.v4") + ptx.count("ld.global.nc.v4"),
                "ex2": ptx.count("ex2.approx"), "add": ptx.count("add.f32") + ptx.count("add.rn.f32"),
                "fence": ptx.count("fence.proxy.async"), "shared": k.metadata.shared,
                "atom": ptx.count("atom.global"), "regs": regs, "shfl": ptx.count("shfl.sync"),
                "spill": spill, "early": early})
print(json.dumps({"builds": out}))
"""
)

#: the most shared memory a block may opt into on sm_90
SM90_SHARED = 232448


#: the builds each kernel's test makes: a row a program and split (16-bit 65536), the widest split (fp32 262144),
#: and one slot a part (fp32 8192)
_BUILDS = (("float16", 65536, 2), ("float32", 262144, 4), ("float32", 8192, 4))


@pytest.mark.parametrize("kernel", ["softmax", "layernorm"])
def test_each_part_arrives_by_tma_slot_by_slot_and_no_config_spills(kernel):
    """The offline sm_90a build of every config at every split of the rows in _BUILDS: one TMA copy per slot to
    start and one refill per slot a row (2 x CHUNKS in the PTX), each refill behind a proxy fence, 16-byte stores,
    no spills, the part within a block's shared memory, and the team's three global atomics (arrival, reader count,
    reset) exactly where a row is split. The negative control's build leaves the last slot out of the sum: less
    arithmetic (softmax: exponentials; layernorm: additions), the same copies."""
    builds = [
        {"config": c, "dtype": dtype, "N": n, "kernel": kernel}
        for dtype, n, size in _BUILDS
        for c in sg.configs_for(kernel)(_shape(N=n), getattr(torch, dtype))
        if not sg.config_reason(c, n, size)  # what the prune rule leaves
    ]
    assert {b["config"]["PARTS"] for b in builds} == {1, 2, 4, 8, 16, 32}
    assert {b["config"]["num_warps"] for b in builds} >= {1, 2, 4, 8, 16}
    skip = {"config": dict(sg.CONFIGS[kernel][1], PARTS=2), "dtype": "float16", "N": 65536, "kernel": kernel}
    results = helpers.offline_sm90(_SM90_GLUON_SOFTMAX, [*builds, skip, {**skip, "skip": True}])["builds"]
    for build, r in zip(builds, results[: len(builds)], strict=True):
        assert r["tma"] == 2 * r["chunks"] and r["fence"] >= r["chunks"], (build, r)
        assert r["stv4"] > 0 and r["spill"] == 0, (build, r)
        assert r["shared"] <= sg.MAX_ROW_BYTES + 1024 <= SM90_SHARED, (build, r)
        assert r["atom"] == (3 if build["config"]["PARTS"] > 1 else 0), (build, r)
    whole, skipped = results[-2:]
    work = "ex2" if kernel == "softmax" else "add"
    assert skipped["tma"] == whole["tma"] and skipped[work] < whole[work], (whole, skipped)


def test_layernorm_loads_the_first_slots_weight_and_bias_before_the_team_exchange():
    """``WB_AHEAD`` in the offline sm_90a build of the 16-bit default: by default (1) and with 2, the first slot's
    weight and bias loads (16-byte loads, a slot's elements a thread over VEC, for each of the two) are issued
    between pass 1's last slot wait and the team's arrival atomic, so their L2 latency overlaps the exchange; with 0
    none are, and 2 holds the next slot's in registers besides (more of them), the same registers for 0 and 1."""
    default = sg.default_for("layernorm")(_shape(), torch.float16)
    assert default["PARTS"] > 1 and sg.WB_AHEAD_DEFAULT == 1
    builds = [
        {"config": dict(default, **({} if ahead is None else {"WB_AHEAD": ahead})), "dtype": "float16", "N": 65536}
        for ahead in (None, 0, 2)
    ]
    first, before, next_slot = helpers.offline_sm90(
        _SM90_GLUON_SOFTMAX, [{**b, "kernel": "layernorm"} for b in builds]
    )["builds"]
    per_thread = default["CHUNK_ROWS"] * sg.W // (32 * default["num_warps"])
    assert first["early"] == next_slot["early"] == 2 * per_thread // 8, (first, next_slot)
    assert before["early"] == 0, before
    assert first["regs"] == before["regs"] < next_slot["regs"], (first, before, next_slot)
    assert first["ldv4"] == before["ldv4"] and first["spill"] == 0


def test_the_layernorm_sweep_times_the_default_with_weight_and_bias_after_the_exchange_right_after_it():
    """The sweep records WB_AHEAD=0 beside the default's 1 on the pipeline's basis, second in its list (so a
    ``max_configs`` cap keeps it); softmax has no weight and bias, and no such twin."""
    from kernelscope import sweep

    shape = _shape()
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        impl = layernorm.KERNEL.implementation("gluon_smem")
        default = impl.default_config(shape, dtype)
        assert "WB_AHEAD" not in default and sg.WB_AHEAD_DEFAULT == 1
        assert sweep.candidate_configs(impl, shape, dtype, 2) == [default, dict(default, WB_AHEAD=0)]
    softmax_space = softmax.KERNEL.implementation("gluon_smem").configs(shape, torch.float16)
    assert not any("WB_AHEAD" in c for c in softmax_space)


def test_the_tma_view_is_of_box_rows_of_256_elements():
    x = torch.zeros(3, 8192, dtype=torch.bfloat16)
    desc = sg.descriptor(x, 16)
    assert list(desc.shape) == [3 * 32, 256] and list(desc.block_shape) == [16, 256]
    assert desc.layout.swizzle_byte_width == 0


def test_shapes_parts_and_configs():
    assert sg.shape_reason(65536, 2) is None and sg.shape_reason(262144, 4) is None
    assert "multiple of 256" in sg.shape_reason(2049, 2)
    assert "does not split" in sg.shape_reason(1 << 22, 4)  # 16 MB rows: parts of 1 MB at most
    assert "does not split" in sg.shape_reason(256 * 769, 4)  # 769 box rows: no split, and 787 KB for one program
    # the splits a row may take: parts that fit, none under 32 KB unless nothing larger fits
    assert sg.parts_options(65536, 2) == [1, 2, 4] and sg.parts_options(65536, 4) == [2, 4, 8]
    assert sg.parts_options(262144, 4) == [8, 16, 32] and sg.parts_options(8192, 2) == [1]
    # smaller programs may take smaller parts: 8 KB for one or two warps, 16 KB for four
    assert sg.parts_options(65536, 2, num_warps=1) == [1, 2, 4, 8, 16]
    assert sg.parts_options(65536, 2, num_warps=4) == [1, 2, 4, 8]
    assert "on 8 warps" in sg.config_reason({"CHUNK_ROWS": 8, "num_warps": 8, "PARTS": 16}, 65536, 2)
    assert sg.config_reason({"CHUNK_ROWS": 8, "num_warps": 1, "PARTS": 16}, 65536, 2) is None
    assert sg.config_reason({"CHUNK_ROWS": 32, "num_warps": 16, "PARTS": 2}, 65536, 2) is None
    assert "PARTS=1 is not one of" in sg.config_reason({"CHUNK_ROWS": 32, "num_warps": 16}, 65536, 4)
    assert "do not split" in sg.config_reason({"CHUNK_ROWS": 32, "num_warps": 16}, 8192 - 256 * 16, 2)
    assert "idle warps" in sg.config_reason({"CHUNK_ROWS": 8, "num_warps": 16}, 65536, 2)
    # every config swept passes the prune rule
    shape = _shape(N=262144)
    configs = sg.configs_for("softmax")(shape, torch.float32)
    assert {c["PARTS"] for c in configs} == {8, 16, 32}
    assert not any(sg.prune(c, shape, torch.float32, {}) for c in configs)
    # the small programs come at their own part size only: 8 KB parts of a 128 KB row on one warp, none of a 1 MB
    # row (that would be 128 parts)
    small = [c for c in sg.configs_for("softmax")(_shape(), torch.float16) if c["num_warps"] < 8]
    assert {(c["num_warps"], c["PARTS"]) for c in small} == {(4, 4), (4, 8), (2, 8), (1, 16)}
    assert not any(c["num_warps"] == 1 for c in configs)
    # the defaults (DEFAULT, DEFAULT_SLOTS): at least 4 programs a row of at most 64 KB (8 KB a warp) each; the
    # slots measured fastest; every default passes the prune rule
    wide = _shape()
    assert sg.default_for("softmax")(wide, torch.float16) == {"CHUNK_ROWS": 32, "num_warps": 8, "PARTS": 4}
    assert sg.default_for("softmax")(wide, torch.float32) == {"CHUNK_ROWS": 16, "num_warps": 16, "PARTS": 4}
    assert sg.default_for("softmax")(shape, torch.bfloat16)["PARTS"] == 8
    assert sg.default_for("softmax")(shape, torch.float32)["PARTS"] == 16
    assert sg.default_for("layernorm")(wide, torch.float16) == {"CHUNK_ROWS": 16, "num_warps": 4, "PARTS": 4}
    assert sg.default_for("layernorm")(shape, torch.bfloat16) == {"CHUNK_ROWS": 16, "num_warps": 4, "PARTS": 16}
    assert sg.default_for("layernorm")(wide, torch.float32) == {"CHUNK_ROWS": 16, "num_warps": 8, "PARTS": 4}
    assert sg.default_for("softmax")(_shape(N=8192), torch.float16)["PARTS"] == 1
    for kernel in ("softmax", "layernorm"):
        for case, dtype in [
            (wide, torch.float16),
            (wide, torch.float32),
            (shape, torch.bfloat16),
            (_shape(N=8192), torch.float32),
        ]:
            default = sg.default_for(kernel)(case, dtype)
            assert default in sg.configs_for(kernel)(case, dtype), (kernel, case, dtype)
            assert not sg.prune(default, case, dtype, {}), (kernel, case, dtype)
    for kernel in ("softmax", "layernorm"):
        control = sg.default_for(kernel, control=True)(wide, torch.float16)
        assert control["CHUNK_ROWS"] == 16 and not sg.prune(control, wide, torch.float16, {})


def _shape(**params):
    return Shape({"M": 1024, "N": 65536, **params}, "test")


def test_gluon_smem_sits_out_where_it_cannot_run_and_says_why(monkeypatch):
    # softmax's and layernorm's variant and controls share this supports
    assert softmax.KERNEL.implementation("gluon_smem").supports is sg.supports
    assert layernorm.KERNEL.implementation("gluon_smem_sum_skips_a_slot").supports is sg.supports
    assert "interpreter" in sg.supports(_shape(), torch.float16)
    assert "strided rows" in sg.supports(_shape(stride=70000), torch.float16)
    assert "< 8192" in sg.supports(_shape(N=4096), torch.float16)
    assert "does not split" in sg.supports(_shape(N=1 << 22), torch.float32)
    gpu = {"interpreter": False, "capability": (9, 0), "num_sms": 132}
    monkeypatch.setattr(runtime, "device_limits", lambda: gpu)
    assert sg.supports(_shape(), torch.bfloat16) is None
    gpu["capability"] = (8, 0)
    assert "sm_90" in sg.supports(_shape(), torch.bfloat16)
    monkeypatch.setattr(sg, "HAS_GLUON_HOPPER", False)
    assert "no triton.experimental.gluon" in sg.supports(_shape(), torch.bfloat16)


@pytest.mark.parametrize("kernel", [softmax, layernorm])
def test_prepare_refuses_strided_rows_and_bad_slots_by_name(monkeypatch, kernel):
    monkeypatch.setattr(sg, "feature_reason", lambda: None)
    x = torch.zeros(4, 8192 + 256, dtype=torch.float16)[:, :8192]
    inputs = {"x": x, "weight": torch.ones(8192, dtype=torch.float16), "bias": torch.zeros(8192, dtype=torch.float16)}
    out = torch.empty(4, 8192, dtype=torch.float16)
    with pytest.raises(ValueError, match="contiguous rows"):
        kernel._prepare_gluon_smem(inputs, out, None)
    inputs["x"] = x.contiguous()
    with pytest.raises(ValueError, match="idle warps"):
        kernel._prepare_gluon_smem(inputs, out, {"CHUNK_ROWS": 8, "num_warps": 16})
    with pytest.raises(ValueError, match="PARTS=3 is not one of"):
        kernel._prepare_gluon_smem(inputs, out, {"CHUNK_ROWS": 16, "num_warps": 16, "PARTS": 3})
