"""Fused bias + activation ``y = act(x + bias)`` over an [M, N] matrix (seed 002, section 4.3).

The activation (relu, gelu with the tanh approximation, silu) and whether there is a bias are
``tl.constexpr`` switches: each combination compiles to its own branch-free kernel. A shape names
its activation by carrying exactly one of the parameters ``relu``, ``gelu``, ``silu`` (set to 1), and
says ``bias=0/1``, so case ids read like ``M8192_N11008_silu1_bias0``.

Variants:

* ``triton_tiled`` — a 1-D grid over [BLOCK_M, BLOCK_N] tiles in row-major order; each tile loads its
  bias slice once, computes in fp32 and stores in the input dtype. One read and one write per element,
  where the eager sequence it replaces (``x + bias``, then the activation) reads and writes twice.

gelu-tanh is computed as ``z * sigmoid(2u)`` with ``u = sqrt(2/pi) * (z + 0.044715 z^3)``: that is
exactly ``0.5 z (1 + tanh(u))``, needs no tanh (``tl`` has none, and ``libdevice.tanh`` fails under
Triton 3.7.1's interpreter), and never forms ``1 + tanh(u)``, which cancels for negative z. With ``exp`` overflowing to
+inf for large |z| the quotient goes to -0 or z, never NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernelscope.baselines import compiled
from kernelscope.spec import (
    Implementation,
    Inputs,
    KernelSpec,
    Shape,
    Target,
    Tolerance,
    element_size,
    generator,
    randn,
    shape_entry,
)

#: activation name -> the constexpr code the kernel branches on
ACTIVATIONS = {"relu": 0, "gelu": 1, "silu": 2}
RELU: tl.constexpr = tl.constexpr(ACTIVATIONS["relu"])
GELU: tl.constexpr = tl.constexpr(ACTIVATIONS["gelu"])
SILU: tl.constexpr = tl.constexpr(ACTIVATIONS["silu"])
SQRT_2_OVER_PI: tl.constexpr = tl.constexpr(math.sqrt(2.0 / math.pi))

BLOCK_NS = (256, 1024)
BLOCK_MS = (4, 16)
NUM_WARPS = (4, 8)


@triton.jit
def _activation(z, ACTIVATION: tl.constexpr):
    """``z``: fp32 tile. Each branch is resolved at compile time."""
    if ACTIVATION == RELU:
        y = tl.where(z > 0.0, z, 0.0)
    elif ACTIVATION == GELU:
        u = SQRT_2_OVER_PI * (z + 0.044715 * z * z * z)
        y = z / (1.0 + tl.exp(-2.0 * u))  # = 0.5 z (1 + tanh(u))
    else:
        y = z / (1.0 + tl.exp(-z))  # z * sigmoid(z)
    return y


@triton.jit
def _bias_activation_kernel(
    out_ptr,
    x_ptr,
    bias_ptr,
    M,
    N,
    stride_xm,
    stride_om,
    ACTIVATION: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One program computes one [BLOCK_M, BLOCK_N] tile.

    ``x_ptr``: [M, N], row stride ``stride_xm``, unit column stride; ``out_ptr``: [M, N], row stride
    ``stride_om``; ``bias_ptr``: [N] (unused, any pointer, when ``HAS_BIAS`` is false).
    """
    # Row-major tile order: consecutive programs walk along a row, i.e. through contiguous memory.
    pid = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_tiles_n
    pid_n = pid % n_tiles_n
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    # int64 row offsets: M * stride exceeds 2^31 elements for the largest activations.
    rows64 = rows.to(tl.int64)[:, None]
    z = tl.load(x_ptr + rows64 * stride_xm + cols[None, :], mask=mask).to(tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + cols, mask=cols < N).to(tl.float32)
        z = z + bias[None, :]
    y = _activation(z, ACTIVATION)
    tl.store(out_ptr + rows64 * stride_om + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def activation_of(shape: Shape) -> str:
    """The activation a shape names: the one of ``relu``/``gelu``/``silu`` among its parameters."""
    named = [name for name in ACTIVATIONS if shape.params.get(name)]
    if len(named) != 1:
        raise ValueError(f"shape {shape.id} must set exactly one of {list(ACTIVATIONS)} to 1, got {named}")
    return named[0]


def _activation_from_inputs(inputs: Inputs) -> str:
    return inputs["activation"]


def _check_matrix(x: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None) -> None:
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError(
            f"bias_activation expects a 2-D x with unit column stride, got shape {tuple(x.shape)} strides {x.stride()}"
        )
    if out.shape != x.shape or out.stride(1) != 1:
        raise ValueError(f"output must match x's shape {tuple(x.shape)} with unit column stride")
    if bias is not None and (bias.shape != (x.shape[1],) or bias.stride(0) != 1):
        raise ValueError(f"bias must be a contiguous [{x.shape[1]}] vector, got shape {tuple(bias.shape)}")


def _launcher(inputs: Inputs, out: torch.Tensor, config, *, act: str, bias: torch.Tensor | None, n_cols: int):
    """Closure over one launch; ``n_cols`` < N only in the negative control (its mask drops a column)."""
    x = inputs["x"]
    _check_matrix(x, out, bias)
    n_rows = x.shape[0]
    block_m, block_n = int(config["BLOCK_M"]), int(config["BLOCK_N"])
    num_warps = int(config["num_warps"])
    grid = (triton.cdiv(n_rows, block_m) * triton.cdiv(n_cols, block_n),)
    bias_arg = bias if bias is not None else x  # never read when HAS_BIAS is false

    def run() -> torch.Tensor:
        _bias_activation_kernel[grid](
            out,
            x,
            bias_arg,
            n_rows,
            n_cols,
            x.stride(0),
            out.stride(0),
            ACTIVATION=ACTIVATIONS[act],
            HAS_BIAS=bias is not None,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            num_warps=num_warps,
        )
        return out

    return run


def _prepare_tiled(inputs: Inputs, out: torch.Tensor, config):
    return _launcher(
        inputs, out, config, act=_activation_from_inputs(inputs), bias=inputs.get("bias"), n_cols=inputs["x"].shape[1]
    )


def _configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [{"BLOCK_M": m, "BLOCK_N": n, "num_warps": w} for n in BLOCK_NS for m in BLOCK_MS for w in NUM_WARPS]


def _default(shape: Shape, dtype: torch.dtype) -> dict:
    # A 4096-element tile (as tutorial-sized blocks go) made of whole 1024-wide row segments, or of
    # whole rows when they are narrower; 4 warps.
    block_n = min(1024, triton.next_power_of_2(shape["N"]))
    block_m = min(triton.next_power_of_2(shape["M"]), max(1, 4096 // block_n))
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": 4}


def _prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    # A tile taller or wider than the (padded) matrix only adds masked lanes; the smallest stays.
    if config["BLOCK_N"] > max(triton.next_power_of_2(shape["N"]), BLOCK_NS[0]):
        return f"BLOCK_N={config['BLOCK_N']} is wider than the padded row ({triton.next_power_of_2(shape['N'])})"
    if config["BLOCK_M"] > max(triton.next_power_of_2(shape["M"]), BLOCK_MS[0]):
        return f"BLOCK_M={config['BLOCK_M']} is taller than the padded matrix ({triton.next_power_of_2(shape['M'])})"
    return None


def _torch_activation(act: str):
    if act == "relu":
        return F.relu
    if act == "gelu":
        return lambda z: F.gelu(z, approximate="tanh")
    return F.silu


def _eager_fn(inputs: Inputs):
    """The unfused sequence a model runs: ``x + bias`` (one kernel), then the activation (another)."""
    activation = _torch_activation(_activation_from_inputs(inputs))
    if "bias" in inputs:
        return (lambda x, bias: activation(x + bias)), (inputs["x"], inputs["bias"])
    return (lambda x: activation(x)), (inputs["x"],)


def _torch_eager(inputs: Inputs, out, config):
    fn, args = _eager_fn(inputs)
    return lambda: fn(*args)


def _torch_compile(inputs: Inputs, out, config):
    fn, args = _eager_fn(inputs)
    return compiled(fn, *args)


def _drops_last_column(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: the column mask is ``cols < N - 1``, so the last column is never written."""
    return _launcher(
        inputs,
        out,
        {"BLOCK_M": 4, "BLOCK_N": 256, "num_warps": 4},
        act=_activation_from_inputs(inputs),
        bias=inputs.get("bias"),
        n_cols=inputs["x"].shape[1] - 1,
    )


def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    """x and (when ``bias=1``) a bias vector, in three regimes chosen by ``seed % 3``:

    0: x, bias ~ N(0, 1); 1: x ~ N(0, 30^2): saturated tails where exp(-2u) overflows fp32 (a tanh
    written as (e^2u - 1)/(e^2u + 1) turns into inf/inf = NaN); 2: x ~ N(0, 3^2): a third of the
    elements have z in [-6, -1], where gelu and silu amplify any rounding of z the most.
    A ``stride`` parameter > N makes the rows non-contiguous. The activation's name travels as the plain
    input ``activation``: ``prepare`` sees the inputs, not the shape.
    """
    g = generator(seed, device)
    scale = (1.0, 30.0, 3.0)[seed % 3]
    n_rows, n_cols = shape["M"], shape["N"]
    row_stride = shape.params.get("stride", n_cols)
    act = activation_of(shape)
    inputs = {"x": randn((n_rows, row_stride), dtype, g, scale=scale)[:, :n_cols]}
    if shape["bias"]:
        inputs["bias"] = randn((n_cols,), dtype, g)
    inputs["activation"] = act
    return inputs


def make_output(inputs: Inputs) -> torch.Tensor:
    return torch.empty_like(inputs["x"], memory_format=torch.contiguous_format)


def reference(inputs: Inputs) -> torch.Tensor:
    z = inputs["x"].to(torch.float64)
    if "bias" in inputs:
        z = z + inputs["bias"].to(torch.float64)
    return _torch_activation(_activation_from_inputs(inputs))(z)


# flops per element of each activation, counting exp as one: relu 1 (select); gelu-tanh 9
# (z^2, z^3, *0.044715, +z, *sqrt(2/pi), exp, +1, /, the 2u scale folded in); silu 3 (exp, +1, /)
ACTIVATION_FLOPS = {"relu": 1, "gelu": 9, "silu": 3}


def _flops(shape: Shape) -> float:
    # the activation, plus one add per element for the bias
    return float(shape["M"] * shape["N"] * (ACTIVATION_FLOPS[activation_of(shape)] + shape["bias"]))


def _bytes(shape: Shape, dtype: torch.dtype) -> float:
    # read MN elements (+ N bias elements); write MN elements
    return float((2 * shape["M"] * shape["N"] + shape["bias"] * shape["N"]) * element_size(dtype))


# The eager baseline rounds z = x + bias to the stored dtype (relative error u) before the activation,
# which multiplies that error by |z act'(z)| <= |act(z)| + 0.15 (the excess peaks for silu near
# z = -3.6, for gelu-tanh it is 0.13 near z = -1.9); the output rounding adds u |act(z)|. Hence
# rtol = 2u, atol = 2 * 0.15 u (2x margin). The fused kernels round only once.
KERNEL = KernelSpec(
    name="bias_activation",
    description="y = act(x + bias) over an M x N matrix, act in {relu, gelu-tanh, silu}, bias optional "
    "(seed 002 section 4.3).",
    make_inputs=make_inputs,
    make_output=make_output,
    reference=reference,
    implementations=[
        Implementation(
            "triton_tiled",
            "triton",
            _prepare_tiled,
            description="[BLOCK_M, BLOCK_N] tiles, activation and bias as constexpr branches, "
            "fp32 math, one read and one write per element",
            configs=_configs,
            default_config=_default,
            prune=_prune,
        ),
        Implementation(
            "torch",
            "eager",
            _torch_eager,
            description="x + bias, then F.relu / F.gelu(approximate='tanh') / F.silu: two kernels",
            writes_out=False,
        ),
        Implementation(
            "torch_compile",
            "compile",
            _torch_compile,
            description="torch.compile of the eager sequence: Inductor fuses it",
            writes_out=False,
        ),
    ],
    targets=[
        Target(
            "triton_tiled",
            "pct_copy_bw",
            90,
            shapes={"M": (8192, None)},
            reason="one read of x and one write of y at DRAM-bound sizes: a fused element-wise kernel should run "
            "near copy bandwidth",
        ),
        Target(
            "triton_tiled",
            "speedup",
            1.5,
            baseline="torch",
            shapes={"M": (8192, None)},
            reason="eager runs bias add and activation as separate passes over memory; fusing them is the point",
        ),
    ],
    negative_controls=[
        Implementation(
            "drops_last_column",
            "triton",
            _drops_last_column,
            description="column mask cols < N - 1: the last column stays unwritten (NaN poison)",
            configs=_configs,
            default_config=_default,
            rejected_for="non-finite outputs where the reference is finite",  # the NaN poison, unwritten
        ),
    ],
    tolerances={
        torch.float16: Tolerance(
            1.5e-4,
            1e-3,
            "u = 2^-11; rtol 2u: output rounding, plus the eager baseline's "
            "rounding of x + bias, amplified by |z act'(z)| <= |act(z)| + 0.15: "
            "atol 2 * 0.15u",
        ),
        torch.bfloat16: Tolerance(
            1.2e-3,
            8e-3,
            "u = 2^-8; rtol 2u: output rounding, plus the eager baseline's "
            "rounding of x + bias, amplified by |z act'(z)| <= |act(z)| + 0.15: "
            "atol 2 * 0.15u",
        ),
        torch.float32: Tolerance(
            1e-6,
            1e-5,
            "fp32 math; exp via ex2.approx (2^-22 relative plus the rounding "
            "of its argument); atol: torch's 0.5 z (1 + tanh u) cancels for "
            "negative z, losing ~|z| 2^-24 absolute",
        ),
    },
    flops=_flops,
    bytes_moved=_bytes,
    shape_sets={
        "cpu": [
            shape_entry(
                "tiny, non-power-of-two row (3 masked lanes of 8), gelu-tanh with bias", M=3, N=5, gelu=1, bias=1
            ),
            shape_entry(
                "strided rows (row stride 80 > N = 70), more rows than one tile, silu with bias",
                M=33,
                N=70,
                stride=80,
                silu=1,
                bias=1,
            ),
            shape_entry(
                "one more than a block (129 pads to 256), relu without bias (HAS_BIAS false)",
                M=16,
                N=129,
                relu=1,
                bias=0,
            ),
        ],
        "gpu": [
            shape_entry("launch-bound: 64 x 1024 relu with bias, a few dozen tiles", M=64, N=1024, relu=1, bias=1),
            shape_entry(
                "L2-resident: 1024 x 4096 (32 MB of traffic at fp32), silu with bias", M=1024, N=4096, silu=1, bias=1
            ),
            shape_entry(
                "HBM-bound: 64M elements (256 MB at fp16), relu, the cheapest activation: pure bandwidth",
                M=16384,
                N=4096,
                relu=1,
                bias=1,
            ),
            shape_entry(
                "LLaMA-7B MLP width 11008 (not a multiple of 1024), silu, no bias as in LLaMA",
                M=8192,
                N=11008,
                silu=1,
                bias=0,
            ),
            shape_entry(
                "GPT-style MLP 4 x 4096, gelu-tanh with bias: the fusion of seed 002 section 4.3",
                M=8192,
                N=16384,
                gelu=1,
                bias=1,
            ),
        ],
    },
)
