"""Where layernorm's ``triton_online`` spends its time on wide rows, and whether pass 1's per-chunk reductions
are what holds it back: timed on a GPU outside the pipeline.

Variants of the module's kernel (this file holds its own copy, with switches the module does not have):

* ``STATS=0`` — the module's pass 1: per chunk its mean, then its centred M2 (two dependent block reductions
  and their barriers), combined with Chan et al.'s formula.
* ``STATS=1`` — per chunk one block reduction of two values, the sums of ``x - K`` and ``(x - K)^2`` with
  ``K`` the first chunk's mean (shifted sums: the variance loses at most log2(1 + N / BLOCK_N) bits, since the
  first chunk's mean is within std * sqrt(N / BLOCK_N) of the row's).
* ``STATS=2`` — the same shifted sums kept per lane across the chunks and reduced once a row (no block reduction
  in the chunk loop, two more fp32 vectors in registers).
* ``PASSES``: 3 both passes; 1 pass 1 alone (mean and rstd written to a [M, 2] buffer); 2 pass 2 alone (mean 0,
  rstd 1: x read once from HBM, weight and bias, y written).

Timing: ``triton.testing.do_bench`` medians (CUDA events, its L2 flush before every call), beside a torch copy of
x into y for the copy bandwidth. Each variant's output is checked against fp64 first (both passes only).

* ``STATS=3`` — ``STATS=0`` with the next chunk's load issued before this chunk's reductions (two chunks of x
  in registers); ``PREFETCH2`` the same for pass 2's x, weight and bias.

Round 1 (c888b30) compared STATS 0-2 and the passes apart; round 2 the prefetches (results/, one file a round):

    python docs/experiments/layernorm_online_passes.py 2 > docs/experiments/results/layernorm_online_passes-2.txt
"""

import functools
import itertools
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def _add2(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _kernel(
    out_ptr,
    stats_ptr,
    x_ptr,
    w_ptr,
    b_ptr,
    n_rows,
    N,
    stride,
    eps,
    BLOCK_N: tl.constexpr,
    STATS: tl.constexpr,
    PASSES: tl.constexpr,
    PREFETCH2: tl.constexpr = False,
):
    stride = tl.cast(stride, tl.int64)
    cols = tl.arange(0, BLOCK_N)
    n_blocks = tl.cdiv(N, BLOCK_N)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * stride
        out_row = out_ptr + row * stride
        mean = tl.full([], 0.0, tl.float32)
        rstd = tl.full([], 1.0, tl.float32)
        if PASSES % 2 == 1:
            if STATS == 0:
                n = tl.full([], 0.0, tl.float32)
                dmean = tl.full([], 0.0, tl.float32)
                m2 = tl.full([], 0.0, tl.float32)
                shift = tl.full([], 0.0, tl.float32)
                for start in range(0, N, BLOCK_N):
                    offs = start + cols
                    mask = offs < N
                    x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
                    n_b = tl.minimum(N - start, BLOCK_N).to(tl.float32)
                    mean_b = tl.sum(x, axis=0) / n_b
                    xc = tl.where(mask, x - mean_b, 0.0)
                    m2_b = tl.sum(xc * xc, axis=0)
                    shift = tl.where(n == 0.0, mean_b, shift)
                    delta = (mean_b - shift) - dmean
                    n_new = n + n_b
                    dmean = dmean + delta * (n_b / n_new)
                    m2 = m2 + m2_b + delta * delta * (n * n_b / n_new)
                    n = n_new
                mean = shift + dmean
                var = m2 / N
            elif STATS == 3:
                n = tl.full([], 0.0, tl.float32)
                dmean = tl.full([], 0.0, tl.float32)
                m2 = tl.full([], 0.0, tl.float32)
                shift = tl.full([], 0.0, tl.float32)
                x_next = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")
                for start in range(0, N, BLOCK_N):
                    mask = start + cols < N
                    x = x_next.to(tl.float32)
                    nxt = start + BLOCK_N + cols
                    x_next = tl.load(x_row + nxt, mask=nxt < N, other=0.0, eviction_policy="evict_last")
                    n_b = tl.minimum(N - start, BLOCK_N).to(tl.float32)
                    mean_b = tl.sum(x, axis=0) / n_b
                    xc = tl.where(mask, x - mean_b, 0.0)
                    m2_b = tl.sum(xc * xc, axis=0)
                    shift = tl.where(n == 0.0, mean_b, shift)
                    delta = (mean_b - shift) - dmean
                    n_new = n + n_b
                    dmean = dmean + delta * (n_b / n_new)
                    m2 = m2 + m2_b + delta * delta * (n * n_b / n_new)
                    n = n_new
                mean = shift + dmean
                var = m2 / N
            else:
                mask0 = cols < N
                x0 = tl.load(x_row + cols, mask=mask0, other=0.0, eviction_policy="evict_last").to(tl.float32)
                k = tl.sum(x0, axis=0) / tl.minimum(N, BLOCK_N).to(tl.float32)
                d0 = tl.where(mask0, x0 - k, 0.0)
                if STATS == 1:
                    s1, s2 = tl.reduce((d0, d0 * d0), 0, _add2)
                    for start in range(BLOCK_N, N, BLOCK_N):
                        offs = start + cols
                        mask = offs < N
                        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
                        d = tl.where(mask, x - k, 0.0)
                        t1, t2 = tl.reduce((d, d * d), 0, _add2)
                        s1 += t1
                        s2 += t2
                else:
                    a1 = d0
                    a2 = d0 * d0
                    for start in range(BLOCK_N, N, BLOCK_N):
                        offs = start + cols
                        mask = offs < N
                        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
                        d = tl.where(mask, x - k, 0.0)
                        a1 += d
                        a2 += d * d
                    s1, s2 = tl.reduce((a1, a2), 0, _add2)
                dm = s1 / N
                mean = k + dm
                var = tl.maximum(s2 / N - dm * dm, 0.0)
            rstd = tl.rsqrt(var + eps)
            if PASSES == 1:
                tl.store(stats_ptr + 2 * row, mean)
                tl.store(stats_ptr + 2 * row + 1, rstd)
        if PASSES >= 2 and PREFETCH2:
            offs = (n_blocks - 1) * BLOCK_N + cols
            mask = offs < N
            x_n = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
            w_n = tl.load(w_ptr + offs, mask=mask)
            b_n = tl.load(b_ptr + offs, mask=mask)
            for i in range(0, n_blocks):
                offs = (n_blocks - 1 - i) * BLOCK_N + cols
                mask = offs < N
                x = x_n.to(tl.float32)
                w = w_n.to(tl.float32)
                b = b_n.to(tl.float32)
                nxt = offs - BLOCK_N
                mask_n = (nxt >= 0) & (nxt < N)
                x_n = tl.load(x_row + nxt, mask=mask_n, other=0.0, eviction_policy="evict_first")
                w_n = tl.load(w_ptr + nxt, mask=mask_n)
                b_n = tl.load(b_ptr + nxt, mask=mask_n)
                y = ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty)
                tl.store(out_row + offs, y, mask=mask, eviction_policy="evict_first")
        elif PASSES >= 2:
            for i in range(0, n_blocks):
                offs = (n_blocks - 1 - i) * BLOCK_N + cols
                mask = offs < N
                x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
                w = tl.load(w_ptr + offs, mask=mask).to(tl.float32)
                b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
                y = ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty)
                tl.store(out_row + offs, y, mask=mask, eviction_policy="evict_first")


