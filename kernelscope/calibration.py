"""Per-device ceilings measured on the machine itself, not taken from a datasheet.

* copy bandwidth: a large device-to-device copy, counting bytes read plus bytes written;
* matrix-product peak of the vendor library (cuBLAS through ``torch.matmul``) per dtype, on random
  data (zeros run measurably faster on an H200 and would inflate the ceiling).

Every case's achieved GB/s and TFLOP/s are reported as a fraction of these. Under the interpreter
the same measurements run on the host CPU and are labelled as such.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelscope import runtime, timing
from kernelscope.spec import DTYPES

SETTINGS = timing.TimingSettings(
    warmup=5, min_samples=20, max_samples=200, max_time_s=2.0, flush_l2=False, clock_warmup_s=0.5
)


def copy_bandwidth(n_bytes: int) -> dict[str, Any]:
    device = runtime.device()
    n = n_bytes // 4
    src = torch.randn(n, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    measured = timing.measure(lambda: dst.copy_(src), SETTINGS)
    moved = 2 * n * 4  # read + write
    return {
        "bytes_per_copy": moved,
        "median_us": measured["median_us"],
        "gbps": moved / (measured["median_us"] * 1e-6) / 1e9,
        "gbps_best": moved / (measured["min_us"] * 1e-6) / 1e9,
    }


def matmul_peak(dtype: torch.dtype, size: int) -> dict[str, Any]:
    device = runtime.device()
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    measured = timing.measure(lambda: a @ b, SETTINGS)
    flops = 2.0 * size**3
    return {
        "size": size,
        "median_us": measured["median_us"],
        "tflops": flops / (measured["median_us"] * 1e-6) / 1e12,
        "tflops_best": flops / (measured["min_us"] * 1e-6) / 1e12,
    }


def calibrate(dtypes: list[str]) -> dict[str, Any]:
    on_gpu = runtime.select_backend() == "cuda"
    copy_bytes = 2 * 2**30 if on_gpu else 64 * 2**20
    mm_size = 8192 if on_gpu else 512
    result: dict[str, Any] = {
        "measured_on": "gpu" if on_gpu else "host CPU (interpreter run)",
        "copy": copy_bandwidth(copy_bytes),
        "matmul": {},
    }
    for name in dtypes:
        dtype = DTYPES[name]
        try:
            entry = matmul_peak(dtype, mm_size)
            if dtype == torch.float32:
                entry["precision"] = "tf32 allowed" if on_gpu and torch.backends.cuda.matmul.allow_tf32 else "full fp32"
            result["matmul"][name] = entry
        except Exception as exc:  # noqa: BLE001 - a dtype the library cannot do is recorded
            result["matmul"][name] = {"error": f"{type(exc).__name__}: {exc}"}
    return result
