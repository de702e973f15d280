"""Matmul beyond the generic gate: many-tile masked edges, transposed operands on both paths, the
persistent tile loop, the GROUP_M swizzle, the TMA/pointer selection, pruning, and the negative control.

Everything runs on Triton's interpreter (4 nominal SMs), through the same correctness gate as the pipeline.
"""

import pytest
import torch
import triton
import triton.language as tl

import helpers
from helpers import H200_LIMITS as H200
from helpers import shape as _shape
from kernels import matmul as mm
from kernelscope import correctness, runtime

SPEC = mm.KERNEL
GROUPED = SPEC.implementation("triton_grouped")
PERSISTENT = SPEC.implementation("triton_persistent")
CONTROL = SPEC.implementation("k_off_by_one")
DTYPES = [torch.float16, torch.bfloat16]


def _gate(impl, shape, dtype, config, seeds=(0,)):
    assert impl.prune(config, shape, dtype, runtime.device_limits()) is None, "test config must be runnable"
    return helpers.gate(SPEC, impl, shape, dtype, config, seeds)


def _small(block: int, group_m: int, **extra: int) -> dict:
    return mm._config(block, block, block, group_m, 1, 2, **extra)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("impl,extra", [(GROUPED, {}), (PERSISTENT, {"TMA": 0})], ids=["grouped", "persistent"])
def test_masked_edges_over_many_tiles(impl, extra, dtype):
    # 33 x 47 x 65 with 16-wide tiles: 3 x 3 tiles, the last row and column tile 1 and 15 wide, five K steps
    # with a 1-wide tail, and GROUP_M=2 over 3 row tiles leaves a short last group.
    shape = _shape(M=33, N=47, K=65)
    config = _small(16, 2, **extra)
    assert mm._num_tiles(33, 47, config) == 9 and 65 % 16 == 1
    result = _gate(impl, shape, dtype, config)
    assert result["status"] == "pass", result["failure"]


@pytest.mark.parametrize("impl,extra", [(GROUPED, {}), (PERSISTENT, {"TMA": 0})], ids=["grouped", "persistent"])
@pytest.mark.parametrize("K", [5, 40], ids=["tail_only", "stride_40"])
def test_k_tail_alone_and_hinted_strides(impl, extra, K):
    # K=5 < BLOCK_K=16: the unmasked main loop runs zero times and the tail block alone sums the 5 terms.
    # K=40: two full blocks and an 8-wide tail; A's row stride 40 is promised to the compiler as a
    # multiple of 8 (ALIGN_AM=8), the rewrite that gives K=1000 its 16-byte loads.
    shape = _shape(M=24, N=20, K=K)
    inputs = SPEC.make_inputs(shape, torch.float16, runtime.device(), 0)
    assert mm._alignments(inputs["a"], inputs["b"], K)["ALIGN_AM"] == {5: 1, 40: 8}[K]
    assert mm._alignments(inputs["a"], inputs["b"], K)["ALIGN_K"] == {5: 1, 40: 8}[K]
    result = _gate(impl, shape, torch.float16, _small(16, 2, **extra), seeds=(0, 1))
    assert result["status"] == "pass", result["failure"]


@pytest.mark.parametrize("stride,expected", [(0, 1), (1, 1), (6, 2), (40, 8), (1000, 8), (4096, 16), (48, 16)])
def test_stride_alignment_is_the_largest_power_of_two_divisor_up_to_16(stride, expected):
    assert mm.stride_alignment(stride) == expected
    assert stride % expected == 0


@pytest.mark.parametrize("trans_a,trans_b", [(1, 0), (0, 1), (1, 1)], ids=["A_T", "B_T", "both_T"])
@pytest.mark.parametrize(
    "impl,extra",
    [(GROUPED, {}), (PERSISTENT, {"TMA": 0}), (PERSISTENT, {"TMA": 1})],
    ids=["grouped", "persistent_pointers", "persistent_tma"],
)
def test_transposed_operands(impl, extra, trans_a, trans_b):
    # Edges not multiples of 32 and a K tail (72 = 2 x 32 + 8), operands given as transposed views.
    shape = _shape(M=48, N=40, K=72, transA=trans_a, transB=trans_b)
    inputs = SPEC.make_inputs(shape, torch.float16, runtime.device(), 0)
    assert (inputs["a"].stride(0) == 1) == bool(trans_a) and (inputs["b"].stride(0) == 1) == bool(trans_b)
    result = _gate(impl, shape, torch.float16, _small(32, 4, **extra))
    assert result["status"] == "pass", result["failure"]