def _round_1():
    # (BLOCK_N, warps, programs an SM (0: one a row), STATS, PASSES, PREFETCH2)
    configs = [(16384, 8, 2), (16384, 8, 0), (8192, 8, 0), (8192, 8, 4), (32768, 16, 1)]
    out = []
    for (block, warps, per_sm), stats_mode, passes in itertools.product(configs, (0, 1, 2), (3, 1, 2)):
        if stats_mode == 2 and block // (32 * warps) > 32:
            continue  # two more fp32 vectors a lane: past 32 values a thread they spill
        if passes == 2 and stats_mode:
            continue  # pass 2 alone is the same kernel whatever pass 1 would have been
        out.append((block, warps, per_sm, stats_mode, passes, False))
    return out


def _round_2():
    # pass 1 with the next chunk's load issued before this chunk's reductions (STATS 3), pass 2 likewise
    # (PREFETCH2), against round 1's best (STATS 0) at the same configs
    # at 32 values a thread (two chunks in registers stay under 128 registers; at 64 they spill, by ptxas)
    out = [(16384, 8, 0, 0, 3, False), (32768, 16, 1, 0, 3, False)]
    for block, warps, per_sm in ((8192, 8, 0), (8192, 8, 2), (16384, 16, 1), (4096, 4, 0), (4096, 4, 4)):
        out += [(block, warps, per_sm, 0, 3, False), (block, warps, per_sm, 3, 1, False)]
        out += [(block, warps, per_sm, st, 3, pf) for st, pf in ((3, False), (0, True), (3, True))]
    return out


ROUND = {"1": _round_1(), "2": _round_2()}


def main():
    round_ = sys.argv[1] if len(sys.argv) > 1 else "2"
    torch.manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}, {sms} SMs")
    M, N = 1024, 65536
    for dtype in (torch.float16, torch.float32):  # bf16 moves the bytes of fp16
        x = (torch.randn(M, N, device="cuda") * 2 + 3).to(dtype)
        w = (torch.rand(N, device="cuda") + 0.5).to(dtype)
        b = torch.randn(N, device="cuda").to(dtype)
        y = torch.empty_like(x)
        stats = torch.empty(M, 2, device="cuda")
        ref = torch.nn.functional.layer_norm(x.double(), (N,), w.double(), b.double(), 1e-5)
        copy_ms = do_bench(functools.partial(y.copy_, x), warmup=50, rep=300, return_mode="median")
        copy_bw = 2 * x.numel() * x.element_size() / copy_ms / 1e6
        print(f"\n{dtype} {M} x {N}: copy {copy_ms * 1e3:.1f} us ({copy_bw:.0f} GB/s)")
        for config in ROUND[round_]:
            block, warps, per_sm, stats_mode, passes, prefetch2 = config
            grid = (min(M, sms * per_sm) if per_sm else M,)
            run = functools.partial(
                _kernel[grid], y, stats, x, w, b, M, N, x.stride(0), 1e-5,
                BLOCK_N=block, STATS=stats_mode, PASSES=passes, PREFETCH2=prefetch2, num_warps=warps,
            )  # fmt: skip
            try:
                run()
            except Exception as e:  # noqa: BLE001 - a config that does not build is reported, not fatal
                print(f"  {config}: {e}")
                continue
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item() if passes == 3 else float("nan")
            ms = do_bench(run, warmup=10, rep=100, return_mode="median")
            moved = 2 * x.numel() * x.element_size() if passes != 1 else x.numel() * x.element_size()
            print(
                f"  BLOCK_N {block:5d} {warps:2d} warps {per_sm} an SM  STATS {stats_mode} PASSES {passes} "
                f"PREFETCH2 {int(prefetch2)}: {ms * 1e3:7.1f} us, {moved / ms / 1e6 / copy_bw * 100:5.1f} % of copy "
                f"for its bytes, max |err| {err:.2e}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
