"""A first look at the device-time basis on a GPU host (docs/timing-basis.md): which records the profiler
reports for a closure of known kernels, that the delimiter splits them into calls, what a profiler session
costs, and the bases side by side for one short and one long kernel. Prints a short table; no files."""

import time

import torch
from torch.profiler import ProfilerActivity, profile

from kernelscope import devicetime, timing

settings = timing.TimingSettings()
flush = timing.L2Flusher(True)
x = torch.randn(64, 1024, device="cuda", dtype=torch.float16)
out = torch.empty_like(x)


def two_kernels():  # an eager closure of two kernels (a softmax and a copy)
    torch.softmax(x, dim=-1, out=out)
    out.add_(1.0)


timing.prepare_device_basis()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    d = timing._delimiter(flush)
    for _ in range(3):
        d("call")
        two_kernels()
    d("end")
    torch.cuda.synchronize()
kineto = prof.profiler.kineto_results
kinds = sorted(
    {(str(e.device_type()), e.activity_type() if hasattr(e, "activity_type") else "?") for e in kineto.events()}
)
print("record kinds:", kinds)
recs = devicetime.read_records(prof)
print("device records:", [(r.name[:40], r.duration_ns) for r in recs][:12])
print("calls:", devicetime.split_calls(recs, d.kinds))

t0 = time.perf_counter()
for _ in range(5):
    with profile(activities=[ProfilerActivity.CUDA]):
        torch.cuda.synchronize()
print(f"empty profiler session: {(time.perf_counter() - t0) / 5 * 1e3:.1f} ms")

big_a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
big_b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
big_c = torch.empty_like(big_a)
for name, fn in (("softmax 64x1024 + add", two_kernels), ("matmul 8192^3", lambda: torch.mm(big_a, big_b, out=big_c))):
    ev = timing.measure(fn, settings, with_first_call=False, flush=flush)
    t0 = time.perf_counter()
    dev = timing.measure_device(fn, settings, flush, ev["median_us"])
    t_dev = time.perf_counter() - t0
    g = timing.graph_replay_us(fn, 20, flush=flush)
    nan = float("nan")
    line = f"{name}: event {ev['median_us']:.2f} us, device sum {dev.get('median_us', nan):.2f} span "
    line += f"{dev.get('span_median_us', nan):.2f} ({dev.get('n')} calls, {t_dev:.2f} s), "
    line += f"graph {g.get('median_us', nan):.2f}"
    print(line, dev.get("status"), dev.get("reason", ""))
    if ev["median_us"] > 200:
        t0 = time.perf_counter()
        s = timing.measure_sustained(fn, settings, flush)
        print(
            f"  sustained {s.get('median_us', nan):.1f} us ({time.perf_counter() - t0:.2f} s)",
            s.get("status"),
            s.get("reason", ""),
        )
    sm = timing.seed_method(fn, settings)
    print(f"  seed method {sm['median_us']:.2f} us")