@pytest.mark.parametrize("tma", [0, 1])
def test_persistent_programs_loop_over_more_tiles_than_programs(tma):
    shape = _shape(M=64, N=64, K=64)
    config = _small(16, 2, TMA=tma)
    (programs,) = mm.persistent_grid(64, 64, config, runtime.device_limits()["num_sms"])
    tiles = mm._num_tiles(64, 64, config)
    assert (programs, tiles) == (4, 16)  # each program computes 4 tiles
    # NaN-poisoned output: a tile no program reached would fail here
    result = _gate(PERSISTENT, shape, torch.float16, config)
    assert result["status"] == "pass", result["failure"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "extra",
    [{"FLATTEN": 1}, {"EPILOGUE_SUBTILE": 1}, {"FLATTEN": 1, "EPILOGUE_SUBTILE": 1}],
    ids=["flatten", "subtile", "both"],
)
def test_persistent_tutorial_options_store_every_tile_where_it_belongs(extra, dtype):
    """The flattened nest stores each tile from its own counter, one tile behind the loads, and the subtiled
    epilogue stores two halves: over 3 x 3 tiles of ragged edges and a K tail, with fewer programs than
    tiles (each program stores several), a tile stored at another tile's place or a half stored twice
    leaves NaN or wrong values in the poisoned output."""
    shape = _shape(M=80, N=96, K=72)
    config = mm._config(32, 32, 32, 2, 1, 2, TMA=1, **extra)
    (programs,) = mm.persistent_grid(80, 96, config, runtime.device_limits()["num_sms"])
    assert mm._num_tiles(80, 96, config) == 9 and programs < 9
    result = _gate(PERSISTENT, shape, dtype, config, seeds=(0, 1))
    assert result["status"] == "pass", result["failure"]


def test_persistent_tutorial_options_are_pruned_where_they_cannot_apply():
    shape = _shape(M=4096, N=4096, K=4096)
    limits = {**H200, "interpreter": False}
    pointer = mm._config(128, 256, 64, 8, 8, 3, TMA=0, FLATTEN=1)
    assert "TMA-path option" in PERSISTENT.prune(pointer, shape, torch.float16, limits)
    narrow = mm._config(128, 16, 64, 8, 4, 3, TMA=1, EPILOGUE_SUBTILE=1)
    assert "halves BLOCK_N=16" in PERSISTENT.prune(narrow, shape, torch.float16, limits)
    # the subtiled epilogue is what lets the 128x256 tile have a fourth stage within 227 KB
    four = mm._config(128, 256, 64, 8, 8, 4, TMA=1, FLATTEN=1)
    assert "shared memory" in PERSISTENT.prune(four, shape, torch.float16, limits)
    assert PERSISTENT.prune({**four, "EPILOGUE_SUBTILE": 1}, shape, torch.float16, limits) is None
    configs = mm._persistent_configs(shape, torch.float16)
    assert sum(1 for c in configs if c.get("FLATTEN")) == len(mm._PERSISTENT_FLATTENED_TILES) == 4


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_warp_specialized_config_stores_every_tile_where_it_belongs(dtype):
    """The interpreter runs the warp-specialised loop as a plain loop, so this checks the kernel's code at that
    config (one-warpgroup 128-row tiles, several tiles a program, ragged edges, a K tail); what the compiler
    builds from it is checked offline below."""
    shape = _shape(M=300, N=144, K=72)
    config = mm._config(128, 128, 32, 2, 4, 2, TMA=1, WARP_SPECIALIZE=1)
    (programs,) = mm.persistent_grid(300, 144, config, runtime.device_limits()["num_sms"])
    assert mm._num_tiles(300, 144, config) == 6 and programs < 6
    result = _gate(PERSISTENT, shape, dtype, config, seeds=(0, 1))
    assert result["status"] == "pass", result["failure"]


def test_warp_specialization_is_pruned_where_the_compiler_ignores_or_refuses_it():
    shape = _shape(M=8192, N=8192, K=1000)
    limits = {**H200, "interpreter": False}
    ws = mm._config(128, 256, 64, 8, 4, 3, TMA=1, WARP_SPECIALIZE=1)
    assert PERSISTENT.prune(ws, shape, torch.float16, limits) is None
    cases = [
        ({"TMA": 0}, "TMA-path option"),
        ({"FLATTEN": 1}, "flattened loop nest"),
        ({"num_warps": 8}, "num_warps=8"),
        ({"EPILOGUE_SUBTILE": 1}, "fails to compile on triton 3.6"),
        ({"BLOCK_M": 64}, "BLOCK_M=64"),
        ({"BLOCK_N": 128, "num_stages": 5}, "num_stages=5"),
    ]
    for change, reason in cases:
        assert reason in PERSISTENT.prune({**ws, **change}, shape, torch.float16, limits), change
    configs = mm._persistent_configs(shape, torch.float16)
    swept = [c for c in configs if c.get("WARP_SPECIALIZE")]
    assert len(swept) == len(mm._PERSISTENT_WS_TILES)
    assert all(PERSISTENT.prune(c, shape, torch.float16, limits) is None for c in swept)
    # small problems (one wave of tiles or less) sweep no specialised config
    assert not any(c.get("WARP_SPECIALIZE") for c in mm._persistent_configs(_shape(M=256, N=256, K=256), torch.float16))


