"""Edge cases of the flash-attention kernel beyond the generic gate (tests/test_kernels.py).

Closeness goes through ``kernelscope.correctness`` (fp64 reference, NaN-poisoned output, repeat with
another poison, inputs unchanged, convex-hull invariant), so a pass means what it means in the
pipeline. Shapes are tiny: the kernel runs in Triton's interpreter, whose default tiles are 16 x 16.
"""

import math

import pytest
import torch

import helpers
from helpers import H200_LIMITS as H200
from helpers import assert_pass
from kernels import attention
from kernelscope import correctness, runtime
from kernelscope.spec import Implementation, Shape

SPEC = attention.KERNEL
SEEDS = (0, 1, 2)  # one seed per input regime of make_inputs (diffuse; sharp; max rising along keys)
CPU = torch.device("cpu")
IMPLEMENTATIONS = ("triton_flash", "sdpa", "torch", "torch_compile")


def shape(**params: int) -> Shape:
    return Shape({"B": 1, "H": 2, "D": 64, "causal": 0, **params}, "test")


def gate(
    name: str,
    shp: Shape,
    dtype: torch.dtype,
    config: dict | None = None,
    seeds=SEEDS,
    impl: Implementation | None = None,
) -> dict:
    return helpers.gate(SPEC, impl or name, shp, dtype, config, seeds)


def flash(inputs: dict, out: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    out = attention.make_output(inputs).fill_(math.nan) if out is None else out.fill_(math.nan)
    return attention._prepare_flash(inputs, out, config or attention.INTERPRETER_CONFIGS[0])()


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [0, 1])
def test_single_position_returns_v_exactly(causal, head_dim):
    # S=1: one key, weight exactly 1; a 16-row block with 15 padded rows and a 1-key masked tail block.
    shp = shape(S=1, D=head_dim, causal=causal)
    inputs = attention.make_inputs(shp, torch.bfloat16, CPU, seed=1)
    assert torch.equal(flash(inputs), inputs["v"])
    for name in IMPLEMENTATIONS:
        assert_pass(gate(name, shp, torch.bfloat16, seeds=(0,)))


