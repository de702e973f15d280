"""Is gluon_smem's producer-warp design expressible on this stack? Offline sm_90a builds (no GPU) of a probe: a
softmax over rows held in shared memory by TMA, as ``kernels/_rows_gluon.py`` does (one program a row, no team),
in three forms, and what the compiler puts between a consumer's last read of a slot and the slot's refill:

- ``inline``: the kernel as it is, each slot refilled by the consumer warps themselves after reading it;
- ``ws``: a one-warp producer partition issues every TMA load once the slot's ``empty`` mbarrier completes, and the
  consumer warps (the default partition) arrive on ``empty`` after reading the slot, with nothing in between;
- ``ws_sync``: the same with a barrier among the consumer warps before the arrival.

For each: the barriers in the PTX (``bar.sync`` / ``barrier.sync`` with their operands: a named barrier with a thread
count syncs a partition, a bare ``bar.sync 0`` the whole CTA), the ``mbarrier.arrive`` instructions and whether
they are predicated on one thread, the registers and spills a thread (ptxas). The question is whether a consumer's
arrival can be per warp (each warp releasing its own box rows, no barrier among consumer warps), which the top stall
of the kernel as it is (the CTA barrier, docs/kernel-notes.md "Session 24") would need.

    cd docs/experiments && python rows_ws_build.py > results/rows_ws_build-<triton>.txt
"""

import json
import os
import pathlib
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
from sm90_build import ptxas_usage  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402

# the kernel module's log2(e), box width and CTA barrier (chosen by feature: gl.barrier or gl.thread_barrier)
from kernels._rows_gluon import LOG2E, W  # noqa: E402
from kernels._rows_gluon import _cta_barrier as _sync  # noqa: E402


@gluon.jit
def _pass1(slots, full, phase, layout: gl.constexpr, CHUNK_ROWS: gl.constexpr, CHUNKS: gl.constexpr):
    box_rows: gl.constexpr = gl.SliceLayout(1, layout)
    m_run = gl.full([CHUNK_ROWS], -float("inf"), gl.float32, box_rows)
    s_run = gl.zeros([CHUNK_ROWS], gl.float32, box_rows)
    for c in gl.static_range(CHUNKS):
        mbarrier.wait(full.index(c), phase)
        x = slots.index(c).load(layout).to(gl.float32) * LOG2E
        m_new = gl.maximum(m_run, gl.max(x, axis=1))
        s_run = s_run * gl.exp2(m_run - m_new) + gl.sum(gl.exp2(x - gl.expand_dims(m_new, 1)), axis=1)
        m_run = m_new
    m_row = gl.max(m_run, axis=0)
    return m_row, gl.sum(s_run * gl.exp2(m_run - m_row), axis=0)


