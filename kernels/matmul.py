"""Dense matrix multiplication ``C = A @ B`` with A [M, K], B [K, N], C [M, N] (seed 002, §4.2 and §5.2).

Variants:

* ``triton_grouped`` — the seed's tiled ``tl.dot`` kernel, corrected and generalised: a 1-D grid whose
  program ids are reordered by the ``GROUP_M`` swizzle (consecutive programs share A row-panels and B
  column-panels, so those stay in L2), fp32 accumulation, arbitrary strides for A, B and C (transposed
  views work), M and N edges handled by wrapping the load rows (the wrapped rows are never stored) and
  the K edge by one masked tail block after an unmasked main loop (with stride and K hints, so every
  load stays a 16-byte vector when K is not a multiple of 16). The seed launched a 2-D grid with no
  swizzle although it declared ``GROUP_M``, hard-coded an fp16 store, and masked M/N on every load;
  its ``@triton.autotune`` (§5.2) is replaced by the pipeline's own sweep over the declared config space
  (``_HOPPER_TILES`` + ``_SMALL_TILES``).
* ``triton_persistent`` — one program per SM (``grid = min(tiles, SMs)``), each looping over the tiles
  ``pid, pid + programs, ...`` in the same ``GROUP_M`` order. With ``TMA=1`` the operands are read and C is
  written through device-side tensor descriptors (TMA on sm_90+), built once per program before its
  tile loop: they zero-fill the K tail and clip the M/N edges in hardware. ``TMA=1`` needs
  ``tl.make_tensor_descriptor`` and ``triton.set_allocator``, a device of compute capability >= 9 (or the
  interpreter, which emulates descriptors), and every operand with one unit stride, the other stride a
  multiple of 16 bytes and a 16-byte-aligned base; a column-major A or B gets a descriptor over its
  transpose (C is always allocated row-major). Otherwise the config must say ``TMA=0``: plain pointer
  loads, the same code as ``triton_grouped``. The path is a config value, so every sweep record and
  report line says which one ran. :func:`tma_unsupported_reason` is the one feature check. Two more
  config values of the TMA path follow Triton's persistent tutorial (09): ``FLATTEN=1`` flattens the
  tile and K loops into one nest for the software pipeliner (the store takes its tile from a second
  counter, so the next tile's loads need not wait for this tile's epilogue), and ``EPILOGUE_SUBTILE=1``
  stores C in two halves of ``BLOCK_N / 2`` columns (half the epilogue's shared memory). ``WARP_SPECIALIZE=1``
  asks the compiler to warp-specialise the tile loop: on sm_90a it builds a load partition that issues the
  TMA copies and consumer warpgroups that run the wgmma and the epilogue, with the registers rebalanced
  between them (``setmaxnreg``), the structure of cuBLAS's and FA3's Hopper kernels. The compiler honours
  it only on an unflattened loop with ``num_warps=4`` (docs/experiments/matmul_ws_build.py), so the prune
  rules keep those.
* ``gluon_persistent`` — cuBLAS's cooperative Hopper design written out in Gluon (``kernels/_matmul_gluon.py``): a
  one-warp TMA producer and two consumer warpgroups of 64 rows that only issue MMAs, a ring of shared-memory slots
  with full and empty barriers, and the tile stored by TMA while the next one's MMAs run. On a GPU of compute
  capability 9.x only, A row-major and B row- or column-major with 16-byte-aligned rows.

The Triton variants support fp16 and bf16 (fp32 inputs are left out: ``tl.dot`` would use tf32). Offsets are
32-bit, so each operand must have fewer than 2^31 elements.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import _matmul_gluon as gluon_mm
from kernelscope import runtime, tma
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

# Offsets inside the kernels are int32 (cheaper address arithmetic); larger operands are refused.
MAX_OPERAND_ELEMENTS = 2**31 - 1
# TMA boxes: each block dimension a power of two of at most 256 elements.
MAX_TMA_BOX = 256
# Device-side descriptors: three per program (A, B, C); the feature check and scratch are kernelscope.tma's.
DESCRIPTOR_BYTES = tma.DESCRIPTOR_BYTES
HAS_DEVICE_DESCRIPTORS = tma.HAS_DEVICE_DESCRIPTORS
# Whether ``tl.range`` can flatten a loop nest for the software pipeliner (the persistent tutorial's
# tile loop), checked by its signature.
HAS_FLATTENED_RANGE = "flatten" in inspect.signature(tl.range.__init__).parameters
# Whether ``tl.range`` takes ``warp_specialize`` (the compiler splits the loop into a TMA-load producer
# partition and tensor-core consumer partitions), checked the same way.
HAS_WARP_SPECIALIZE = "warp_specialize" in inspect.signature(tl.range.__init__).parameters


# --------------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------------


@triton.jit
def _tile_coordinates(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Map a linear tile id to (pid_m, pid_n) so that GROUP_M consecutive row-tiles are visited column by
    column: a group reads GROUP_M row-panels of A and each column-panel of B once while they are in L2,
    instead of streaming all of B again for every row-tile. The last group may be shorter."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _mma(a, b, acc, DOT_IN_FP32: tl.constexpr):
    """acc + a @ b in fp32. DOT_IN_FP32 (set only under the interpreter for bf16, whose ``tl.dot`` there
    multiplies the raw uint16 bit patterns: triton-lang/triton#11584) upcasts the operands first; the
    result is the same, since products of 16-bit floats are exact in fp32 on the tensor cores too."""
    if DOT_IN_FP32:
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _tile_dot_pointers(
    a_ptr,
    b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    pid_m,
    pid_n,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    ALIGN_AM: tl.constexpr,
    ALIGN_AK: tl.constexpr,
    ALIGN_BK: tl.constexpr,
    ALIGN_BN: tl.constexpr,
    ALIGN_K: tl.constexpr,
):
    """fp32 accumulator of one [BLOCK_M, BLOCK_N] tile of A @ B, read through pointers.

    Rows of A and columns of B past the edge are wrapped (``% M``, ``% N``) rather than masked: they read
    valid memory, feed only output rows/columns that the store masks out, and keep the loads unmasked
    along M and N. The K loop runs over the full BLOCK_K blocks unmasked and ends with one masked tail
    block (zeros past K, because there a wrong value would enter valid outputs): a K mask on every
    block, whose bound Triton cannot prove a multiple of the vector width when K % 16 != 0, would cut
    every load into single elements. For the same reason each stride is rewritten as
    ``(stride // ALIGN) * ALIGN``: the same value (:func:`stride_alignment` picks ALIGN, a power of two
    up to 16 that divides it), but now the compiler knows that rows start on ALIGN-element
    boundaries (it only proves that itself for strides that are multiples of 16, and K = 1000 is not).
    ``K`` gets the same rewrite (ALIGN_K), so the tail's mask is known to be constant over ALIGN_K
    columns and the tail loads stay vectors too.
    """
    K = (K // ALIGN_K) * ALIGN_K
    stride_am = (stride_am // ALIGN_AM) * ALIGN_AM
    stride_ak = (stride_ak // ALIGN_AK) * ALIGN_AK
    stride_bk = (stride_bk // ALIGN_BK) * ALIGN_BK
    stride_bn = (stride_bn // ALIGN_BN) * ALIGN_BN
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_full = K // BLOCK_K
    for _k in range(0, k_full):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = _mma(a, b, acc, DOT_IN_FP32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    k_left = K - k_full * BLOCK_K
    if k_left > 0:
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = _mma(a, b, acc, DOT_IN_FP32)
    return acc


@triton.jit
def _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Round the fp32 tile once to C's dtype and store the part inside [M, N]."""
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _matmul_grouped_kernel(
    # pointers
    a_ptr,
    b_ptr,
    c_ptr,
    # sizes
    M,
    N,
    K,
    # strides
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    ALIGN_AM: tl.constexpr,
    ALIGN_AK: tl.constexpr,
    ALIGN_BK: tl.constexpr,
    ALIGN_BN: tl.constexpr,
    ALIGN_K: tl.constexpr,
):
    """One program per C tile on a 1-D grid of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, ordered by
    the GROUP_M swizzle. ``a_ptr``: [M, K]; ``b_ptr``: [K, N]; ``c_ptr``: [M, N]; any strides."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coordinates(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    acc = _tile_dot_pointers(
        a_ptr,
        b_ptr,
        M,
        N,
        K,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        pid_m,
        pid_n,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        DOT_IN_FP32,
        ALIGN_AM,
        ALIGN_AK,
        ALIGN_BK,
        ALIGN_BN,
        ALIGN_K,
    )
    _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


@triton.jit
def _operand_descriptor(
    ptr, ROWS, COLS, stride_row, stride_col, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, COL_MAJOR: tl.constexpr
):
    """Descriptor over a [ROWS, COLS] operand. TMA needs the innermost dimension contiguous, so a
    column-major operand (``stride_row == 1``) is described as its transpose [COLS, ROWS]."""
    if COL_MAJOR:
        desc = tl.make_tensor_descriptor(
            ptr, shape=[COLS, ROWS], strides=[stride_col, 1], block_shape=[BLOCK_COLS, BLOCK_ROWS]
        )
    else:
        desc = tl.make_tensor_descriptor(
            ptr, shape=[ROWS, COLS], strides=[stride_row, 1], block_shape=[BLOCK_ROWS, BLOCK_COLS]
        )
    return desc


@triton.jit
def _load_operand(desc, row, col, COL_MAJOR: tl.constexpr):
    """The [BLOCK_ROWS, BLOCK_COLS] block at (row, col); out-of-bounds elements read as zero. For a
    column-major operand the transposed block is loaded and viewed transposed (no data movement: the dot
    reads the shared-memory tile in the other major order)."""
    if COL_MAJOR:
        block = desc.load([col, row]).T
    else:
        block = desc.load([row, col])
    return block


@triton.jit
def _matmul_persistent_kernel(
    # pointers
    a_ptr,
    b_ptr,
    c_ptr,
    # sizes
    M,
    N,
    K,
    # strides
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    # meta-parameters
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    USE_TMA: tl.constexpr,
    A_COL_MAJOR: tl.constexpr,
    B_COL_MAJOR: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    ALIGN_AM: tl.constexpr,
    ALIGN_AK: tl.constexpr,
    ALIGN_BK: tl.constexpr,
    ALIGN_BN: tl.constexpr,
    ALIGN_K: tl.constexpr,
    FLATTEN: tl.constexpr = False,
    EPILOGUE_SUBTILE: tl.constexpr = False,
    WARP_SPECIALIZE: tl.constexpr = False,
):
    """Persistent: a grid of at most one program per SM, each looping over the tiles pid, pid + programs,
    ... in GROUP_M order, so no launch or tail wave of short-lived programs. ``a_ptr``: [M, K];
    ``b_ptr``: [K, N]; ``c_ptr``: [M, N]. With USE_TMA, operands go through tensor descriptors (which
    need the layout conditions checked by ``tma_unsupported_reason``; A_COL_MAJOR / B_COL_MAJOR say which
    operands are described through their transpose); otherwise any strides, through pointers."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_programs = tl.num_programs(0)
    if USE_TMA:
        a_desc = _operand_descriptor(a_ptr, M, K, stride_am, stride_ak, BLOCK_M, BLOCK_K, A_COL_MAJOR)
        b_desc = _operand_descriptor(b_ptr, K, N, stride_bk, stride_bn, BLOCK_K, BLOCK_N, B_COL_MAJOR)
        c_desc = tl.make_tensor_descriptor(
            c_ptr,
            shape=[M, N],
            strides=[stride_cm, 1],
            block_shape=[BLOCK_M, BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N],
        )
    # The store's tile comes from its own counter, one tile behind the loads' in a flattened loop nest, so
    # the pipeliner can issue the next tile's loads before this tile's epilogue (the persistent tutorial).
    tile_id_c = tl.program_id(0) - num_programs
    for tile_id in tl.range(
        tl.program_id(0), num_tiles, num_programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
    ):
        pid_m, pid_n = _tile_coordinates(tile_id, num_pid_m, num_pid_n, GROUP_M)
        if USE_TMA:
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BLOCK_K)):
                a = _load_operand(a_desc, off_m, k * BLOCK_K, A_COL_MAJOR)
                b = _load_operand(b_desc, k * BLOCK_K, off_n, B_COL_MAJOR)
                acc = _mma(a, b, acc, DOT_IN_FP32)
            tile_id_c += num_programs
            pid_m_c, pid_n_c = _tile_coordinates(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
            off_m_c = pid_m_c * BLOCK_M
            off_n_c = pid_n_c * BLOCK_N
            if EPILOGUE_SUBTILE:
                # C stored in two halves of BLOCK_N / 2 columns: half the shared memory for the epilogue
                halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                acc0, acc1 = tl.split(halves)
                c_desc.store([off_m_c, off_n_c], acc0.to(c_ptr.dtype.element_ty))
                c_desc.store([off_m_c, off_n_c + BLOCK_N // 2], acc1.to(c_ptr.dtype.element_ty))
            else:
                c_desc.store([off_m_c, off_n_c], acc.to(c_ptr.dtype.element_ty))
        else:
            acc = _tile_dot_pointers(
                a_ptr,
                b_ptr,
                M,
                N,
                K,
                stride_am,
                stride_ak,
                stride_bk,
                stride_bn,
                pid_m,
                pid_n,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                DOT_IN_FP32,
                ALIGN_AM,
                ALIGN_AK,
                ALIGN_BK,
                ALIGN_BN,
                ALIGN_K,
            )
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


# --------------------------------------------------------------------------------------------------------
# TMA feature check and descriptor scratch memory
# --------------------------------------------------------------------------------------------------------


def tma_unsupported_reason(
    operands: Mapping[str, tuple[Sequence[int], int]],
    elem_bytes: int,
    limits: Mapping[str, Any],
    has_descriptors: bool = HAS_DEVICE_DESCRIPTORS,
) -> str | None:
    """Why tensor descriptors cannot serve these operands, or None if they can.

    ``operands`` maps a name to ``(strides, data_ptr)`` of a 2-D operand; ``limits`` is
    ``runtime.device_limits()``; ``has_descriptors`` says whether the installed Triton has device-side
    descriptors (a parameter so the selection can be tested without another Triton).
    """
    reason = tma.feature_reason(limits, has_descriptors)
    if reason:
        return reason
    for name, (strides, data_ptr) in operands.items():
        if data_ptr % 16:
            return f"{name}: base address is not 16-byte aligned"
        if 1 not in strides:
            return f"{name}: no unit stride (strides {tuple(strides)}), TMA needs one contiguous dimension"
        outer = strides[0] if strides[1] == 1 else strides[1]
        if (outer * elem_bytes) % 16:
            return f"{name}: outer stride {outer} x {elem_bytes} B is not a multiple of 16 bytes"
    return None


def _col_major(strides: Sequence[int]) -> bool:
    """A [rows, cols] operand is read through its transpose when its columns, not its rows, are contiguous."""
    return strides[1] != 1 and strides[0] == 1


_SCRATCH = tma.DescriptorScratch()


# --------------------------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------------------------


def _operands(inputs: Inputs, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    a, b = inputs["a"], inputs["b"]
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul expects A [M, K] and B [K, N], got {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    if out.shape != (M, N) or out.dtype != a.dtype or b.dtype != a.dtype:
        raise ValueError(f"C must be [{M}, {N}] of {a.dtype} like A and B, got {tuple(out.shape)} {out.dtype}")
    return a, b, M, N, K


def _strides(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple[int, ...]:
    return (a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1))


def stride_alignment(stride: int) -> int:
    """The largest power of two up to 16 that divides ``stride`` (1 for a zero stride): what the kernel
    may promise the compiler about it. 16 is the divisibility Triton itself proves for integer arguments
    that are multiples of 16, so the rewrite never tells it less than it knew."""
    return min(16, stride & -stride) if stride > 0 else 1


def _alignments(a: torch.Tensor, b: torch.Tensor, K: int) -> dict[str, int]:
    """The kernels' ALIGN_* constexprs: for each stride of A and B, and for the reduction length ``K`` the
    kernel is launched with (which the negative control sets to one less than A's)."""
    return {
        f"ALIGN_{name}": stride_alignment(value)
        for name, value in zip(("AM", "AK", "BK", "BN", "K"), (*a.stride(), *b.stride(), K))
    }


def _meta(config: Mapping[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    return {
        "BLOCK_M": int(config["BLOCK_M"]),
        "BLOCK_N": int(config["BLOCK_N"]),
        "BLOCK_K": int(config["BLOCK_K"]),
        "GROUP_M": int(config["GROUP_M"]),
        "num_warps": int(config["num_warps"]),
        "num_stages": int(config["num_stages"]),
        "DOT_IN_FP32": bool(runtime.device_limits()["interpreter"]) and dtype == torch.bfloat16,
    }


def _num_tiles(M: int, N: int, config: Mapping[str, Any]) -> int:
    return triton.cdiv(M, int(config["BLOCK_M"])) * triton.cdiv(N, int(config["BLOCK_N"]))


def _launch_grouped(a, b, out, M, N, K, config) -> callable:
    grid = (_num_tiles(M, N, config),)
    args = (a, b, out, M, N, K, *_strides(a, b, out))
    meta = {**_meta(config, a.dtype), **_alignments(a, b, K)}

    def run() -> torch.Tensor:
        _matmul_grouped_kernel[grid](*args, **meta)
        return out

    return run


def _prepare_grouped(inputs: Inputs, out: torch.Tensor, config) -> callable:
    a, b, M, N, K = _operands(inputs, out)
    return _launch_grouped(a, b, out, M, N, K, config)


def persistent_grid(M: int, N: int, config: Mapping[str, Any], num_sms: int) -> tuple[int]:
    """One program per SM, or one per tile when there are fewer tiles than SMs."""
    return (min(_num_tiles(M, N, config), num_sms),)


def _prepare_persistent(inputs: Inputs, out: torch.Tensor, config) -> callable:
    a, b, M, N, K = _operands(inputs, out)
    grid = persistent_grid(M, N, config, runtime.device_limits()["num_sms"])
    use_tma = bool(config["TMA"])
    if use_tma:
        operands = {
            "A": (a.stride(), a.data_ptr()),
            "B": (b.stride(), b.data_ptr()),
            "C": (out.stride(), out.data_ptr()),
        }
        reason = tma_unsupported_reason(operands, a.element_size(), runtime.device_limits())
        if reason is None and out.stride(1) != 1:
            reason = "C: the store descriptor needs C's columns contiguous"
        if reason:
            raise ValueError(f"config asks for TMA=1 but {reason}")
        _SCRATCH.reserve(grid[0] * 3 * DESCRIPTOR_BYTES, a.device)
    args = (a, b, out, M, N, K, *_strides(a, b, out))
    meta = {
        **_meta(config, a.dtype),
        **_alignments(a, b, K),
        "USE_TMA": use_tma,
        "A_COL_MAJOR": use_tma and _col_major(a.stride()),
        "B_COL_MAJOR": use_tma and _col_major(b.stride()),
        "FLATTEN": bool(config.get("FLATTEN", 0)),
        "EPILOGUE_SUBTILE": bool(config.get("EPILOGUE_SUBTILE", 0)),
        "WARP_SPECIALIZE": bool(config.get("WARP_SPECIALIZE", 0)),
    }

    def run() -> torch.Tensor:
        if use_tma:
            # a ContextVar read at launch, so it is set in the thread that launches: a sweep prepares (and
            # compiles) in worker threads and launches in the main one, where an allocator set at
            # prepare time is not seen (every TMA config of the sweep failed so until this)
            triton.set_allocator(_SCRATCH)
        _matmul_persistent_kernel[grid](*args, **meta)
        return out

    return run


# --------------------------------------------------------------------------------------------------------
# Config spaces
# --------------------------------------------------------------------------------------------------------


def _config(block_m: int, block_n: int, block_k: int, group_m: int, warps: int, stages: int, **extra: int) -> dict:
    return {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
        "GROUP_M": group_m,
        "num_warps": warps,
        "num_stages": stages,
        **extra,
    }


# Tiles known to do well on Hopper for 16-bit inputs: Triton's matmul tutorials (03, 09) and the
# 128-row warpgroup shapes wgmma favours. 128x256x64 w8 s3 is the persistent tutorial's fp16 choice.
_HOPPER_TILES = [
    (128, 256, 64, 8, 8, 3),
    (128, 256, 64, 8, 8, 4),
    (256, 128, 64, 8, 8, 3),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 64, 8, 8, 3),
    (64, 256, 32, 8, 4, 4),
    (128, 128, 32, 8, 4, 4),
    (128, 64, 64, 8, 4, 4),
    (64, 128, 64, 8, 4, 4),
    (64, 64, 64, 8, 4, 4),
]
# Small tiles: enough programs for small (launch-bound) problems, and cheap under the interpreter.
# GROUP_M 2 makes the swizzle's short last group appear on tiny problems.
_SMALL_TILES = [
    (32, 32, 32, 4, 2, 3),
    (16, 16, 16, 2, 1, 2),
]
# Problems up to this many output elements also get the small tiles; on larger ones a 32x32 tile means
# thousands of programs with the tensor cores mostly idle, which only costs sweep time.
SMALL_TILE_MAX_OUTPUT = 512 * 512


def _grouped_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    tiles = _HOPPER_TILES + (_SMALL_TILES if shape["M"] * shape["N"] <= SMALL_TILE_MAX_OUTPUT else [])
    return [_config(*t) for t in tiles]


# Persistent: TMA on for the Hopper tiles (the path the variant exists for), off for the three strongest
# so the sweep measures what TMA buys; both paths for the small tiles.
_PERSISTENT_TMA_TILES = [
    (128, 256, 64, 8, 8, 3),
    (256, 128, 64, 8, 8, 3),
    (128, 128, 64, 8, 8, 4),
    (128, 128, 64, 8, 4, 4),
    (128, 64, 64, 8, 4, 4),
    (64, 64, 64, 8, 4, 4),
]
_PERSISTENT_POINTER_TILES = [(128, 256, 64, 8, 8, 3), (128, 128, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4)]
# The persistent tutorial's Hopper path (09-persistent-matmul): the tile and K loops flattened into one
# pipelined nest (the next tile's loads overlap this tile's epilogue; at K = 1000 a tile has 16 K steps,
# so the epilogue weighs), and its epilogue subtiling (C stored in two halves), whose saved shared memory
# buys the fourth stage of the 128x256 tile.
_PERSISTENT_FLATTENED_TILES = [
    ((128, 256, 64, 8, 8, 3), {}),
    ((128, 256, 64, 8, 8, 4), {"EPILOGUE_SUBTILE": 1}),
    ((256, 128, 64, 8, 8, 3), {}),
    ((128, 128, 64, 8, 4, 4), {}),
]
# Warp-specialised (TMA, unflattened, one warpgroup named: the compiler adds the load partition and splits
# the tile over consumer warpgroups): the two tiles that came within 2 % of the fastest config on H200
# (docs/kernel-notes.md, "Session 18"). In the sm_90a builds of both stacks they fit in 168 registers a
# thread where the unspecialised 4-warp build of the same tile needs 255.
_PERSISTENT_WS_TILES = [(128, 256, 64, 8, 4, 3), (256, 128, 64, 8, 4, 3)]


def _persistent_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    configs = [_config(*t, TMA=1) for t in _PERSISTENT_TMA_TILES]
    configs += [_config(*t, TMA=0) for t in _PERSISTENT_POINTER_TILES]
    if shape["M"] * shape["N"] <= SMALL_TILE_MAX_OUTPUT:
        configs += [_config(*t, TMA=tma) for t in _SMALL_TILES for tma in (1, 0)]
    else:  # a few waves of tiles per program at least: where overlapping one tile's epilogue can pay
        configs += [_config(*t, TMA=1, FLATTEN=1, **extra) for t, extra in _PERSISTENT_FLATTENED_TILES]
        configs += [_config(*t, TMA=1, WARP_SPECIALIZE=1) for t in _PERSISTENT_WS_TILES]
    return configs


def _fit_tile(config: dict, shape: Shape) -> dict:
    """Shrink each block to the problem (powers of two, >= 16 for tl.dot), so a tiny problem (and the
    interpreter, whose cost grows with the tile) does not run a mostly-masked 128-wide tile. Below
    128x128 the second warpgroup has no rows of its own, so at most 4 warps."""
    fitted = dict(config)
    for block, dim in (("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K")):
        fitted[block] = min(config[block], max(16, triton.next_power_of_2(shape[dim])))
    if fitted["BLOCK_M"] * fitted["BLOCK_N"] < 128 * 128:
        fitted["num_warps"] = min(fitted["num_warps"], 4)
    return fitted


def _grouped_default(shape: Shape, dtype: torch.dtype) -> dict:
    # 128x128x64 with one warpgroup and 4 stages: 128 KB of shared memory, 128 fp32 accumulators per
    # thread; a safe middle of the Hopper space rather than its best point.
    return _fit_tile(_config(128, 128, 64, 8, 4, 4), shape)


def _persistent_default(shape: Shape, dtype: torch.dtype) -> dict:
    # The persistent tutorial's fp16 tile (128x256x64, 8 warps), through TMA whenever the device and the
    # layout allow it (3 stages). Where the flattened configs are swept, the loop is flattened and the
    # epilogue subtiled, which buys a fourth stage: on H200 (session 18, docs/kernel-notes.md) that config
    # was the fastest of the sweep in 12 of 16 large-case sweeps on two machines and within 5 % in the
    # other four, where the earlier default (flattened, 3 stages) was 1-15 % behind the fastest in all 16.
    # Its swizzle groups 8 row-tiles: 4 was slower than 8 on the pipeline's basis (docs/kernel-notes.md, "Session
    # 30"); the A/B that had favoured 4 read no more than two arms of one config differ by.
    config = _fit_tile(_config(128, 256, 64, 8, 8, 3, TMA=1), shape)
    if _tma_prune_reason(config, shape, dtype, runtime.device_limits()):
        config["TMA"] = 0
    elif HAS_FLATTENED_RANGE and shape["M"] * shape["N"] > SMALL_TILE_MAX_OUTPUT:
        config.update(FLATTEN=1, EPILOGUE_SUBTILE=1, num_stages=4)
    return config


def _layout(shape: Shape) -> dict[str, tuple[tuple[int, int], int]]:
    """The strides :func:`make_inputs` and :func:`make_output` give each operand (fresh allocations, so
    aligned bases), for decisions made from the shape alone."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    a = (1, M) if shape.params.get("transA", 0) else (K, 1)
    b = (1, K) if shape.params.get("transB", 0) else (N, 1)
    return {"A": (a, 0), "B": (b, 0), "C": ((N, 1), 0)}


def _shared_memory_bytes(config: Mapping[str, Any], dtype: torch.dtype, c_tile: bool) -> int:
    # num_stages buffers of an A tile and a B tile; the TMA path also stages the C tile for its store
    # (half of it with the epilogue subtiled).
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    size = element_size(dtype)
    c_bn = bn // 2 if config.get("EPILOGUE_SUBTILE") else bn
    return config["num_stages"] * (bm * bk + bk * bn) * size + (bm * c_bn * size if c_tile else 0)


def _common_prune(config, shape: Shape, dtype: torch.dtype, limits, c_tile: bool) -> str | None:
    for block, dim in (("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K")):
        # A tile twice the padded problem or more is at least half padding: a smaller tile in the
        # space does the same work with less waste.
        if config[block] > max(16, triton.next_power_of_2(shape[dim])):
            return f"{block}={config[block]} is more than twice {dim}={shape[dim]}: over half the tile is padding"
    smem = _shared_memory_bytes(config, dtype, c_tile)
    if smem > limits["max_shared_mem_per_block"]:
        return (
            f"needs ~{smem // 1024} KB of shared memory ({config['num_stages']} stages"
            f"{' + C tile' if c_tile else ''}), the device has {limits['max_shared_mem_per_block'] // 1024} KB"
        )
    return None


def _tma_prune_reason(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    reason = tma_unsupported_reason(_layout(shape), element_size(dtype), limits)
    if reason:
        return f"TMA=1 impossible here: {reason}"
    for block in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        if config[block] > MAX_TMA_BOX:
            return f"TMA boxes are at most {MAX_TMA_BOX} elements per dimension, {block}={config[block]}"
    return None


def _warp_specialize_prune_reason(config) -> str | None:
    # Each rule is what the sm_90a builds showed (docs/experiments/results/matmul_ws_build-*.txt): a config
    # the compiler would silently build unspecialised is a duplicate of another config, not a new point.
    if not HAS_WARP_SPECIALIZE:
        return "WARP_SPECIALIZE=1 needs tl.range(..., warp_specialize=...), which this Triton lacks"
    if config.get("FLATTEN"):
        return "WARP_SPECIALIZE=1 with FLATTEN=1: the compiler ignores warp_specialize on a flattened loop nest"
    if config["num_warps"] != 4:
        return (
            f"WARP_SPECIALIZE=1 with num_warps={config['num_warps']}: the compiler specialises only a loop "
            "of one named warpgroup (num_warps=4) and adds the partitions itself"
        )
    if config.get("EPILOGUE_SUBTILE"):
        return "WARP_SPECIALIZE=1 with EPILOGUE_SUBTILE=1 fails to compile on triton 3.6"
    if config["num_stages"] > 4:
        return (
            f"WARP_SPECIALIZE=1 with num_stages={config['num_stages']}: the 5-stage build wrote NaN into part of C "
            "on H200 (triton 3.6.0, every case of two runs)"
        )
    if config["BLOCK_M"] < 128:
        return f"WARP_SPECIALIZE=1 with BLOCK_M={config['BLOCK_M']}: the 64-row tiles fail the compiler's pass"
    return None


def _grouped_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    return _common_prune(config, shape, dtype, limits, c_tile=False)


def _persistent_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    for key in ("FLATTEN", "EPILOGUE_SUBTILE", "WARP_SPECIALIZE"):
        if config.get(key) and not config["TMA"]:
            return f"{key}=1 is a TMA-path option (the tutorial's descriptor kernel); this config has TMA=0"
    if config.get("WARP_SPECIALIZE"):
        reason = _warp_specialize_prune_reason(config)
        if reason:
            return reason
    if config.get("EPILOGUE_SUBTILE") and config["BLOCK_N"] < 32:
        return f"EPILOGUE_SUBTILE=1 halves BLOCK_N={config['BLOCK_N']} below the 16 columns of a tl.dot tile"
    if config.get("FLATTEN") and not HAS_FLATTENED_RANGE:
        return "FLATTEN=1 needs tl.range(..., flatten=...), which this Triton lacks"
    if config["TMA"]:
        reason = _tma_prune_reason(config, shape, dtype, limits)
        if reason:
            return reason
    return _common_prune(config, shape, dtype, limits, c_tile=bool(config["TMA"]))


def _supports(shape: Shape, dtype: torch.dtype) -> str | None:
    M, N, K = shape["M"], shape["N"], shape["K"]
    if max(M * K, K * N, M * N) > MAX_OPERAND_ELEMENTS:
        return "an operand has more than 2^31 elements; the kernels use 32-bit offsets"
    return None


def _gluon_supports(shape: Shape, dtype: torch.dtype) -> str | None:
    if dtype not in (torch.float16, torch.bfloat16):
        return f"{dtype}: 16-bit operands only (the wgmma layouts and TMA boxes are built for 2-byte elements)"
    if shape.params.get("transA", 0):
        return "column-major A: the producer reads A's [64, BLOCK_K] boxes from a row-major A only"
    for name, n in (("K", shape["K"]), ("N", shape["N"])):
        if n * element_size(dtype) % 16:
            return f"{name} = {n}: rows of {n * element_size(dtype)} B are not a multiple of 16 B, which TMA needs"
    return _supports(shape, dtype) or gluon_mm.feature_reason()


def _gluon_configs(shape: Shape, dtype: torch.dtype) -> list[dict]:
    return [dict(c) for c in gluon_mm.CONFIGS]


def _gluon_default(shape: Shape, dtype: torch.dtype) -> dict:
    return dict(gluon_mm.CONFIGS[gluon_mm.DEFAULT])


def _gluon_prune(config, shape: Shape, dtype: torch.dtype, limits) -> str | None:
    size = element_size(dtype)
    bn, bk, stages = config["BLOCK_N"], config["BLOCK_K"], config["STAGES"]
    smem = stages * (gluon_mm.BLOCK_M * bk + bk * bn) * size + 2 * gluon_mm.HALF_M * bn * size
    if smem > limits["max_shared_mem_per_block"]:
        budget = limits["max_shared_mem_per_block"]
        return f"shared memory {smem} B ({stages} slots and the two output buffers) exceeds {budget} B"
    if bn > max(128, triton.next_power_of_2(shape["N"])):
        return f"BLOCK_N={bn} for N={shape['N']}: more than half of the tile would be padding"
    return None


def _prepare_gluon(inputs: Inputs, out: torch.Tensor, config, *, steps_short: int = 0) -> callable:
    a, b = inputs["a"], inputs["b"]
    reason = gluon_mm.feature_reason()
    if reason:
        raise ValueError(f"gluon_persistent cannot run here: {reason}")
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype or out.dtype != a.dtype:
        raise ValueError(f"gluon_persistent takes one 16-bit dtype; A {a.dtype}, B {b.dtype}, C {out.dtype}")
    if not (a.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"gluon_persistent needs A and C row-major; A strides {a.stride()}, C {out.stride()}")
    if not (b.is_contiguous() or b.T.is_contiguous()):
        raise ValueError(f"gluon_persistent needs B row- or column-major; B strides {b.stride()}")
    M, N, K = a.shape[0], b.shape[1], a.shape[1]
    config = config or _gluon_default(Shape({"M": M, "N": N, "K": K}, "launch"), a.dtype)
    tiles = {"BLOCK_M": gluon_mm.BLOCK_M, "BLOCK_N": config["BLOCK_N"]}
    grid = persistent_grid(M, N, tiles, runtime.device_limits()["num_sms"])
    return gluon_mm.launch(a, b, out, config, grid, steps_short=steps_short)


def _gluon_short_k(inputs: Inputs, out: torch.Tensor, config) -> callable:
    """Negative control of gluon_persistent: producer and consumers both leave out the last K step of every tile
    (BLOCK_K columns of A times BLOCK_K rows of B never accumulated)."""
    return _prepare_gluon(inputs, out, config, steps_short=1)


# --------------------------------------------------------------------------------------------------------
# Baselines, negative control, inputs, reference
# --------------------------------------------------------------------------------------------------------


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


def _torch_eager(inputs: Inputs, out, config):
    a, b = inputs["a"], inputs["b"]
    return lambda: _matmul(a, b)


def _torch_compile(inputs: Inputs, out, config):
    return compiled(_matmul, inputs["a"], inputs["b"])


def _k_off_by_one(inputs: Inputs, out: torch.Tensor, config) -> callable:
    """Negative control: the grouped kernel at its default config, launched with K - 1 as the reduction
    length (an off-by-one in the K bound), so the last column of A times the last row of B is never
    accumulated. Unlike dropping the K tail, this is wrong on every shape, exact multiples included."""
    a, b, M, N, K = _operands(inputs, out)
    shape = Shape({"M": M, "N": N, "K": K}, "negative control")
    return _launch_grouped(a, b, out, M, N, K - 1, _grouped_default(shape, a.dtype))


def make_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, seed: int) -> Inputs:
    """A ~ N(0, 1/K), B ~ N(0, 1), so every C element is ~N(0, 1) whatever K is and one tolerance fits all
    shapes. ``transA=1`` / ``transB=1`` return A / B as the transposed view of a contiguous [K, M] /
    [N, K] buffer (column-major; ``transB=1`` is nn.Linear's ``x @ W.T`` layout).

    One regime only: matmul is linear, so rescaling or shifting the inputs rescales the error with the
    result; a missing, doubled or misplaced term shows up at any scale.
    """
    g = generator(seed, device)
    M, N, K = shape["M"], shape["N"], shape["K"]
    a_scale = 1.0 / math.sqrt(K)
    if shape.params.get("transA", 0):
        a = randn((K, M), dtype, g, scale=a_scale).T
    else:
        a = randn((M, K), dtype, g, scale=a_scale)
    b = randn((N, K), dtype, g).T if shape.params.get("transB", 0) else randn((K, N), dtype, g)
    return {"a": a, "b": b}


def make_output(inputs: Inputs) -> torch.Tensor:
    a, b = inputs["a"], inputs["b"]
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def reference(inputs: Inputs) -> torch.Tensor:
    return inputs["a"] @ inputs["b"]


def _flops(shape: Shape) -> float:
    # one multiply and one add per (m, n, k)
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def _bytes(shape: Shape, dtype: torch.dtype) -> float:
    # read MK + KN elements; write MN elements
    M, N, K = shape["M"], shape["N"], shape["K"]
    return float(M * K + K * N + M * N) * element_size(dtype)


# |C| ~ 1 (see make_inputs). Error sources: (1) C is rounded once to the stored dtype: <= u |c| with
# u = 2^-11 (fp16), 2^-8 (bf16) -> rtol = 2u; (2) fp32 accumulation over K <= 8192 terms whose partial sums
# stay below ~4: <= K * 2^-24 * 4 ~ 2e-3 even if the tensor-core adder truncates every step (worst case,
# no averaging); (3) cuBLAS may reduce split-K partials in the stored dtype (torch allows reduced-
# precision reductions by default): one rounding of a partial below ~2, 2u absolute. atol = max of (2), (3).
_TOLERANCES = {
    torch.float16: Tolerance(
        2e-3,
        1e-3,
        "C rounded once to fp16 (rtol 2 x 2^-11); atol bounds fp32 accumulation "
        "of K <= 8192 terms of a unit-variance result (K x 2^-24 x 4) and an "
        "fp16 split-K reduction in cuBLAS (a partial below ~2 rounded once: "
        "2 x 2^-11)",
    ),
    torch.bfloat16: Tolerance(
        8e-3,
        8e-3,
        "C rounded once to bf16 (rtol 2 x 2^-8, which also holds the "
        "interpreter's truncating cast: < 1 ulp = 2^-7); atol covers cuBLAS "
        "reducing split-K partials below ~2 in bf16 (2 x 2^-8 = 7.8e-3), which "
        "exceeds the fp32 accumulation bound (2e-3)",
    ),
}


KERNEL = KernelSpec(
    name="matmul",
    description="C = A @ B for A [M, K], B [K, N] in fp16/bf16 with fp32 accumulation.",
    make_inputs=make_inputs,
    make_output=make_output,
    reference=reference,
    implementations=[
        Implementation(
            "triton_grouped",
            "triton",
            _prepare_grouped,
            description="one program per tile, 1-D grid in GROUP_M swizzle order, pointer loads "
            "with any strides, K tail masked (seed 002 §4.2)",
            configs=_grouped_configs,
            default_config=_grouped_default,
            prune=_grouped_prune,
            supports=_supports,
        ),
        Implementation(
            "triton_persistent",
            "triton",
            _prepare_persistent,
            description="min(tiles, SMs) programs looping over tiles in GROUP_M order; TMA=1: "
            "device-side tensor descriptors (sm_90+), TMA=0: pointer loads",
            configs=_persistent_configs,
            default_config=_persistent_default,
            prune=_persistent_prune,
            supports=_supports,
        ),
        Implementation(
            "gluon_persistent",
            "triton",
            _prepare_gluon,
            description="Gluon, cuBLAS's cooperative design: a TMA producer warp and two consumer warpgroups over a "
            "ring of slots, min(tiles, SMs) programs in GROUP_M order, C stored by TMA (sm_90)",
            configs=_gluon_configs,
            default_config=_gluon_default,
            prune=_gluon_prune,
            supports=_gluon_supports,
        ),
        Implementation(
            "torch", "eager", _torch_eager, description="torch.matmul (cuBLAS on the GPU)", writes_out=False
        ),
        Implementation(
            "torch_compile",
            "compile",
            _torch_compile,
            description="torch.compile(torch.matmul): Inductor, which calls the same extern mm "
            "unless max-autotune is on",
            writes_out=False,
        ),
    ],
    targets=[
        Target(
            "triton_grouped",
            "speedup",
            0.85,
            baseline="torch",
            dtypes=("float16", "bfloat16"),
            shapes={"M": (4096, None)},
            reason="large tensor-core products against cuBLAS: a tiled Triton matmul with grouped ordering",
        ),
        Target(
            "triton_persistent",
            "speedup",
            0.98,
            baseline="torch",
            dtypes=("float16", "bfloat16"),
            shapes={"M": (4096, None), "N": (4096, None), "K": (1000, None)},
            reason="the persistent TMA kernel exists to reach cuBLAS at large sizes: level with it (issue 24), "
            "where cuBLAS runs warp-specialised kernels on two-CTA clusters with 320-wide tiles at 8192 (not "
            "expressible in Triton: docs/kernel-notes.md)",
        ),
        Target(
            "gluon_persistent",
            "speedup",
            0.98,
            baseline="torch",
            dtypes=("float16", "bfloat16"),
            shapes={"M": (4096, None), "N": (4096, None), "K": (1000, None)},
            reason="issue 24's matmul goal for the kernel that writes cuBLAS's cooperative partitions out by hand "
            "(everything but the two-CTA cluster's multicast of the shared operand)",
        ),
    ],
    negative_controls=[
        Implementation(
            "gluon_short_k",
            "triton",
            _gluon_short_k,
            description="gluon_persistent whose producer and consumers both stop one K step short on every tile",
            configs=_gluon_configs,
            default_config=_gluon_default,
            supports=_gluon_supports,
            rejected_for="elements outside atol",
        ),
        Implementation(
            "k_off_by_one",
            "eager",
            _k_off_by_one,
            description="grouped kernel launched with K - 1: drops the last reduction term",
            rejected_for="elements outside atol",
        ),
    ],
    tolerances=_TOLERANCES,
    flops=_flops,
    bytes_moved=_bytes,
    shape_sets={
        "cpu": [
            shape_entry(
                "nothing a multiple of a tile: masked M/N edges and a K tail (65 = 64 + 1); fp16 rows of 65 "
                "elements are not 16-byte aligned, so the persistent default falls back to pointers",
                M=33,
                N=47,
                K=65,
            ),
            shape_entry(
                "both operands column-major (transposed views), edges not multiples of 32; aligned, so the "
                "persistent default reads them through transposed descriptors",
                M=48,
                N=40,
                K=72,
                transA=1,
                transB=1,
            ),
            shape_entry(
                "exact multiple of every tile in the space that fits: no masked element anywhere", M=64, N=64, K=64
            ),
        ],
        "gpu": [
            shape_entry("launch-bound: 4 tiles of 128x128, far fewer than 132 SMs", M=256, N=256, K=256),
            shape_entry(
                "the issue's target size (>= 0.85x cuBLAS, persistent >= 0.98x): 32 MB per operand at fp16",
                M=4096,
                N=4096,
                K=4096,
            ),
            shape_entry("the issue's large target: 128 MB per operand, far past the 60 MB L2", M=8192, N=8192, K=8192),
            shape_entry(
                "short K with a tail (1000 = 15 x 64 + 40), output-heavy. K % 16 != 0: Triton cannot prove "
                "A's rows 16-byte aligned, nor a K mask a multiple of the vector width, so a kernel that masks "
                "every K block loads single elements (no cp.async at all in the sm_90 PTX); the pointer path's "
                "unmasked main loop and stride hints restore 16-byte cp.async, the K hint 16-byte loads in the "
                "masked tail, and TMA is unaffected",
                M=8192,
                N=8192,
                K=1000,
            ),
            shape_entry(
                "nn.Linear layout x @ W.T: B column-major, read through a transposed descriptor / strided loads",
                M=4096,
                N=4096,
                K=4096,
                transB=1,
            ),
        ],
    },
)
