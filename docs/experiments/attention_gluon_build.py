"""Offline sm_90a builds of ``gluon_flash`` (``kernels/_attention_gluon.py``, no GPU): for each config, the
registers and spills a thread (ptxas), the shared memory a program, and how many of the softmax's exponentials
(``ex2.approx``) issue while a ``wgmma`` group is in flight.

The count follows the PTX in program order: a ``wgmma.commit_group`` puts a group in flight, and a
``wgmma.wait_group N`` ends the flight only for ``N = 0`` (``N = 1`` leaves the last group running, which is
the point of the kernel: the PV MMA of the previous key block runs while this block's softmax does). Built the
same way, ``triton_flash`` has 0 of 68 (``results/attention_subtiles-*.txt``). In the warp-specialised kernel the
partitions' blocks are not laid out in program order, so there the line counts the consumers' ``wait_group 1``.

    cd docs/experiments && python attention_gluon_build.py > results/attention_gluon_build-<triton>.txt

Needs no torch: the descriptors' signatures are built from a stand-in tensor (only its dtype and address are read).
"""

import importlib.util
import os
import pathlib
import re
import sys
import types

os.environ.pop("TRITON_INTERPRET", None)
ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import torch  # noqa: F401  (the kernel module imports it; a stand-in serves where it is not installed)
except ImportError:
    sys.modules["torch"] = types.ModuleType("torch")

import triton  # noqa: E402
from sm90_build import ptxas_usage  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402

spec = importlib.util.spec_from_file_location("_attention_gluon", ROOT / "kernels" / "_attention_gluon.py")
ag = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ag)


class _Dtype:
    def __init__(self, name):
        self.name = name
        self.is_floating_point = True

    def __str__(self):
        return f"torch.{self.name}"


#: one object per dtype for the whole run: Triton's specialiser caches a dtype's name by the object's identity,
#: so a stand-in freed and another allocated at its address would be read as the first one's dtype
_DTYPES = {name: _Dtype(name) for name in ("float16", "bfloat16")}


class _Tensor:
    """What TensorDescriptor reads of a tensor: its dtype and a 16-byte-aligned address."""

    def __init__(self, name):
        self.dtype = _DTYPES[name]

    def data_ptr(self):
        return 0


def descriptor_type(dtype: str, block: int, head_dim: int = 128) -> str:
    gdtype = gl.float16 if dtype == "float16" else gl.bfloat16
    layout = gl.NVMMASharedLayout.get_default_for([1, block, head_dim], gdtype)
    shape = [64, 4096, head_dim]
    desc = TensorDescriptor(_Tensor(dtype), shape, [4096 * head_dim, head_dim, 1], [1, block, head_dim], layout)
    return mangle_type(desc)


def mma_overlap(ptx: str) -> tuple[int, int]:
    """(ex2 issued while a wgmma group is in flight, all ex2), in program order of the PTX."""
    in_flight, overlapped, total = False, 0, 0
    for line in ptx.splitlines():
        if "wgmma.commit_group" in line:
            in_flight = True
        elif m := re.search(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", line):
            in_flight = int(m.group(1)) > 0
        elif "ex2.approx" in line:
            total += 1
            overlapped += in_flight
    return overlapped, total


def build(block_m, block_n, warps, stages, causal, dtype="bfloat16", head_dim=128, ws=False, consumer_regs=240):
    """(compiled kernel, ptx, registers, spill-store bytes); ``ws``: the warp-specialised kernel."""
    sig = {
        "q_desc": descriptor_type(dtype, block_m // 2 if ws else block_m, head_dim),
        "k_desc": descriptor_type(dtype, block_n, head_dim),
        "v_desc": descriptor_type(dtype, block_n, head_dim),
        "o_ptr": "*fp16" if dtype == "float16" else "*bf16",
        "qk_scale": "fp32",
        "seq_len": "i32",
    }
    const = dict(
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        STAGES=stages,
        CAUSAL=causal,
        RESCALE_ACC=True,
        num_warps=warps,
    )
    options = {"num_warps": warps}
    if ws:
        const |= dict(num_warps=4, CONSUMER_REGS=consumer_regs)
        options = {"num_warps": 4, "maxnreg": 168}
    sig |= {name: "constexpr" for name in const}
    fn = ag._gluon_attention_ws_kernel if ws else ag._gluon_attention_kernel
    kernel = triton.compile(
        GluonASTSource(fn=fn, signature=sig, constexprs=const, attrs={(3,): [["tt.divisibility", 16]]}),
        target=GPUTarget("cuda", 90, 32),
        options=options,
    )
    ptx = kernel.asm["ptx"]
    regs, spills = ptxas_usage(ptx)
    return kernel, ptx, regs, [store for store, _ in spills]


if __name__ == "__main__":
    print(f"triton {triton.__version__}, gluon_flash built offline for sm_90a, D = 128")
    print("config (BLOCK_M x BLOCK_N, warps, stages)  causal  dtype  registers  spill-B  smem-B  ex2-beside-MMA")
    for config in ag.CONFIGS:
        block_m, block_n, warps, stages = (config[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps", "STAGES"))
        ws = bool(config.get("WARP_SPECIALIZE"))
        for causal in (False, True):
            for dtype in ("float16", "bfloat16"):
                try:
                    kernel, ptx, regs, spills = build(block_m, block_n, warps, stages, causal, dtype, ws=ws)
                except Exception as exc:  # noqa: BLE001 - a failed build is a result here
                    print(f"{block_m} x {block_n}, {warps}, {stages}  {causal}  {dtype}  FAILED: {str(exc)[-200:]}")
                    continue
                over, total = mma_overlap(ptx)
                beside = f"{over} of {total}"
                if ws:  # the partitions' blocks are not laid out in program order: count the waits instead
                    beside = f"{ptx.count('wgmma.wait_group.sync.aligned 1;')} consumers wait for 1 of 2 groups"
                print(
                    f"{block_m} x {block_n}, {warps}{' WS' if ws else ''}, {stages}  {causal!s:6}  {dtype:9}  "
                    f"{','.join(regs):9}  {','.join(spills):7}  {kernel.metadata.shared:6}  {beside}"
                )
