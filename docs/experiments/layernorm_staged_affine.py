"""Exploratory, outside the pipeline: would layernorm on odd N gain from weight and bias *out* of the registers?

``triton_persistent`` holds each alignment class's weight and bias in registers (two thirds of its data
registers), which caps the programs an SM at 3-6 (docs/kernel-notes.md, session 15). Here a first kernel writes
every class's weight and bias shifted to that class's body columns into a small workspace (period x BLOCK_N
values each), and a one-row-a-program kernel then reads them 16 bytes at a time each row, so its registers hold
x only. Both kernels are inside the timed call. Timed with ``triton.testing.do_bench`` (CUDA events, L2 cleared
between calls, median of its repetitions) beside the pipeline's ``triton_persistent`` and ``triton_row`` at their
session-15 best configs, after a correctness check against fp64. Not a pipeline measurement: a pointer for the
next design, since built into the pipeline as layernorm's ``triton_staged`` (session 16); the kernels here are
kept as they were, the code that wrote results/layernorm_staged_affine.txt.

    python docs/experiments/layernorm_staged_affine.py > docs/experiments/results/layernorm_staged_affine.txt
"""

import os
import pathlib
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels import layernorm as ln  # noqa: E402
from kernelscope.heuristics import row_split  # noqa: E402


@triton.jit
def _shift_kernel(ws_w, ws_b, x_ptr, w_ptr, b_ptr, N, stride_xm, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    cls = tl.program_id(0)
    head, body = row_split(x_ptr + cls * tl.cast(stride_xm, tl.int64), N, VEC)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < body
    tl.store(ws_w + cls * BLOCK_N + cols, tl.load(w_ptr + head + cols, mask=mask, other=0.0))
    tl.store(ws_b + cls * BLOCK_N + cols, tl.load(b_ptr + head + cols, mask=mask, other=0.0))


@triton.jit
def _staged_row_kernel(
    out_ptr, x_ptr, w_ptr, b_ptr, ws_w, ws_b, N, period, stride_xm, stride_om, eps,
    BLOCK_N: tl.constexpr, VEC: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cls = row % period
    x_row, out_row = x_ptr + row * stride_xm, out_ptr + row * stride_om
    head, body = row_split(x_row, N, VEC)
    tail_start = head + body
    edge = tl.arange(0, VEC)
    cols = tl.arange(0, BLOCK_N)
    head_mask, body_mask, tail_mask = edge < head, cols < body, edge < N - tail_start
    xc_head, xc_body, xc_tail, rstd = ln._split_row_stats(
        x_row, N, eps, head, tail_start, edge, cols, head_mask, body_mask, tail_mask
    )
    dtype = out_ptr.dtype.element_ty
    ln._affine_store(out_row, xc_head, rstd, w_ptr, b_ptr, 0, edge, head_mask, dtype)
    ln._affine_store(out_row + tail_start, xc_tail, rstd, w_ptr, b_ptr, tail_start, edge, tail_mask, dtype)
    w = tl.load(tl.multiple_of(ws_w + cls * BLOCK_N, 16) + cols).to(tl.float32)
    b = tl.load(tl.multiple_of(ws_b + cls * BLOCK_N, 16) + cols).to(tl.float32)
    tl.store(tl.multiple_of(out_row + head, 16) + cols, (xc_body * rstd * w + b).to(dtype), mask=body_mask)


def staged(x, w, b, out, num_warps):
    n_rows, n = x.shape
    vec = 16 // x.element_size()
    block = ln.body_block(n, vec)
    period = ln.alignment_period(x.stride(0), x.element_size())
    ws_w = torch.empty(period * block, dtype=x.dtype, device=x.device)
    ws_b = torch.empty_like(ws_w)

    def run():
        _shift_kernel[(period,)](ws_w, ws_b, x, w, b, n, x.stride(0), BLOCK_N=block, VEC=vec, num_warps=4)
        _staged_row_kernel[(n_rows,)](
            out, x, w, b, ws_w, ws_b, n, period, x.stride(0), out.stride(0), ln.EPS,
            BLOCK_N=block, VEC=vec, num_warps=num_warps,
        )  # fmt: skip
        return out

    return run


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    spec = ln.KERNEL
    for m, n in ((8192, 4097), (16384, 2049)):
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            shape = ln.Shape({"M": m, "N": n}, "experiment")
            inputs = spec.make_inputs(shape, dtype, torch.device("cuda"), seed=0)
            ref = spec.reference({k: v.double() for k, v in inputs.items()})
            tol = spec.tolerances[dtype]
            x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
            gb = spec.bytes_moved(shape, dtype) / 1e9
            line = [f"{m} x {n} {str(dtype).removeprefix('torch.')}:"]
            runs = {f"staged {nw} warps": staged(x, w, b, torch.full_like(x, float("nan")), nw) for nw in (2, 4, 8)}
            runs["triton_persistent (4 warps)"] = ln._prepare_classes(
                inputs, torch.full_like(x, float("nan")), ln.CLASSES_SPACE[0]
            )
            runs["triton_persistent (2 warps)"] = ln._prepare_classes(
                inputs, torch.full_like(x, float("nan")), ln.CLASSES_SPACE[1]
            )
            runs["triton_row (aligned, 4 warps)"] = ln._prepare_row(
                inputs, torch.full_like(x, float("nan")), {"num_warps": 4, "aligned": 1}
            )
            for name, run in runs.items():
                got = run().double()
                ok = bool(torch.isfinite(got).all()) and torch.allclose(got, ref, rtol=tol.rtol, atol=tol.atol)
                us = triton.testing.do_bench(run, warmup=50, rep=300) * 1e3
                line.append(f"{name} {us:.1f} us ({gb / (us * 1e-6):.0f} GB/s){'' if ok else ' WRONG'}")
            print("\n  ".join(line))


if __name__ == "__main__":
    main()
