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
    # tests/test_kernels.py counts a crash as a rejection; here each control must run and be wrong.
    for control in SPEC.negative_controls:
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