@gluon.jit
def _inline_kernel(x_desc, y_ptr, M, CHUNK_ROWS: gl.constexpr, CHUNKS: gl.constexpr, VEC: gl.constexpr):
    """The kernel as it is: the consumers refill each slot after reading it (pass 2)."""
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [gl.num_warps(), 1], [1, 0])
    slots = gl.allocate_shared_memory(x_desc.dtype, [CHUNKS, CHUNK_ROWS, BOX_W], x_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [CHUNKS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CHUNKS):
        mbarrier.init(full.index(c), count=1)
    pid, n = gl.program_id(0), gl.num_programs(0)
    for c in gl.static_range(CHUNKS):
        mbarrier.expect(full.index(c), x_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(x_desc, [(pid * CHUNKS + c) * CHUNK_ROWS, 0], full.index(c), slots.index(c))
    offs = gl.expand_dims(gl.arange(0, CHUNK_ROWS, layout=gl.SliceLayout(1, layout)), 1) * BOX_W + gl.expand_dims(
        gl.arange(0, BOX_W, layout=gl.SliceLayout(0, layout)), 0
    )
    phase = 0
    for row in range(pid, M, n):
        m_row, s_row = _pass1(slots, full, phase, layout, CHUNK_ROWS, CHUNKS)
        nxt = row + n
        for c in gl.static_range(CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            fence_async_shared()
            mbarrier.expect(full.index(c), x_desc.block_type.nbytes, pred=nxt < M)
            tma.async_copy_global_to_shared(
                x_desc, [(nxt * CHUNKS + c) * CHUNK_ROWS, 0], full.index(c), slots.index(c), pred=nxt < M
            )
            y = gl.exp2(x * LOG2E - m_row) / s_row
            gl.store(y_ptr + row.to(gl.int64) * (CHUNKS * CHUNK_ROWS * BOX_W) + c * CHUNK_ROWS * BOX_W + offs, y)
        phase ^= 1


@gluon.jit
def _producer(x_desc, slots, full, empty, M, CHUNK_ROWS: gl.constexpr, CHUNKS: gl.constexpr):
    pid, n = gl.program_id(0), gl.num_programs(0)
    i = 0
    for row in range(pid, M, n):
        for c in gl.static_range(CHUNKS):
            mbarrier.wait(empty.index(c), (i & 1) ^ 1)  # a fresh mbarrier has completed the phase before phase 0
            mbarrier.expect(full.index(c), x_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(x_desc, [(row * CHUNKS + c) * CHUNK_ROWS, 0], full.index(c), slots.index(c))
        i += 1  # noqa: SIM113 (a Gluon loop over a runtime range: no enumerate)


@gluon.jit
def _consumer(
    y_ptr,
    slots,
    full,
    empty,
    M,
    CHUNK_ROWS: gl.constexpr,
    CHUNKS: gl.constexpr,
    VEC: gl.constexpr,
    SYNC: gl.constexpr,
    WARPS: gl.constexpr,
):
    BOX_W: gl.constexpr = slots.shape[2]
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [WARPS, 1], [1, 0])
    offs = gl.expand_dims(gl.arange(0, CHUNK_ROWS, layout=gl.SliceLayout(1, layout)), 1) * BOX_W + gl.expand_dims(
        gl.arange(0, BOX_W, layout=gl.SliceLayout(0, layout)), 0
    )
    pid, n = gl.program_id(0), gl.num_programs(0)
    phase = 0
    for row in range(pid, M, n):
        m_row, s_row = _pass1(slots, full, phase, layout, CHUNK_ROWS, CHUNKS)
        for c in gl.static_range(CHUNKS):
            x = slots.index(c).load(layout).to(gl.float32)
            if SYNC:
                _sync()
            mbarrier.arrive(empty.index(c), count=1)
            y = gl.exp2(x * LOG2E - m_row) / s_row
            gl.store(y_ptr + row.to(gl.int64) * (CHUNKS * CHUNK_ROWS * BOX_W) + c * CHUNK_ROWS * BOX_W + offs, y)
        phase ^= 1


@gluon.jit
def _ws_kernel(x_desc, y_ptr, M, CHUNK_ROWS: gl.constexpr, CHUNKS: gl.constexpr, VEC: gl.constexpr, SYNC: gl.constexpr):
    """A one-warp producer partition and the consumer warps (the default partition)."""
    BOX_W: gl.constexpr = x_desc.block_type.shape[1]
    slots = gl.allocate_shared_memory(x_desc.dtype, [CHUNKS, CHUNK_ROWS, BOX_W], x_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [CHUNKS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [CHUNKS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CHUNKS):
        mbarrier.init(full.index(c), count=1)
        mbarrier.init(empty.index(c), count=1)
    gl.warp_specialize(
        [
            (_consumer, (y_ptr, slots, full, empty, M, CHUNK_ROWS, CHUNKS, VEC, SYNC, gl.num_warps())),
            (_producer, (x_desc, slots, full, empty, M, CHUNK_ROWS, CHUNKS)),
        ],
        [1],
        [40],
    )


def descriptor_type(chunk_rows: int) -> str:
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
    x = torch.empty(64, W, dtype=torch.float16)
    return mangle_type(TensorDescriptor.from_tensor(x, [chunk_rows, W], layout))


def barriers(ptx: str) -> dict:
    """The PTX's barrier instructions by their text (operands kept: ``bar.sync 0`` is the whole CTA, ``bar.sync 1,
    256`` a named barrier of 256 threads), and its mbarrier arrivals."""
    found = re.findall(r"\b((?:bar|barrier)\.(?:sync|arrive)(?:\.aligned)?\s+[^;]*);", ptx)
    counts: dict = {}
    for b in found:
        key = " ".join(b.split())
        counts[key] = counts.get(key, 0) + 1
    plain = re.findall(r"^\s*(@%p\d+\s+)?mbarrier\.arrive\.shared[^;]*;", ptx, flags=re.M)
    return {
        "barriers": counts,
        "mbarrier_arrive": len(plain),  # a consumer's release of a slot (not the expect_tx of a TMA load)
        "predicated_arrive": sum(1 for a in plain if a),
        "arrive_expect_tx": len(re.findall(r"mbarrier\.arrive\.expect_tx", ptx)),
        "barrier_before_each_release": _barrier_before_release(ptx),
        "instructions": _instructions(ptx),
    }


def _instructions(ptx: str) -> int:
    """The PTX's instructions (debug sections, directives, labels and comments left out): equal counts and equal
    barriers are how the two ``ws`` forms are compared."""
    body = ptx.split(".section", 1)[0]
    return sum(1 for line in body.splitlines() if (t := line.strip()) and t.endswith(";") and not t.startswith("."))


def _barrier_before_release(ptx: str) -> list[str]:
    """For each consumer release (a plain ``mbarrier.arrive``), the barrier between the slot's last shared-memory
    read before it and the arrival, or "none": whether the consumer warps wait for each other before releasing."""
    out, last_read, barrier = [], False, None
    for line in ptx.splitlines():
        t = line.strip()
        if t.startswith("ld.shared"):
            last_read, barrier = True, None
        elif re.match(r"(bar|barrier)\.sync", t):
            barrier = " ".join(t.rstrip(";").split())
        elif "mbarrier.arrive.shared" in t and last_read:
            out.append(barrier or "none")
            last_read = False
    return out


def main() -> None:
    out = {"triton": triton.__version__, "builds": []}
    chunk_rows, chunks, warps = 32, 2, 8  # gluon_smem's 16-bit softmax default: 32-row slots, 8 warps
    for name, fn, extra in (
        ("inline", _inline_kernel, {}),
        ("ws", _ws_kernel, {"SYNC": False}),
        ("ws_sync", _ws_kernel, {"SYNC": True}),
    ):
        sig = {"x_desc": descriptor_type(chunk_rows), "y_ptr": "*fp16", "M": "i32"}
        const = dict(CHUNK_ROWS=chunk_rows, CHUNKS=chunks, VEC=8, **extra)
        sig |= dict.fromkeys(const, "constexpr")
        try:
            k = triton.compile(
                GluonASTSource(fn=fn, signature=sig, constexprs=const, attrs={(1,): [["tt.divisibility", 16]]}),
                target=GPUTarget("cuda", 90, 32),
                options={"num_warps": warps},
            )
        except Exception as exc:  # a form this stack cannot build is an answer too
            out["builds"].append({"form": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"})
            continue
        ptx = k.asm["ptx"]
        regs, spills = ptxas_usage(ptx)
        out["builds"].append({"form": name, "registers": regs, "spills": spills, **barriers(ptx)})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