_SM90_WARP_SPECIALIZE = r"""
import json, sys
try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton
except ImportError as e:
    print(json.dumps({"unavailable": f"no offline compiler: {e}"})); sys.exit()
from kernels import matmul as mm
sig = dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*fp16")
sig |= dict.fromkeys(("M", "N", "K", *(f"stride_{s}" for s in ("am", "ak", "bk", "bn", "cm", "cn"))), "i32")
out = []
for config in json.loads(sys.argv[1]):
    const = {k: config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    const |= dict(USE_TMA=True, A_COL_MAJOR=False, B_COL_MAJOR=False, DOT_IN_FP32=False, ALIGN_AM=8, ALIGN_AK=1,
                  ALIGN_BK=16, ALIGN_BN=1, ALIGN_K=8, FLATTEN=bool(config.get("FLATTEN", 0)),
                  EPILOGUE_SUBTILE=False, WARP_SPECIALIZE=bool(config.get("WARP_SPECIALIZE", 0)))
    sig_all = sig | dict.fromkeys(const, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 6, 9, 11)}
    k = triton.compile(ASTSource(fn=mm._matmul_persistent_kernel, signature=sig_all, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": config["num_warps"], "num_stages": config["num_stages"]})
    out.append({"warp_specialize": k.asm["ttgir"].count("ttg.warp_specialize("),
                "setmaxnreg": k.asm["ptx"].count("setmaxnreg")})
print(json.dumps({"builds": out}))
"""


def test_warp_specialization_compiles_to_partitions_only_where_the_prune_rules_allow_it():
    """Offline sm_90a builds at 8192 x 8192 x 1000 (fp16): the swept config becomes a ``ttg.warp_specialize`` op
    with registers rebalanced between its partitions; the same tile with 8 warps or a flattened loop is built
    unspecialised, which is why the prune rules refuse those (a duplicate of an unspecialised config)."""
    ws = mm._config(128, 128, 64, 8, 4, 3, TMA=1, WARP_SPECIALIZE=1)
    builds = helpers.offline_sm90(_SM90_WARP_SPECIALIZE, [ws, {**ws, "num_warps": 8}, {**ws, "FLATTEN": 1}])["builds"]
    assert builds[0]["warp_specialize"] == 1 and builds[0]["setmaxnreg"] > 0, builds
    assert [b["warp_specialize"] for b in builds[1:]] == [0, 0], builds


