"""bias_activation beyond the generic gate: every config and every activation x bias combination,
saturated inputs, single rounding of the fused kernel, and semantic bugs the tolerances must catch."""

import math

import pytest
import torch
import torch.nn.functional as F

from kernels import bias_activation
from kernelscope import correctness
from kernelscope.spec import Implementation, Shape

SPEC = bias_activation.KERNEL
TRITON = SPEC.implementation("triton_tiled")
CPU = torch.device("cpu")
SEEDS = (0, 1, 2)


def _shape(act: str, bias: int, M: int = 5, N: int = 37, **extra: int) -> Shape:
    return Shape({"M": M, "N": N, **extra, act: 1, "bias": bias}, "test")


def _eager(fn):
    """A broken implementation as an eager baseline: ``fn(x, bias_or_None, activation_name)``."""

    def prepare(inputs, out, config):
        act = bias_activation._activation_from_inputs(inputs)
        return lambda: fn(inputs["x"], inputs.get("bias"), act)

    return Implementation(fn.__name__, "eager", prepare, writes_out=False)


@pytest.mark.parametrize(
    "config",
    TRITON.configs(_shape("gelu", 1), torch.float32),
    ids=lambda c: f"M{c['BLOCK_M']}_N{c['BLOCK_N']}_w{c['num_warps']}",
)
def test_every_config_passes_with_partial_tiles_in_both_dims(config):
    # 33 rows and 300 columns (stride 301) leave partial tiles along both axes for every config.
    shape = _shape("gelu", 1, M=33, N=300, stride=301)
    record = correctness.check_implementation(SPEC, TRITON, shape, torch.float16, seeds=(2,), config=config)
    assert record["status"] == "pass", record["failure"]


@pytest.mark.parametrize("bias", (0, 1))
@pytest.mark.parametrize("act", list(bias_activation.ACTIVATIONS))
def test_every_activation_and_bias_combination(act, bias):
    record = correctness.check_implementation(
        SPEC, TRITON, _shape(act, bias), torch.float32, SEEDS, TRITON.default_config(_shape(act, bias), torch.float32)
    )
    assert record["status"] == "pass", record["failure"]


@pytest.mark.parametrize("dtype", (torch.float16, torch.float32))
@pytest.mark.parametrize("act", ("gelu", "silu"))
def test_saturated_inputs_give_no_nan(act, dtype):
    # |z| far beyond exp's range: exp(-2u) is +inf or 0, and the quotient must be -0 or z.
    big = 6e4 if dtype == torch.float16 else 1e30
    x = torch.tensor([[-big, -1e3, -100.0, -30.0, 30.0, 100.0, 1e3, big]], dtype=dtype)
    inputs = {"x": x, "activation": act}
    out = torch.full_like(x, math.nan)
    TRITON.prepare(inputs, out, {"BLOCK_M": 1, "BLOCK_N": 8, "num_warps": 1})()
    assert not torch.isnan(out).any()
    tol = SPEC.tolerance(dtype)
    record = correctness.compare(out, correctness.reference_for(SPEC, inputs), tol.atol, tol.rtol)
    assert record["ok"], record["failure"]


def test_fused_kernel_rounds_once_where_the_eager_sequence_rounds_twice():
    # Regime 2 (seed 2) puts most z in [-6, -1], where silu amplifies rounding most. The fused kernel
    # stays within half an fp16 ulp (plus fp32 noise); the eager sequence, which stores x + bias in
    # fp16 first, does not: that second rounding is what the fp16 atol is for.
    shape = _shape("silu", 1, M=16, N=256)
    inputs = SPEC.make_inputs(shape, torch.float16, CPU, seed=2)
    expected = correctness.reference_for(SPEC, inputs)
    half_ulp = 2.0**-11 * expected.abs() * 1.05 + 2.0**-25

    fused = correctness.run_poisoned(TRITON, SPEC, inputs, TRITON.default_config(shape, torch.float16), math.nan)
    assert ((fused.double() - expected).abs() <= half_ulp).all()
    eager = SPEC.implementation("torch").prepare(inputs, None, {})()
    assert ((eager.double() - expected).abs() > half_ulp).any()


def _bias_ignored(x, bias, act):
    return bias_activation._torch_activation(act)(x.float()).to(x.dtype)


def _bias_after_activation(x, bias, act):
    return (bias_activation._torch_activation(act)(x.float()) + bias.float()).to(x.dtype)


def _gelu_erf(x, bias, act):
    return F.gelu(x.float() + bias.float()).to(x.dtype)  # the exact gelu, not the tanh approximation


def _gelu_naive_tanh(x, bias, act):
    # tanh(u) = (e^2u - 1) / (e^2u + 1): inf / inf = NaN once e^2u overflows
    z = x.float() + bias.float()
    e = torch.exp(2 * math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))
    return (0.5 * z * (1 + (e - 1) / (e + 1))).to(x.dtype)


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("broken", (_bias_ignored, _bias_after_activation), ids=lambda f: f.__name__)
def test_bias_bugs_are_rejected(broken, dtype):
    record = correctness.check_implementation(SPEC, _eager(broken), _shape("silu", 1), dtype, SEEDS)
    assert record["status"] == "fail"


@pytest.mark.parametrize("dtype", (torch.float16, torch.float32))
def test_exact_gelu_in_place_of_gelu_tanh_is_rejected(dtype):
    # The two gelus differ by up to ~5e-4 (relative 1e-2 near z = -2.5): above fp16 and fp32 tolerances.
    record = correctness.check_implementation(SPEC, _eager(_gelu_erf), _shape("gelu", 1, M=16, N=64), dtype, SEEDS)
    assert record["status"] == "fail"


def test_overflowing_tanh_formula_is_rejected():
    record = correctness.check_implementation(SPEC, _eager(_gelu_naive_tanh), _shape("gelu", 1), torch.float32, SEEDS)
    assert record["status"] == "fail"
    assert "non-finite" in record["failure"]


def test_shapes_name_exactly_one_activation_and_cover_all_three():
    for shapes in SPEC.shape_sets.values():
        named = {bias_activation.activation_of(s) for s in shapes}
        assert all(s["bias"] in (0, 1) for s in shapes)
    assert named == set(bias_activation.ACTIVATIONS)  # the gpu set
    with pytest.raises(ValueError, match="exactly one"):
        bias_activation.activation_of(Shape({"M": 1, "N": 1, "relu": 1, "gelu": 1, "bias": 0}, "x"))


def test_traffic_model():
    shape = _shape("gelu", 1, M=8192, N=16384)
    # read MN + N, write MN, at 2 bytes
    assert SPEC.bytes_moved(shape, torch.float16) == 2 * (2 * 8192 * 16384 + 16384)
    assert SPEC.bytes_moved(_shape("relu", 0, M=8, N=4), torch.float32) == 4 * 2 * 32
    assert SPEC.flops(shape) == 8192 * 16384 * 10
