"""Would a whole-row softmax that keeps x in 16 bits (the exponent recomputed for the output) beat the spilling
triton_row and the two-pass triton_online on wide rows? An experiment on a GPU, outside the pipeline.

docs/experiments/wide_row_spills.py showed offline (ptxas) that the recompute variant spills far less at
N = 65536 on 16 warps (44 vs 320 bytes of spill stores a thread). This script times, on one GPU, softmax over
M x N rows in fp16 and bf16:

- ``triton_row`` at 16 and 32 warps (kernels/softmax.py, one row a program, fp32 copy of the row);
- ``recompute`` at 16 and 32 warps (the kernel below);
- ``triton_online`` at the config the pipeline's sweep chose for 1024 x 65536 (reports/nvidia-h200-limits);
- torch.softmax.

Basis: CUDA events around each call, ``triton.testing.do_bench`` (it clears a 256 MB buffer between calls, so
L2 is cold), its median over ~100 calls after its warm-up. Each output is checked against an fp64 reference
first (max abs error printed; a NaN fails). Percent of copy is against 2 * M * N * itemsize bytes at the
calibration's copy bandwidth given by --copy-gbps (the pipeline's H200 runs measured 4251-4276 GB/s).

    python docs/experiments/wide_row_recompute.py [--M 1024] [--N 65536] [--copy-gbps 4251]

Session 13's output (one H200, torch 2.11.0+cu130, triton 3.6.0): docs/experiments/results/
wide_row_recompute-session13.txt; read in docs/kernel-notes.md, "Session 13".
"""

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels import softmax as sm  # noqa: E402

#: twice the output's half-ulp at 1.0 (the largest a probability gets): the store's rounding, with room for fp32 error
ATOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}


@triton.jit
def recompute_row(out_ptr, in_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))  # kept in the input dtype
    m = tl.max(x, axis=0).to(tl.float32)
    s = tl.sum(tl.exp(x.to(tl.float32) - m), axis=0)
    shift = m + tl.log(s)
    y = tl.exp(x.to(tl.float32) - shift)
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def recompute_call(x: torch.Tensor, y: torch.Tensor, block: int, num_warps: int):
    def run() -> torch.Tensor:
        recompute_row[(x.shape[0],)](y, x, x.shape[1], x.stride(0), BLOCK=block, num_warps=num_warps)
        return y

    return run


def implementations(x: torch.Tensor) -> dict:
    """Name -> a call that computes softmax(x) into its own output."""
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    out = {}
    for w in (16, 32):
        out[f"triton_row w{w}"] = sm._prepare_row({"x": x}, torch.empty_like(x), {"num_warps": w})
        out[f"recompute w{w}"] = recompute_call(x, torch.empty_like(x), block, w)
    online = {"BLOCK_N": 16384, "l2_hints": 1, "num_warps": 8, "programs_per_sm": 2}
    out["triton_online (sweep's)"] = sm._prepare_online({"x": x}, torch.empty_like(x), online)
    out["torch"] = lambda: torch.softmax(x, dim=-1)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--M", type=int, default=1024)
    p.add_argument("--N", type=int, default=65536)
    p.add_argument("--copy-gbps", type=float, default=4251.0)
    a = p.parse_args()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    for dtype in (torch.float16, torch.bfloat16):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(a.M, a.N, device="cuda", dtype=torch.float32, generator=gen).mul_(4).to(dtype)
        ref = torch.softmax(x.double(), dim=-1)
        moved = 2 * x.numel() * x.element_size()
        for name, fn in implementations(x).items():
            out = fn()
            torch.cuda.synchronize()
            err = (out.double() - ref).abs().max().item()
            verdict = "ok" if err == err and err < ATOL[dtype] else "FAIL"
            us = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
            pct = moved / (us * 1e-6) / 1e9 / a.copy_gbps * 100
            print(f"{str(dtype):15s} {name:24s} {us:9.2f} us {pct:6.1f} % of copy  max abs err {err:.2e} {verdict}")


if __name__ == "__main__":
    main()