@triton.jit
def _swizzle_probe(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    tile_id = tl.program_id(0)
    pid_m, pid_n = mm._tile_coordinates(tile_id, num_pid_m, num_pid_n, GROUP_M)
    tl.store(out_ptr + 2 * tile_id, pid_m)
    tl.store(out_ptr + 2 * tile_id + 1, pid_n)


@pytest.mark.parametrize("num_pid_m,num_pid_n,group_m", [(5, 3, 2), (4, 4, 8), (7, 2, 3)])
def test_group_swizzle_is_a_permutation_in_column_groups(num_pid_m, num_pid_n, group_m):
    tiles = num_pid_m * num_pid_n
    out = torch.full((tiles, 2), -1, dtype=torch.int32)
    _swizzle_probe[(tiles,)](out, num_pid_m, num_pid_n, GROUP_M=group_m)
    coords = [tuple(row) for row in out.tolist()]
    assert sorted(coords) == [(m, n) for m in range(num_pid_m) for n in range(num_pid_n)]
    # The first group covers row tiles 0..GROUP_M-1, walking down each column before the next one.
    first_rows = min(group_m, num_pid_m)
    head = coords[: first_rows * num_pid_n]
    assert head == [(m, n) for n in range(num_pid_n) for m in range(first_rows)]


@pytest.mark.parametrize(
    "operands,elem_bytes,limits,has_descriptors,expected",
    [
        ({"A": ((64, 1), 0), "B": ((32, 1), 256)}, 2, H200, True, None),
        ({"A": ((1, 48), 0)}, 2, H200, True, None),  # column-major: described through its transpose
        ({"A": ((65, 1), 0)}, 2, H200, True, "not a multiple of 16 bytes"),  # fp16 rows of 65 elements
        ({"A": ((65, 1), 0)}, 4, H200, True, "not a multiple of 16 bytes"),
        ({"A": ((64, 1), 2)}, 2, H200, True, "16-byte aligned"),
        ({"A": ((128, 2), 0)}, 2, H200, True, "no unit stride"),
        ({"A": ((64, 1), 0)}, 2, {**H200, "capability": (8, 0)}, True, "compute capability"),
        ({"A": ((64, 1), 0)}, 2, {**H200, "capability": (0, 0), "interpreter": True}, True, None),
        ({"A": ((64, 1), 0)}, 2, H200, False, "tl.make_tensor_descriptor"),
    ],
    ids=[
        "row_major",
        "col_major",
        "odd_rows_fp16",
        "odd_rows_fp32",
        "misaligned_base",
        "no_unit_stride",
        "ampere",
        "interpreter",
        "old_triton",
    ],
)
def test_tma_feature_check(operands, elem_bytes, limits, has_descriptors, expected):
    reason = mm.tma_unsupported_reason(operands, elem_bytes, limits, has_descriptors=has_descriptors)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_tma_selection_from_shape_and_device(monkeypatch):
    fp16 = torch.float16
    odd, aligned = _shape(M=33, N=47, K=65), _shape(M=48, N=40, K=72, transA=1, transB=1)
    assert PERSISTENT.default_config(odd, fp16)["TMA"] == 0
    assert PERSISTENT.default_config(aligned, fp16)["TMA"] == 1
    assert "TMA=1 impossible" in PERSISTENT.prune(_small(16, 2, TMA=1), odd, fp16, H200)
    assert PERSISTENT.prune(_small(16, 2, TMA=0), odd, fp16, H200) is None
    gpu = _shape(M=4096, N=4096, K=4096)
    assert PERSISTENT.prune(mm._config(128, 256, 64, 8, 8, 3, TMA=1), gpu, fp16, {**H200, "capability": (8, 0)})
    monkeypatch.setattr(runtime, "device_limits", lambda: {**H200, "capability": (8, 0)})
    assert PERSISTENT.default_config(gpu, fp16)["TMA"] == 0
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    assert PERSISTENT.default_config(gpu, fp16)["TMA"] == 1


def test_persistent_default_flattens_the_tile_loop_where_the_flattened_configs_are_swept(monkeypatch):
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    big, small = _shape(M=4096, N=4096, K=4096), _shape(M=512, N=512, K=512)
    flattened = PERSISTENT.default_config(big, torch.float16)
    if mm.HAS_FLATTENED_RANGE:  # flattened, the epilogue subtiled and a fourth stage in the saved shared memory
        assert (flattened["FLATTEN"], flattened["EPILOGUE_SUBTILE"], flattened["num_stages"]) == (1, 1, 4)
        assert flattened["GROUP_M"] == 8  # the narrower swizzle lost on the pipeline's basis (kernel-notes, session 30)
        assert flattened in PERSISTENT.configs(big, torch.float16)
    else:
        assert "FLATTEN" not in flattened and flattened["num_stages"] == 3
    plain = PERSISTENT.default_config(small, torch.float16)
    assert "FLATTEN" not in plain and "EPILOGUE_SUBTILE" not in plain and plain["num_stages"] == 3
    monkeypatch.setattr(runtime, "device_limits", lambda: {**H200, "capability": (8, 0)})  # no TMA: no FLATTEN
    assert "FLATTEN" not in PERSISTENT.default_config(big, torch.float16)
    monkeypatch.setattr(runtime, "device_limits", lambda: H200)
    default = PERSISTENT.default_config(big, torch.float16)
    assert PERSISTENT.prune(default, big, torch.float16, H200) is None  # the sweep times it
    assert sum(c == default for c in PERSISTENT.configs(big, torch.float16)) <= 1


def test_prepare_refuses_tma_on_a_misaligned_base_and_pointers_handle_it():
    M = N = K = 32
    g = torch.Generator().manual_seed(0)
    flat = torch.randn(M * K + 1, generator=g).to(torch.float16)
    a = flat[1:].view(M, K)  # base 2 bytes past an aligned allocation
    b = torch.randn(K, N, generator=g).to(torch.float16)
    inputs = {"a": a, "b": b}
    with pytest.raises(ValueError, match="16-byte aligned"):
        PERSISTENT.prepare(inputs, SPEC.make_output(inputs), _small(16, 2, TMA=1))
    out = PERSISTENT.prepare(inputs, SPEC.make_output(inputs).fill_(float("nan")), _small(16, 2, TMA=0))()
    expected = correctness.reference_for(SPEC, inputs)
    tol = SPEC.tolerance(torch.float16)
    assert correctness.compare(out, expected, tol.atol, tol.rtol)["ok"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_negative_control_rejected_without_a_k_tail(dtype):
    # The hardest CPU case for it: K = 64 is an exact multiple of every tile, so only the off-by-one
    # bound (not a tail mask) can make it wrong. Its error must clear the tolerance by a wide margin.
    shape = _shape(M=64, N=64, K=64)
    result = correctness.check_implementation(SPEC, CONTROL, shape, dtype, (0, 1), {})
    assert result["ok"] is False and "outside" in result["failure"]
    assert result["max_abs_err"] > 20 * SPEC.tolerance(dtype).atol


def test_prune_shared_memory_and_oversized_tiles():
    fp16, big = torch.float16, _shape(M=4096, N=4096, K=4096)
    # 4 stages x (256x64 + 64x256) x 2 B = 256 KB > 227 KB
    assert "shared memory" in GROUPED.prune(mm._config(256, 256, 64, 8, 8, 4), big, fp16, H200)
    # 128x256x64 s4: 192 KB of operand stages fits, but the TMA path also stages the 64 KB C tile
    assert GROUPED.prune(mm._config(128, 256, 64, 8, 8, 4), big, fp16, H200) is None
    assert "C tile" in PERSISTENT.prune(mm._config(128, 256, 64, 8, 8, 4, TMA=1), big, fp16, H200)
    assert "padding" in GROUPED.prune(mm._config(128, 128, 64, 8, 4, 4), _shape(M=33, N=300, K=300), fp16, H200)
    assert "at most 256" in PERSISTENT.prune(mm._config(512, 64, 32, 8, 8, 2, TMA=1), big, fp16, H200)


@pytest.mark.parametrize("impl", [GROUPED, PERSISTENT], ids=["grouped", "persistent"])
def test_config_spaces_and_defaults(impl):
    for shape in SPEC.shape_sets["gpu"]:
        for dtype in DTYPES:
            configs = impl.configs(shape, dtype)
            default = impl.default_config(shape, dtype)
            assert len(configs) <= 16
            assert impl.prune(default, shape, dtype, H200) is None
            assert default in configs  # the sweep then times exactly the declared space
    for shape in SPEC.shape_sets["cpu"]:
        default = impl.default_config(shape, torch.float16)
        # interpreter cost grows with the tile: the default never pads a dimension past the next power of two
        for block, dim in (("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K")):
            assert 16 <= default[block] <= max(16, triton.next_power_of_2(shape[dim]))
        assert impl.prune(default, shape, torch.float16, runtime.device_limits()) is None


def test_work_and_traffic_model():
    shape = _shape(M=8192, N=8192, K=1000)
    assert SPEC.flops(shape) == 2 * 8192 * 8192 * 1000
    assert SPEC.bytes_moved(shape, torch.bfloat16) == 2 * (8192 * 1000 + 1000 * 8192 + 8192 * 8192)


def test_the_tma_allocator_is_set_in_the_launching_thread(monkeypatch):
    """A sweep prepares (and compiles) each config in a worker thread and launches it in the main thread;
    triton.set_allocator is a ContextVar read at launch, so the closure must set it where it launches (set
    at prepare time instead, every TMA config of every sweep failed with 'no allocator was set')."""
    import threading

    seen = {}
    monkeypatch.setattr(mm, "tma_unsupported_reason", lambda *a, **k: None)
    monkeypatch.setattr(mm.triton, "set_allocator", lambda alloc: seen.setdefault("set_in", threading.get_ident()))

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **meta: seen.setdefault("launched_in", threading.get_ident())

    monkeypatch.setattr(mm, "_matmul_persistent_kernel", Kernel())
    shape = _shape(M=64, N=64, K=64)
    inputs = SPEC.make_inputs(shape, torch.float16, "cpu", 0)
    config = {**mm._persistent_default(shape, torch.float16), "TMA": 1}
    prepared = {}
    worker = threading.Thread(
        target=lambda: prepared.setdefault("fn", PERSISTENT.prepare(inputs, SPEC.make_output(inputs), config))
    )
    worker.start()
    worker.join()
    assert "set_in" not in seen  # nothing set in the worker, where no launch happens
    prepared["fn"]()
    assert seen["set_in"] == seen["launched_in"] == threading.get_ident()