@pytest.mark.parametrize(
    "config",
    attention.INTERPRETER_CONFIGS + [{"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}],
    ids=lambda c: f"M{c['BLOCK_M']}xN{c['BLOCK_N']}",
)
@pytest.mark.parametrize("causal", [0, 1])
def test_block_shapes_with_ragged_tails(causal, config):
    # S=37 leaves a partial query block and a partial key block at every tile size; BLOCK_N > BLOCK_M
    # puts the causal diagonal inside a key block that starts before the query block, BLOCK_M > BLOCK_N
    # gives rows a fully masked key block after visible ones (no NaN may come of either).
    assert_pass(gate("triton_flash", shape(S=37, causal=causal), torch.float16, config))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shp", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_flash_error_is_within_its_rounding_model(shp, dtype):
    # The shared tolerance must admit the naive baseline, whose scores are rounded to fp16/bf16 before
    # the softmax. The flash kernel keeps scores in fp32: only P (before the PV dot) and O are rounded,
    # each by at most eps/2 relative, so it is held to atol = rtol = eps, 8x tighter in atol.
    eps = torch.finfo(dtype).eps
    impl = SPEC.implementation("triton_flash")
    for seed in SEEDS:
        inputs = attention.make_inputs(shp, dtype, CPU, seed)
        expected = correctness.reference_for(SPEC, inputs)
        result = correctness.compare(flash(inputs, config=impl.default_config(shp, dtype)), expected, eps, eps)
        assert result["ok"], f"seed {seed}: {result['failure']} (max abs err {result['max_abs_err']:.3g})"


def test_strided_layouts_give_bitwise_identical_results():
    # Strides change addresses, never arithmetic: Q/K/V stored [B, S, H, D] and O written into a
    # [B, S, H, D] view or into the first half of a wider [B, H, S, 2D] buffer must match the contiguous run.
    shp = shape(B=2, H=3, S=21, D=64, causal=1, bshd=1)
    strided = attention.make_inputs(shp, torch.float16, CPU, seed=2)
    assert not strided["q"].is_contiguous() and strided["q"].stride(1) == 64
    contiguous = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in strided.items()}
    expected = flash(contiguous)
    b, h, s, d = expected.shape
    outputs = {
        "bshd": torch.empty(b, s, h, d, dtype=torch.float16).transpose(1, 2),
        "wide": torch.empty(b, h, s, 2 * d, dtype=torch.float16)[..., :d],
    }
    for layout, out in outputs.items():
        for name, inputs in (("strided", strided), ("contiguous", contiguous)):
            assert torch.equal(flash(inputs, out), expected), f"{name} inputs into a {layout} output"
    assert torch.equal(flash(strided), expected)


@pytest.mark.parametrize("seed", [1, 2])
def test_weights_sum_to_one(seed):
    # With V = 1 everywhere, O = sum(P)/l = 1: the normaliser must match the accumulated weights, in
    # the sharp (seed 1) and rising-max (seed 2) regimes. P rounded to bf16 moves the sum by <= eps/2.
    inputs = attention.make_inputs(shape(S=37, causal=1), torch.bfloat16, CPU, seed)
    inputs["v"] = torch.ones_like(inputs["v"])
    out = flash(inputs).float()
    assert float((out - 1).abs().max()) <= torch.finfo(torch.bfloat16).eps


def test_ignoring_the_causal_mask_is_rejected():
    # A kernel run non-causally on a causal case: the gate must see the future keys' weight.
    def prepare(inputs, out, config):
        return attention._prepare_flash({**inputs, "causal": False}, out, config)

    impl = Implementation(
        "triton_ignores_causal",
        "triton",
        prepare,
        configs=lambda s, d: [],
        default_config=SPEC.implementation("triton_flash").default_config,
    )
    record = gate("", shape(S=37, causal=1), torch.float16, impl=impl)
    assert record["status"] == "fail", record


@pytest.mark.parametrize("shp", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_negative_controls_fail_numerically(shp):
    # tests/test_kernels.py counts a crash as a rejection; here each control must run and be wrong. gluon_flash's
    # controls need a Hopper GPU (they sit out beside gluon_flash here: tests/test_attention_gluon.py)
    for control in SPEC.negative_controls:
        if control.name.startswith("gluon_"):
            why = control.unsupported_reason(shp, torch.float16)
            assert why and why == SPEC.implementation("gluon_flash").unsupported_reason(shp, torch.float16)
            continue
        record = gate(control.name, shp, torch.float16, config={})
        assert record["status"] == "fail", f"{control.name}: {record['status']} {record.get('failure')}"


def test_missing_rescale_leaves_the_convex_hull():
    # The invariant catches the no-rescale bug on its own: early blocks keep their stale, too-large weight.
    inputs = attention.make_inputs(shape(S=37, causal=0), torch.float16, CPU, seed=2)
    out = attention._prepare_no_rescale(inputs, attention.make_output(inputs), {})()
    assert attention._hull_excess(out, inputs) > attention._hull_limit(torch.float16)


def test_naive_baselines_refuse_past_the_memory_budget():
    gpu = {s.id: s for s in SPEC.shape_sets["gpu"]}
    for name in ("torch", "torch_compile"):
        impl = SPEC.implementation(name)
        assert impl.unsupported_reason(gpu["B4_H16_S4096_D128_causal0"], torch.bfloat16) is None
        assert "GiB" in impl.unsupported_reason(gpu["B2_H16_S8192_D128_causal1"], torch.bfloat16)
    for name in ("triton_flash", "sdpa"):
        assert all(SPEC.implementation(name).unsupported_reason(s, torch.bfloat16) is None for s in gpu.values())


def test_gpu_config_space(monkeypatch):
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    impl = SPEC.implementation("triton_flash")
    for shp in SPEC.shape_sets["gpu"]:
        for dtype in SPEC.tolerances:
            configs = impl.configs(shp, dtype)
            default = impl.default_config(shp, dtype)
            assert len(configs) <= 16 and default in configs, shp.id
            assert impl.prune(default, shp, dtype, H200) is None, shp.id
            assert sum(impl.prune(c, shp, dtype, H200) is None for c in configs) >= 8, shp.id
    big = shape(B=4, H=16, S=4096, D=128)
    spilling = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    assert "registers" in impl.prune(spilling, big, torch.bfloat16, H200)
    deep = {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3}
    assert impl.prune(deep, big, torch.bfloat16, H200) is None
    assert "shared memory" in impl.prune(deep, big, torch.bfloat16, {**H200, "max_shared_mem_per_block": 99 * 1024})


# -- the descriptor variant (triton_flash_tma) -----------------------------------------------------------
# Triton's interpreter emulates device-side tensor descriptors (bounds, strides, zero fill, clipped stores)
# and takes tl.range's warp_specialize as a no-op, so these run the variant's own descriptor code.


def flash_tma(inputs: dict, out: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    out = attention.make_output(inputs).fill_(math.nan) if out is None else out.fill_(math.nan)
    return attention._prepare_flash_tma(inputs, out, config or attention.TMA_INTERPRETER_CONFIGS[0])()


def test_the_interpreter_runs_the_descriptor_path():
    # If a Triton without device descriptors (or an interpreter without them) were installed, the variant
    # would be unsupported and the tests below would check nothing of it: say so here, once.
    assert attention.HAS_DEVICE_DESCRIPTORS and attention._descriptor_feature_reason() is None
    assert attention._tma_supports(shape(S=37), torch.float16) is None
    assert any(c["WARP_SPECIALIZE"] for c in attention.TMA_INTERPRETER_CONFIGS) == attention.HAS_WARP_SPECIALIZE


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "params",
    [dict(S=37, causal=0), dict(S=37, causal=1), dict(B=2, H=2, S=17, D=128, causal=1, bshd=1)],
    ids=["S37", "S37-causal", "S17-bshd-causal"],
)
def test_descriptor_path_is_the_pointer_path_bitwise(params, dtype):
    # Same algorithm, same arithmetic: only the loads and the store move. Ragged S checks the descriptors'
    # zero fill (the score mask must still hide the zero keys) and clipped stores; [B, S, H, D] memory their
    # row strides and per-head bases; every interpreter config, the warp-specialised one included.
    for seed in (0, 2):
        inputs = attention.make_inputs(shape(**params), dtype, CPU, seed)
        for config in attention.TMA_INTERPRETER_CONFIGS:
            pointer_config = {**config, "WARP_SPECIALIZE": 0}
            assert torch.equal(flash_tma(inputs, config=config), flash(inputs, config=pointer_config)), (seed, config)


@pytest.mark.parametrize("config", attention.TMA_INTERPRETER_CONFIGS, ids=lambda c: f"M{c['BLOCK_M']}xN{c['BLOCK_N']}")
@pytest.mark.parametrize("causal", [0, 1])
def test_descriptor_path_passes_the_gate_with_ragged_tails(causal, config):
    assert_pass(gate("triton_flash_tma", shape(S=37, causal=causal), torch.bfloat16, config))


def test_descriptor_path_into_strided_outputs():
    # O's descriptor takes O's own row stride and per-head base: a [B, S, H, D] view and the first half of a
    # [B, H, S, 2D] buffer receive exactly the contiguous result, and the second half is never written.
    shp = shape(B=2, H=3, S=21, D=64, causal=1, bshd=1)
    strided = attention.make_inputs(shp, torch.float16, CPU, seed=2)
    expected = flash(strided)
    b, h, s, d = expected.shape
    bshd = torch.empty(b, s, h, d, dtype=torch.float16).transpose(1, 2)
    assert torch.equal(flash_tma(strided, bshd), expected)
    wide = torch.full((b, h, s, 2 * d), 7.0, dtype=torch.float16)
    assert torch.equal(flash_tma(strided, wide[..., :d]), expected)
    assert bool((wide[..., d:] == 7.0).all()), "the descriptor store wrote past D"


def test_descriptor_requirements_are_named():
    inputs = attention.make_inputs(shape(S=37), torch.float16, CPU, seed=0)
    config = attention.TMA_INTERPRETER_CONFIGS[0]
    # a row stride of 65 fp16 elements = 130 bytes, not a multiple of 16
    odd = torch.empty(1, 2, 37, 65, dtype=torch.float16)[..., :64]
    with pytest.raises(ValueError, match=r"O: strides .* not all multiples of 16 bytes"):
        attention._prepare_flash_tma(inputs, odd, config)
    # D not contiguous
    k_t = inputs["k"].transpose(-1, -2).contiguous().transpose(-1, -2)
    with pytest.raises(ValueError, match="K: stride 37 in D"):
        attention._prepare_flash_tma({**inputs, "k": k_t}, attention.make_output(inputs), config)
    # an unaligned base
    shifted = torch.empty(1 * 2 * 37 * 64 + 1, dtype=torch.float16)[1:].view(1, 2, 37, 64)
    with pytest.raises(ValueError, match="V: base address is not 16-byte aligned"):
        attention._prepare_flash_tma({**inputs, "v": shifted.copy_(inputs["v"])}, attention.make_output(inputs), config)
    # warp specialisation is the descriptor path's only
    with pytest.raises(ValueError, match="WARP_SPECIALIZE=1"):
        attention._prepare_flash(inputs, attention.make_output(inputs), {**config, "WARP_SPECIALIZE": 1})


def test_descriptor_variant_is_unsupported_without_the_feature(monkeypatch):
    shp = shape(S=4096, D=128)
    monkeypatch.setattr(runtime, "device_limits", lambda: {**H200, "capability": (8, 0)})
    assert "compute capability >= 9.0" in attention._tma_supports(shp, torch.bfloat16)
    assert SPEC.implementation("triton_flash").unsupported_reason(shp, torch.bfloat16) is None
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    assert attention._tma_supports(shp, torch.bfloat16) is None
    monkeypatch.setattr(attention, "HAS_DEVICE_DESCRIPTORS", False)
    assert "tl.make_tensor_descriptor" in attention._tma_supports(shp, torch.bfloat16)


def test_descriptor_allocator_reserves_then_grows():
    allocate = attention._descriptor_allocator(1024, CPU)
    first = allocate(512, 128, None)
    assert first.numel() == 1024 and allocate(1024, 128, None) is first  # the timed launch allocates nothing
    assert allocate(4096, 128, None).numel() == 4096


def test_descriptor_gpu_config_space(monkeypatch):
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    impl = SPEC.implementation("triton_flash_tma")
    gpu = {s.id: s for s in SPEC.shape_sets["gpu"]}
    for shp in gpu.values():
        for dtype in SPEC.tolerances:
            configs = impl.configs(shp, dtype)
            default = impl.default_config(shp, dtype)
            # every config costs GPU time in every case: a short list, the default in it and never pruned
            assert len(configs) <= 8 and default in configs, shp.id
            assert impl.prune(default, shp, dtype, H200) is None, shp.id
            assert not default["WARP_SPECIALIZE"], shp.id
            kept = [c for c in configs if impl.prune(c, shp, dtype, H200) is None]
            assert kept, shp.id
            if shp["causal"]:
                # the tutorial's Hopper choices: no warp-specialised causal loop, no query block narrower than
                # the key block on the diagonal
                assert all(not c["WARP_SPECIALIZE"] and c["BLOCK_M"] >= c["BLOCK_N"] for c in kept), shp.id
    target_case, bf16 = gpu["B4_H16_S4096_D128_causal0"], torch.bfloat16
    kept = [c for c in impl.configs(target_case, bf16) if not impl.prune(c, target_case, bf16, H200)]
    assert {(c["BLOCK_M"], c["BLOCK_N"], c["WARP_SPECIALIZE"]) for c in kept} >= {(128, 128, 0), (128, 128, 1)}
    assert impl.default_config(target_case, torch.bfloat16)["BLOCK_N"] == 128
    ws = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2, "WARP_SPECIALIZE": 1}
    assert "compute capability" in impl.prune(ws, target_case, torch.bfloat16, {**H200, "capability": (8, 0)})
    assert "BLOCK_N=128 > D=64" in impl.prune(ws, gpu["B4_H16_S4096_D64_causal0"], torch.bfloat16, H200)
    small = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "WARP_SPECIALIZE": 0}
    assert "8 warps" in impl.prune(small, target_case, torch.bfloat16, H200)
    monkeypatch.setattr(attention, "HAS_WARP_SPECIALIZE", False)
    assert "warp_specialize" in impl.prune(ws, target_case, torch.bfloat16, H200)
