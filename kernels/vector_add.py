"""Element-wise vector addition ``out = x + y`` (seed 002, section 2.1): the smallest Triton kernel.

Variants:

* ``triton_blocked`` — the tutorial kernel: a 1-D grid of ``cdiv(n, BLOCK_SIZE)`` programs, each
  adding ``BLOCK_SIZE`` consecutive elements; the last program masks its tail. There is no reduction
  and no reuse, so the kernel is purely memory-bound: ``BLOCK_SIZE`` and ``num_warps`` only change how
  many bytes each thread moves per load and how many programs the grid has.

Adding two floats of one dtype is exact before the final rounding, so every correct implementation
returns the correctly rounded sum, bit for bit; the ``ulps_from_correctly_rounded`` invariant checks that.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelscope import runtime
from kernelscope.baselines import compiled
from kernelscope.spec import (
    Implementation,
    Inputs,
    Invariant,
    KernelSpec,
    Shape,
    Target,
    Tolerance,
    element_size,
    generator,
    randn,
    shape_entry,
)

BLOCK_SIZES = (256, 1024, 4096, 8192)
NUM_WARPS = (4, 8)


@triton.jit
def _add_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    """One program adds one block. ``x_ptr``, ``y_ptr``, ``out_ptr``: [n_elements], contiguous."""
    pid = tl.program_id(0)
    # int64 before the multiply: pid * BLOCK_SIZE overflows int32 beyond 2^31 elements.
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    # Add in fp32: exact for two fp16/bf16 values, so the store rounds once (as a native add would);
    # it also sidesteps Triton's interpreter, whose native bf16 add returns garbage (triton 3.7.1).
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def _check_vectors(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    for name, t in (("x", x), ("y", y), ("out", out)):
        if t.ndim != 1 or not t.is_contiguous() or t.shape != x.shape:
            raise ValueError(
                f"vector_add expects contiguous 1-D tensors of one length; {name} has shape "
                f"{tuple(t.shape)} strides {t.stride()}, x has shape {tuple(x.shape)}"
            )


def _launcher(inputs: Inputs, out: torch.Tensor, config, n_launched: int):
    """Closure adding the first ``n_launched`` elements (all of them, except in the negative control)."""
    x, y = inputs["x"], inputs["y"]
    _check_vectors(x, y, out)
    block = int(config["BLOCK_SIZE"])
    num_warps = int(config["num_warps"])
    grid = (triton.cdiv(x.numel(), block),)

    def run() -> torch.Tensor:
        _add_kernel[grid](x, y, out, n_launched, BLOCK_SIZE=block, num_warps=num_warps)
        return out

    return run


def _prepare_blocked(inputs: Inputs, out: torch.Tensor, config):
    return _launcher(inputs, out, config, inputs["x"].numel())


def _configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [{"BLOCK_SIZE": b, "num_warps": w} for b in BLOCK_SIZES for w in NUM_WARPS]


# Triton's tutorial 01: 1024 elements per program, the default 4 warps.
DEFAULT_CONFIG = {"BLOCK_SIZE": 1024, "num_warps": 4}


def _default(shape: Shape, dtype: torch.dtype) -> dict:
    return dict(DEFAULT_CONFIG)


def _prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    # A block wider than the whole (padded) vector only adds masked lanes; the default block stays, so
    # the sweep always times the config a user gets without tuning.
    block = int(config["BLOCK_SIZE"])
    if block > max(triton.next_power_of_2(shape["n"]), DEFAULT_CONFIG["BLOCK_SIZE"]):
        return (
            f"BLOCK_SIZE={block} exceeds the padded vector ({triton.next_power_of_2(shape['n'])}): one masked program"
        )
    return None


def _add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y)  # what ``x + y`` calls


def _torch_eager(inputs: Inputs, out, config):
    x, y = inputs["x"], inputs["y"]
    return lambda: _add(x, y)


def _torch_compile(inputs: Inputs, out, config):
    return compiled(_add, inputs["x"], inputs["y"])


def _drops_last_element(inputs: Inputs, out: torch.Tensor, config):
    """Negative control: a launcher off by one (passes n - 1), i.e. the mask ``offsets < n - 1``."""
    return _launcher(inputs, out, {"BLOCK_SIZE": 1024, "num_warps": 4}, inputs["x"].numel() - 1)


def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    """Two vectors in three regimes, chosen by ``seed % 3``:

    0: both N(0, 1); 1: x = 100 + N(0, 1) and y = -100 + N(0, 1), so the sum cancels most of its
    inputs' leading bits (any intermediate rounding of x or y shows); 2: N(0, 1000^2), where fp16 sums
    reach the thousands (ulp 0.5-4) and the relative rounding is what matters.
    """
    g = generator(seed, device)
    n = shape["n"]
    regime = seed % 3
    if regime == 1:
        return {"x": randn((n,), dtype, g, shift=100.0), "y": randn((n,), dtype, g, shift=-100.0)}
    scale = 1000.0 if regime == 2 else 1.0
    return {"x": randn((n,), dtype, g, scale=scale), "y": randn((n,), dtype, g, scale=scale)}


def make_output(inputs: Inputs) -> torch.Tensor:
    return torch.empty_like(inputs["x"])


def reference(inputs: Inputs) -> torch.Tensor:
    return inputs["x"].to(torch.float64) + inputs["y"].to(torch.float64)


def _ulps_from_correctly_rounded(out: torch.Tensor, inputs: Inputs) -> float:
    """Largest distance, in ulps of the output dtype, from the exact sum rounded once to that dtype.

    The fp64 sum of two fp16/bf16/fp32 values is exact here (their exponents differ by far less than
    the 29 spare bits), so ``.to(out.dtype)`` of it is the correctly rounded result.
    """
    exact = (inputs["x"].to(torch.float64) + inputs["y"].to(torch.float64)).to(out.dtype)
    magnitude = exact.abs()
    ulp = (torch.nextafter(magnitude, torch.full_like(magnitude, torch.inf)) - magnitude).to(torch.float64)
    return float(((out.to(torch.float64) - exact.to(torch.float64)).abs() / ulp).max())


def _ulps_limit(dtype: torch.dtype, inputs: Inputs | None = None) -> float:
    # Exactly 0 on a GPU, where casts round to nearest even. Triton's interpreter (3.7.1) truncates
    # fp32 -> bf16 casts (its rounding_mode=None path), which can land one ulp away.
    return 1.0 if dtype == torch.bfloat16 and runtime.is_interpreter() else 0.0


def _flops(shape: Shape) -> float:
    # one add per element
    return float(shape["n"])


def _bytes(shape: Shape, dtype: torch.dtype) -> float:
    # read 2n elements; write n elements
    return 3.0 * shape["n"] * element_size(dtype)


KERNEL = KernelSpec(
    name="vector_add",
    description="Element-wise sum of two vectors of n elements (seed 002 section 2.1).",
    make_inputs=make_inputs,
    make_output=make_output,
    reference=reference,
    implementations=[
        Implementation(
            "triton_blocked",
            "triton",
            _prepare_blocked,
            description="1-D grid, BLOCK_SIZE consecutive elements per program, masked tail "
            "(seed 002 section 2.1, Triton tutorial 01)",
            configs=_configs,
            default_config=_default,
            prune=_prune,
        ),
        Implementation("torch", "eager", _torch_eager, description="torch.add (what x + y calls)", writes_out=False),
        Implementation(
            "torch_compile",
            "compile",
            _torch_compile,
            description="torch.compile(torch.add), Inductor-generated Triton",
            writes_out=False,
        ),
    ],
    targets=[
        Target(
            "triton_blocked",
            "pct_copy_bw",
            90,
            shapes={"n": (2**26, None)},
            reason="two reads and one write per element, nothing to compute: at sizes far beyond L2 it "
            "should run at copy bandwidth",
        ),
    ],
    negative_controls=[
        Implementation(
            "drops_last_element",
            "triton",
            _drops_last_element,
            description="launcher passes n - 1, so the mask offsets < n - 1 leaves the last "
            "element unwritten (NaN poison shows it)",
            configs=_configs,
            default_config=_default,
            rejected_for="non-finite outputs where the reference is finite",  # the NaN poison, unwritten
        ),
    ],
    tolerances={
        # The sum is exact before one rounding to the stored dtype: at most half an ulp, i.e. 2^-(p+1)
        # relative for p mantissa bits; rtol allows one full ulp. atol covers results in the subnormal
        # range, where an ulp is fixed (2^-24 for fp16) rather than relative.
        torch.float16: Tolerance(
            6e-8,
            1e-3,
            "one rounding of the exact sum to fp16 (<= 2^-11 relative); atol = one fp16 subnormal ulp (2^-24)",
        ),
        torch.bfloat16: Tolerance(
            1e-38, 8e-3, "one rounding of the exact sum to bf16 (<= 2^-8 relative); atol = bf16 subnormal scale"
        ),
        torch.float32: Tolerance(
            1e-38, 1.2e-7, "one rounding of the exact sum to fp32 (<= 2^-24 relative); atol = fp32 subnormal scale"
        ),
    },
    flops=_flops,
    bytes_moved=_bytes,
    invariants=[
        Invariant(
            "ulps_from_correctly_rounded",
            _ulps_from_correctly_rounded,
            _ulps_limit,
            "x + y is exact before one rounding to nearest: any other result means a second "
            "rounding or a lossy intermediate",
            # the tolerance allows about one ulp; the invariant none (bfloat16 too on a GPU, where its limit is 0)
            tighter_than_tolerance=(torch.float16, torch.float32),
        )
    ],
    shape_sets={
        "cpu": [
            shape_entry("a single element: the grid is one program with 1023 masked lanes", n=1),
            shape_entry("less than one default block, not a power of two", n=1000),
            shape_entry("one more than the default block: a second program with a one-element tail", n=1025),
        ],
        "gpu": [
            shape_entry("launch-bound: 4096 elements, a handful of programs on 132 SMs", n=4096),
            shape_entry("L2-resident: 2M elements, 24 MB of traffic at fp32 (H200 L2 is ~50 MB)", n=2**21),
            shape_entry(
                "HBM-bound, the issue's target: 64M elements, 384 MB (fp16) to 768 MB (fp32) of traffic", n=2**26
            ),
            shape_entry("odd size: 2^24 + 1, every BLOCK_SIZE leaves a one-element tail program", n=2**24 + 1),
        ],
    },
)
