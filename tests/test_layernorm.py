"""layernorm beyond the generic gate: single-element and constant rows, the looped variant over many
chunks, the invariants' sensitivity, and why the variance is taken of centred values."""

import math

import pytest
import torch

from kernels import layernorm
from kernelscope import correctness
from kernelscope.spec import Implementation, Shape

SPEC = layernorm.KERNEL
ROW = SPEC.implementation("triton_row")
LOOPED = SPEC.implementation("triton_looped")
CPU = torch.device("cpu")
SEEDS = (0, 1, 2)


def _config(impl, shape, dtype):
    return impl.default_config(shape, dtype)


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("impl", (ROW, LOOPED), ids=lambda i: i.name)
def test_single_element_rows(impl, dtype):
    # N = 1: the variance is 0, x - mean is 0 and y must be the bias (eps keeps rstd finite).
    # Not in the CPU shape set: there E[x^2] - E[x]^2 is exactly 0 too, so the one-pass control is
    # (rightly) accepted. (torch's CPU fp16 layer_norm misses by ~5e-4 here on the offset rows: x - mean
    # is not 0 in its arithmetic, and rstd = 1/sqrt(eps) = 316 amplifies it.)
    shape = Shape({"M": 4, "N": 1}, "test")
    record = correctness.check_implementation(SPEC, impl, shape, dtype, SEEDS, impl.default_config(shape, dtype))
    assert record["status"] == "pass", record["failure"]


def test_no_eps_gives_nan_on_single_element_rows():
    record = correctness.check_implementation(
        SPEC, SPEC.implementation("no_eps"), Shape({"M": 4, "N": 1}, "x"), torch.float32, (0,)
    )
    assert record["status"] == "fail"
    assert "non-finite" in record["failure"]


@pytest.mark.parametrize("impl", (ROW, LOOPED), ids=lambda i: i.name)
def test_constant_rows_give_the_bias(impl):
    shape = Shape({"M": 3, "N": 100}, "test")
    inputs = SPEC.make_inputs(shape, torch.float32, CPU, seed=0)
    inputs["x"] = torch.full((3, 100), 7.25)
    out = correctness.run_poisoned(impl, SPEC, inputs, impl.default_config(shape, torch.float32), math.nan)
    assert torch.equal(out, inputs["bias"].expand(3, 100))


@pytest.mark.parametrize("dtype", (torch.float16, torch.float32))
@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_looped_variant_over_many_chunks(shape, dtype):
    # BLOCK_N = 16 makes every CPU row span several chunks with a partial last one (5 -> 1 chunk, 70 -> 5,
    # 129 -> 9 with a 1-element tail).
    record = correctness.check_implementation(SPEC, LOOPED, shape, dtype, SEEDS, {"BLOCK_N": 16, "num_warps": 1})
    assert record["status"] == "pass", record["failure"]


def test_defaults_are_in_the_config_space_and_survive_pruning_on_gpu_shapes():
    for shape in SPEC.shape_sets["gpu"]:
        for impl in (ROW, LOOPED):
            if impl.unsupported_reason(shape, torch.float16):
                continue
            default = impl.default_config(shape, torch.float16)
            assert default in impl.configs(shape, torch.float16), (impl.name, shape.id)
            assert impl.prune(default, shape, torch.float16, {}) is None, (impl.name, shape.id)


def test_row_variant_declines_rows_wider_than_its_register_block_and_looped_takes_them():
    wide = Shape({"M": 2, "N": layernorm.MAX_ROW_BLOCK + 1}, "x")
    assert ROW.unsupported_reason(wide, torch.float16)
    assert LOOPED.unsupported_reason(wide, torch.float16) is None


def _eager(name, fn):
    return Implementation(
        name,
        "eager",
        lambda inputs, out, config: lambda: fn(inputs["x"], inputs["weight"], inputs["bias"]),
        writes_out=False,
    )


def _uncentred_output(x, w, b):
    # correct statistics, but normalises x instead of x - mean
    xf = x.float()
    var = xf.var(dim=-1, unbiased=False, keepdim=True)
    return (xf * torch.rsqrt(var + layernorm.EPS) * w.float() + b.float()).to(x.dtype)


def test_invariants_are_live():
    shape = Shape({"M": 8, "N": 64}, "test")
    limit = layernorm._moment_limit(torch.float16)
    # regime 0: the uncentred output's rows keep their mean / std, far from 0
    broken = correctness.check_implementation(SPEC, _eager("uncentred", _uncentred_output), shape, torch.float16, (0,))
    assert broken["normalised_mean_error"] > 10 * limit
    # regime 2 (var = eps / 10): without eps the normalised variance is 1, not 1/11
    no_eps = correctness.check_implementation(SPEC, SPEC.implementation("no_eps"), shape, torch.float16, (2,))
    assert no_eps["normalised_variance_error"] > 10 * limit
    ok = correctness.check_implementation(SPEC, ROW, shape, torch.float16, SEEDS, _config(ROW, shape, torch.float16))
    assert ok["normalised_mean_error"] <= limit and ok["normalised_variance_error"] <= limit


def _one_pass_fp32(x, w, b):
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf * xf).mean(dim=-1, keepdim=True) - mean * mean
    return ((xf - mean) * torch.rsqrt(var + layernorm.EPS) * w.float() + b.float()).to(x.dtype)


def test_centred_variance_beats_one_pass_on_offset_rows():
    # Regime 1 (mean offset 32 std): in fp32 the one-pass E[x^2] - E[x]^2 loses ~10 bits more than
    # the kernels' mean-then-centred-variance.
    shape = Shape({"M": 32, "N": 256}, "test")
    two_pass = correctness.check_implementation(
        SPEC, ROW, shape, torch.float32, (1,), _config(ROW, shape, torch.float32)
    )
    one_pass = correctness.check_implementation(SPEC, _eager("one_pass", _one_pass_fp32), shape, torch.float32, (1,))
    assert two_pass["status"] == "pass", two_pass["failure"]
    assert one_pass["max_abs_err"] > 10 * two_pass["max_abs_err"]


def test_traffic_model():
    shape = Shape({"M": 16384, "N": 4096}, "x")
    assert SPEC.bytes_moved(shape, torch.float16) == 2 * (2 * 16384 * 4096 + 2 * 4096)
    assert SPEC.bytes_moved(shape, torch.float16) >= 256 * 2**20


# --- rows split at 16-byte boundaries (aligned=1); the split itself is checked in tests/test_softmax.py ----


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize(
    ("n_rows", "n_cols", "stride"),
    [(9, 1, 1), (9, 3, 3), (9, 129, 129), (5, 24, 24), (5, 70, 78)],
    ids=["one-element", "under-16-bytes", "odd", "rows-on-boundaries", "strided"],
)
def test_split_rows_pass_the_gate(n_rows, n_cols, stride, dtype):
    shape = Shape({"M": n_rows, "N": n_cols, "stride": stride}, "test")
    config = ROW.default_config(shape, dtype)
    assert config["aligned"] == 1
    record = correctness.check_implementation(SPEC, ROW, shape, dtype, SEEDS, config)
    assert record["status"] == "pass", record["failure"]


def test_split_is_offered_only_where_triton_cannot_prove_rows_aligned():
    odd, known = Shape({"M": 64, "N": 4097}, "test"), Shape({"M": 64, "N": 4096}, "test")
    assert ROW.default_config(odd, torch.float16) == {"num_warps": 16, "aligned": 1}
    assert len(ROW.configs(odd, torch.float16)) == 2 * len(ROW.configs(known, torch.float16))
    assert not any(c.get("aligned") for c in ROW.configs(known, torch.float16))
    assert "Triton specialises" in ROW.prune({"num_warps": 16, "aligned": 1}, known, torch.float16, {})


def test_aligned_no_tail_control_is_rejected_where_rows_have_no_tail_of_their_own():
    shape = Shape({"M": 5, "N": 24}, "test")  # 48-byte fp16 rows: aligned at both ends
    record = correctness.check_implementation(
        SPEC, SPEC.implementation("aligned_no_tail"), shape, torch.float16, SEEDS, {}
    )
    assert record["status"] == "fail" and "non-finite outputs where the reference is finite" in record["failure"]


def test_split_rows_compile_to_full_width_x_and_y_on_sm90():
    from test_softmax import sm90_memory_ops

    # 4097 in an 8192 block at 16 warps: 16 elements a thread. Split, x and y move 16 bytes an instruction;
    # weight and bias stay element by element (their columns start on a boundary only when the row does).
    sig = {f"{p}_ptr": "*fp16" for p in ("out", "x", "w", "b")} | {"N": "i32", "stride_xm": "i32", "stride_om": "i32"}
    sig |= {"eps": "fp32"} | dict.fromkeys(("BLOCK_N", "ALIGNED", "VEC", "KEEP_TAIL"), "constexpr")
    meta = {"BLOCK_N": 8192, "VEC": 8, "KEEP_TAIL": True}
    plain, split = sm90_memory_ops(
        [["kernels.layernorm", "_layernorm_row_kernel", sig, {**meta, "ALIGNED": a}, 16] for a in (0, 1)]
    )
    assert plain == {"ld.global.b16": 48, "st.global.b16": 16}
    assert split == {"ld.global.b16": 38, "ld.global.v4.b32": 2, "st.global.b16": 2, "st.global.v4.b32": 2}


# --- triton_split: a team of programs a row -------------------------------------------------------------------

SPLIT = SPEC.implementation("triton_split")


@pytest.fixture
def split_on_every_width(monkeypatch):
    # triton_split is only *run* on rows of N >= SPLIT_MIN_N (a cost policy); these tests check it on every width
    monkeypatch.setattr(layernorm, "SPLIT_MIN_N", 1)


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize(
    "config",
    [
        {"CHUNK": 16, "num_warps": 1, "programs_per_sm": 1},  # N = 129: 9 parts, the last one column wide
        {"CHUNK": 32, "num_warps": 1, "programs_per_sm": 2},
        {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 4},
    ],
    ids=lambda c: f"chunk{c['CHUNK']}",
)
@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_split_passes_the_gate_at_every_chunk(split_on_every_width, shape, config, dtype):
    record = correctness.check_implementation(SPEC, SPLIT, shape, dtype, SEEDS, config)
    assert record["status"] == "pass", record["failure"]


def test_split_combines_chunks_whose_statistics_differ(split_on_every_width):
    # Each 16-column chunk of a row sits at its own offset (0, 100, 200, ...), so chunk means are far from the
    # row's mean and most of the row's variance lies between chunks: only the exact combination (n_j (mean_j -
    # mean)^2 added to each chunk's M2) gives the row's variance, to fp32 rounding.
    n_rows, n_cols = 6, 80
    inputs = SPEC.make_inputs(Shape({"M": n_rows, "N": n_cols}, "t"), torch.float32, CPU, seed=0)
    inputs["x"] = inputs["x"] + 100.0 * (torch.arange(n_cols) // 16).to(torch.float32)
    out = correctness.run_poisoned(SPLIT, SPEC, inputs, {"CHUNK": 16, "num_warps": 1, "programs_per_sm": 2}, math.nan)
    expected = SPEC.reference({k: v.double() for k, v in inputs.items()})
    assert torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_split_restores_its_workspace_after_every_call(split_on_every_width):
    inputs = SPEC.make_inputs(Shape({"M": 5, "N": 129}, "t"), torch.float32, CPU, seed=1)
    out = SPEC.make_output(inputs)
    run = layernorm._prepare_split(inputs, out, {"CHUNK": 32, "num_warps": 1, "programs_per_sm": 2})
    first = run().clone()
    assert torch.isnan(run.workspace.stats).all() and (run.workspace.arrived == 0).all()
    assert torch.equal(run(), first)


@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_split_local_stats_control_is_rejected_on_every_cpu_shape(shape):
    # the control splits every gate row (N = 5 included) into 3 or more chunks, so none has the row's statistics
    control = next(c for c in SPEC.negative_controls if c.name == "split_local_stats")
    assert layernorm.split_parts(shape["N"], layernorm._local_stats_config(shape, torch.float32)["CHUNK"]) >= 3
    for dtype in SPEC.tolerances:
        record = correctness.check_implementation(SPEC, control, shape, dtype, SEEDS, {})
        assert record["status"] == "fail" and control.rejected_for in record["failure"], record["failure"]


def test_split_runs_only_on_rows_too_wide_for_one_program():
    assert SPLIT.supports(Shape({"M": 8192, "N": 4097}, "t"), torch.float16)
    assert SPLIT.supports(Shape({"M": 1024, "N": 65536}, "t"), torch.float16) is None


# --- triton_persistent: persistent programs over the rows of one alignment class -----------------------------

PERSISTENT = SPEC.implementation("triton_persistent")


def test_alignment_period_is_the_rows_after_which_row_starts_repeat():
    assert layernorm.alignment_period(4097, 2) == 8  # each 16-bit row starts 2 bytes further on
    assert layernorm.alignment_period(4097, 4) == 4
    assert layernorm.alignment_period(70, 2) == 4  # 140-byte rows
    assert layernorm.alignment_period(80, 2) == layernorm.alignment_period(4096, 4) == 1
    x = torch.empty(64, 4097, dtype=torch.float16)
    offsets = [(x[r].data_ptr() - x.data_ptr()) % 16 for r in range(64)]
    assert len(set(offsets[:8])) == 8 and offsets == offsets[:8] * 8


# Layouts of rows in alignment classes, for the kernels that split them by class (triton_persistent,
# triton_staged): one element, rows under 16 bytes, fewer rows than classes, many rows a class (and a program),
# rows strided past N.
CLASS_LAYOUTS = [(9, 1, 1), (9, 3, 3), (3, 5, 5), (37, 129, 129), (5, 70, 78)]
CLASS_LAYOUT_IDS = ["one-element", "under-16-bytes", "fewer-rows-than-classes", "many-rows-a-class", "strided"]


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize(
    "config",
    [{"num_warps": 4, "programs_per_sm": 8}, {"num_warps": 1, "programs_per_sm": 1}],
    ids=["default", "one-program-a-class"],
)
@pytest.mark.parametrize(("n_rows", "n_cols", "stride"), CLASS_LAYOUTS, ids=CLASS_LAYOUT_IDS)
def test_persistent_passes_the_gate(n_rows, n_cols, stride, config, dtype):
    # The interpreter's 4 "SMs": at 1 program an SM each class of 129-wide rows has one program walking 4-5
    # rows; 8 an SM give four a class. Every row of every class is checked (the output is poisoned).
    shape = Shape({"M": n_rows, "N": n_cols, "stride": stride}, "test")
    record = correctness.check_implementation(SPEC, PERSISTENT, shape, dtype, SEEDS, config)
    assert record["status"] == "pass", record["failure"]


def test_persistent_default_is_in_its_space_and_survives_pruning():
    shape = Shape({"M": 8192, "N": 4097}, "t")
    assert PERSISTENT.default_config(shape, torch.float16) == PERSISTENT.configs(shape, torch.float16)[0]
    kept = [c for c in PERSISTENT.configs(shape, torch.float16) if not PERSISTENT.prune(c, shape, torch.float16, {})]
    assert PERSISTENT.default_config(shape, torch.float16) in kept
    assert len(kept) == 3
    assert "spills" in PERSISTENT.prune({"num_warps": 1, "programs_per_sm": 8}, shape, torch.float16, {})


@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_classes_one_offset_control_is_rejected_on_every_cpu_shape(shape):
    control = next(c for c in SPEC.negative_controls if c.name == "classes_one_offset")
    for dtype in SPEC.tolerances:  # packed to row stride N, every CPU shape's rows fall in 2-8 classes
        assert layernorm.alignment_period(shape["N"], torch.finfo(dtype).bits // 8) >= 2
        record = correctness.check_implementation(SPEC, control, shape, dtype, SEEDS, {})
        assert record["status"] == "fail" and control.rejected_for in record["failure"], record["failure"]


def test_persistent_is_offered_only_where_triton_cannot_prove_rows_aligned():
    assert PERSISTENT.supports(Shape({"M": 8192, "N": 4097}, "t"), torch.float16) is None
    assert "Triton specialises" in PERSISTENT.supports(Shape({"M": 16384, "N": 4096}, "t"), torch.float16)
    assert PERSISTENT.supports(Shape({"M": 4, "N": 70, "stride": 80}, "t"), torch.float16)  # x, y differ by 20 B


def test_persistent_grid_is_whole_classes_and_never_more_than_resident():
    inputs = SPEC.make_inputs(Shape({"M": 37, "N": 129}, "t"), torch.float16, CPU, seed=0)
    calls = []

    class Recorder:
        def __getitem__(self, grid):
            calls.append(grid)
            return lambda *args, **meta: None

    original = layernorm._layernorm_classes_kernel
    layernorm._layernorm_classes_kernel = Recorder()
    try:
        layernorm._prepare_classes(
            inputs, SPEC.make_output(inputs), {"num_warps": 1, "programs_per_sm": 4, "num_stages": 1}
        )()
    finally:
        layernorm._layernorm_classes_kernel = original
    assert calls == [(16,)]  # 4 interpreter SMs x 4 programs: two programs for each of the 8 classes


def test_persistent_moves_x_and_y_16_bytes_at_a_time_on_sm90():
    from test_softmax import sm90_memory_ops

    # N = 4097 in 16 bits, 4096-wide body: at 4 warps 32 elements (four 16-byte vectors) of x a thread a row,
    # and of y; weight and bias lane by lane, as in triton_row (but once a program, not once a row).
    sig = {f"{p}_ptr": "*fp16" for p in ("out", "x", "w", "b")}
    sig |= dict.fromkeys(("n_rows", "N", "period", "stride_xm", "stride_om"), "i32") | {"eps": "fp32"}
    sig |= dict.fromkeys(("BLOCK_N", "VEC", "CLASS_ZERO_AFFINE"), "constexpr")
    [ops] = sm90_memory_ops(
        [["kernels.layernorm", "_layernorm_classes_kernel", sig, {"BLOCK_N": 4096, "VEC": 8}, 4, [0, 1, 2, 3]]]
    )
    assert ops.get("ld.global.v4.b32") == 4 and ops.get("st.global.v4.b32") == 4


# --- triton_staged: one program a row, each class's weight and bias staged at its body columns ---------------

STAGED = SPEC.implementation("triton_staged")


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("config", [{"num_warps": 1}, {"num_warps": 4}], ids=["1-warp", "4-warps"])
@pytest.mark.parametrize(("n_rows", "n_cols", "stride"), CLASS_LAYOUTS, ids=CLASS_LAYOUT_IDS)
def test_staged_passes_the_gate(n_rows, n_cols, stride, config, dtype):
    shape = Shape({"M": n_rows, "N": n_cols, "stride": stride}, "test")
    record = correctness.check_implementation(SPEC, STAGED, shape, dtype, SEEDS, config)
    assert record["status"] == "pass", record["failure"]


def test_staged_workspace_holds_each_class_weight_from_its_body_start():
    # 16-bit rows of 129: 8 classes, each row 2 bytes further on; class c's body starts at its first boundary.
    inputs = SPEC.make_inputs(Shape({"M": 37, "N": 129}, "t"), torch.float16, CPU, seed=0)
    x, w = inputs["x"], inputs["weight"]
    staged = []
    original = layernorm._stage_affine_kernel

    class Recorder:
        def __getitem__(self, grid):
            def launch(ws_w, ws_b, *args, **meta):
                original[grid](ws_w, ws_b, *args, **meta)
                staged.append((ws_w.clone(), meta["PITCH"]))

            return launch

    layernorm._stage_affine_kernel = Recorder()
    try:
        layernorm._prepare_staged(inputs, SPEC.make_output(inputs), {"num_warps": 1})()
    finally:
        layernorm._stage_affine_kernel = original
    [(ws_w, pitch)] = staged
    assert pitch == 128 and ws_w.numel() == 8 * 128
    for cls in range(8):
        head = (8 - (x[cls].data_ptr() % 16) // 2) % 8
        body = (129 - head) // 8 * 8
        assert torch.equal(ws_w[cls * pitch : cls * pitch + body], w[head : head + body]), cls


def test_staged_default_is_in_its_space_and_survives_pruning():
    for n, dtype, warps in ((4097, torch.float16, 4), (2049, torch.bfloat16, 2), (4097, torch.float32, 4)):
        shape = Shape({"M": 8192, "N": n}, "t")
        default = STAGED.default_config(shape, dtype)
        assert default == {"num_warps": warps} and default in STAGED.configs(shape, dtype)
        assert STAGED.prune(default, shape, dtype, {}) is None
    wide = Shape({"M": 8, "N": 65537}, "t")
    assert "spills" in STAGED.prune({"num_warps": 1}, wide, torch.float16, {})


@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_staged_one_offset_control_is_rejected_on_every_cpu_shape(shape):
    control = next(c for c in SPEC.negative_controls if c.name == "staged_one_offset")
    for dtype in SPEC.tolerances:
        assert layernorm.alignment_period(shape["N"], torch.finfo(dtype).bits // 8) >= 2
        record = correctness.check_implementation(SPEC, control, shape, dtype, SEEDS, {})
        assert record["status"] == "fail" and control.rejected_for in record["failure"], record["failure"]


def test_staged_is_offered_only_where_triton_cannot_prove_rows_aligned():
    assert STAGED.supports(Shape({"M": 8192, "N": 4097}, "t"), torch.float16) is None
    assert "Triton specialises" in STAGED.supports(Shape({"M": 16384, "N": 4096}, "t"), torch.float16)


def test_staged_moves_x_y_weight_and_bias_16_bytes_at_a_time_on_sm90():
    from test_softmax import sm90_memory_ops

    # N = 4097 in 16 bits, 4096-wide body at 4 warps: 32 elements a thread, four 16-byte vectors each of x,
    # staged weight, staged bias and y (triton_persistent's weight and bias: lane by lane, once a program).
    sig = {f"{p}": "*fp16" for p in ("out_ptr", "x_ptr", "w_ptr", "b_ptr", "ws_w", "ws_b")}
    sig |= dict.fromkeys(("N", "period", "stride_xm", "stride_om"), "i32") | {"eps": "fp32"}
    sig |= dict.fromkeys(("BLOCK_N", "PITCH", "VEC", "CLASS_ZERO_AFFINE"), "constexpr")
    [ops] = sm90_memory_ops(
        [
            [
                "kernels.layernorm",
                "_layernorm_staged_kernel",
                sig,
                {"BLOCK_N": 4096, "PITCH": 4096, "VEC": 8},
                4,
                [0, 1, 2, 3, 4, 5],
            ]
        ]
    )
    assert ops.get("ld.global.v4.b32") == 12 and ops.get("st.global.v4.b32") == 4, ops


# --- triton_online: two passes of BLOCK_N-wide chunks, statistics combined exactly -----------------------------

ONLINE = SPEC.implementation("triton_online")


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize(
    "config",
    [
        {"BLOCK_N": 16, "num_warps": 1, "programs_per_sm": 0, "l2_hints": 0},  # N = 129: 9 chunks, the last 1 wide
        {"BLOCK_N": 32, "num_warps": 1, "programs_per_sm": 1, "l2_hints": 1},  # 4 programs over every row
        {"BLOCK_N": 64, "num_warps": 2, "programs_per_sm": 2, "l2_hints": 1, "num_stages": 2},
    ],
    ids=["chunk16", "chunk32-persistent", "chunk64-pipelined"],
)
@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_online_passes_the_gate(shape, config, dtype):
    if config.get("num_stages", 1) > 1 and not layernorm.PIPELINED_RANGE:
        pytest.skip("this Triton has no tl.range(num_stages=)")
    record = correctness.check_implementation(SPEC, ONLINE, shape, dtype, SEEDS, config)
    assert record["status"] == "pass", record["failure"]


def test_online_combines_chunks_whose_statistics_differ():
    # As for triton_split: each 16-column chunk at its own offset, so most of the row's variance lies between chunks
    # and only the exact combination (the between-chunk term) gives it.
    n_rows, n_cols = 6, 80
    inputs = SPEC.make_inputs(Shape({"M": n_rows, "N": n_cols}, "t"), torch.float32, CPU, seed=0)
    inputs["x"] = inputs["x"] + 100.0 * (torch.arange(n_cols) // 16).to(torch.float32)
    config = {"BLOCK_N": 16, "num_warps": 1, "programs_per_sm": 1, "l2_hints": 0}
    out = correctness.run_poisoned(ONLINE, SPEC, inputs, config, math.nan)
    expected = SPEC.reference({k: v.double() for k, v in inputs.items()})
    assert torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_online_running_mean_does_not_round_at_the_row_offset_over_many_chunks():
    # 512 chunks of 8 columns on rows offset by 4096 std. The mean itself can only be held to ulp(4096) / 2 ~ 2.4e-4
    # std in fp32, whatever the kernel; what the chunking must not add is a rounding at that magnitude at every
    # chunk. The running mean is kept as an offset from the first chunk's mean (near 0), so the 512-chunk output
    # matches the one-chunk output to ~2e-5; a running mean kept at the offset (shift 0) is off by ~1.5e-3.
    inputs = SPEC.make_inputs(Shape({"M": 4, "N": 4096}, "t"), torch.float32, CPU, seed=3)
    inputs["x"] = torch.randn(4, 4096, generator=torch.Generator().manual_seed(3)) + 4096.0
    outs = [
        correctness.run_poisoned(
            ONLINE, SPEC, inputs, {"BLOCK_N": b, "num_warps": 1, "programs_per_sm": 0, "l2_hints": 0}, math.nan
        )
        for b in (8, 4096)
    ]
    assert (outs[0] - outs[1]).abs().max() < 5e-5


@pytest.mark.parametrize("shape", SPEC.shape_sets["cpu"], ids=lambda s: s.id)
def test_online_no_between_control_is_rejected_on_every_cpu_shape(shape):
    # its default config splits every gate row (N = 5 included) into 3 or more chunks, whose means differ
    control = next(c for c in SPEC.negative_controls if c.name == "online_no_between")
    config = layernorm._online_default(shape, torch.float32)
    assert math.ceil(shape["N"] / config["BLOCK_N"]) >= 3
    for dtype in SPEC.tolerances:
        record = correctness.check_implementation(SPEC, control, shape, dtype, SEEDS, config)
        assert record["status"] == "fail" and control.rejected_for in record["failure"], record["failure"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_online_no_between_control_is_rejected_on_the_wide_gpu_row(monkeypatch, dtype):
    # The GPU default splits N = 65536 into only 4 chunks: on rows with one mean the dropped term is ~4 / N of the
    # variance, inside bf16's tolerance (so the control passed on an H200, docs/kernel-notes.md "Session 24").
    # Regime 0's column ramp gives every chunk its own mean, so the control fails in every dtype.
    monkeypatch.setattr(layernorm, "device_limits", lambda: {"num_sms": 132})
    shape = Shape({"M": 2, "N": 65536}, "t")
    control = next(c for c in SPEC.negative_controls if c.name == "online_no_between")
    config = layernorm._online_default(shape, dtype)
    assert math.ceil(shape["N"] / config["BLOCK_N"]) == 4
    record = correctness.check_implementation(SPEC, control, shape, dtype, (0,), config)
    assert record["status"] == "fail" and control.rejected_for in record["failure"], record["failure"]
    # and the kernel itself passes on the same rows
    ok = correctness.check_implementation(SPEC, ONLINE, shape, dtype, (0,), config)
    assert ok["status"] == "pass", ok["failure"]


def test_online_default_is_persistent_with_hints_only_on_wide_rows(monkeypatch):
    monkeypatch.setattr(layernorm, "device_limits", lambda: {"num_sms": 132})
    wide = layernorm._online_default(Shape({"M": 1024, "N": 65536}, "t"), torch.float16)
    assert wide == {"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": 2, "l2_hints": 1}
    # 256 rows fit 2 programs on each of 132 SMs: a persistent grid would be one program a row anyway
    assert layernorm._online_default(Shape({"M": 256, "N": 65536}, "t"), torch.float16)["programs_per_sm"] == 0
    narrow = layernorm._online_default(Shape({"M": 16384, "N": 4096}, "t"), torch.float16)
    assert narrow["programs_per_sm"] == 0 and narrow["l2_hints"] == 0
    limits = {"num_sms": 132, "max_shared_mem_per_block": 232448}
    for shape in SPEC.shape_sets["gpu"]:
        for dtype in SPEC.tolerances:
            default = layernorm._online_default(shape, dtype)
            assert default in ONLINE.configs(shape, dtype), shape.id
            assert ONLINE.prune(default, shape, dtype, limits) is None, shape.id


def test_online_prunes_grids_that_repeat_a_smaller_launch_and_blocks_that_spill():
    limits = {"num_sms": 132, "max_shared_mem_per_block": 232448}
    few = Shape({"M": 256, "N": 65536}, "t")
    config = {"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": 2, "l2_hints": 1}
    assert "grid of all 256 rows" in ONLINE.prune(config, few, torch.float16, limits)
    assert ONLINE.prune({**config, "programs_per_sm": 1}, few, torch.float16, limits) is None
    assert "registers spill" in ONLINE.prune({**config, "BLOCK_N": 32768}, few, torch.float16, limits)
    assert (
        ONLINE.prune({**config, "BLOCK_N": 32768, "num_warps": 16, "programs_per_sm": 1}, few, torch.float16, limits)
        is None
    )


def test_online_reads_x_with_eviction_hints_and_16_bytes_at_a_time_on_sm90():
    from test_softmax import sm90_memory_ops

    # 1024 x 65536 fp16 at its default (16384 columns on 8 warps, 64 a thread): pass 1 loads x in eight 16-byte
    # vectors a thread, kept in L2 (evict_last); pass 2 loads x again (evict_first), weight and bias (plain) and
    # stores y (evict_first), all 16 bytes at a time.
    sig = {f"{p}_ptr": "*fp16" for p in ("out", "x", "w", "b")}
    sig |= dict.fromkeys(("n_rows", "N", "stride_xm", "stride_om"), "i32") | {"eps": "fp32"}
    sig |= dict.fromkeys(("BLOCK_N", "BETWEEN", "L2_HINTS", "NUM_STAGES"), "constexpr")
    meta = {"BLOCK_N": 16384, "BETWEEN": True, "L2_HINTS": True, "NUM_STAGES": 1}
    [ops] = sm90_memory_ops([["kernels.layernorm", "_layernorm_online_kernel", sig, meta, 8, [0, 1, 2, 3, 5, 6, 7]]])
    assert ops == {
        "ld.global.L1::evict_last.L2::cache_hint.v4.b32": 8,
        "ld.global.L1::evict_first.L2::cache_hint.v4.b32": 8,
        "ld.global.v4.b32": 16,
        "st.global.L1::evict_first.L2::cache_hint.v4.b32": 8,
    }


@pytest.mark.parametrize(
    "control,variant", [("classes_one_offset", "triton_persistent"), ("staged_one_offset", "triton_staged")]
)
def test_the_class_controls_sit_out_with_their_variant_where_rows_need_no_classes(control, variant):
    """On rows a multiple of 16 bytes (every GPU shape but the odd one) one alignment class holds every row, so the
    controls' one-offset bug is a no-op: they were accepted there, and the report called the gate too loose. Now they
    sit out there for the reason the variant they guard does (the gate then counts them neither way), and run
    wherever that variant runs, and on every CPU shape."""
    ctl, var = SPEC.implementation(control), SPEC.implementation(variant)
    for shape in SPEC.shape_sets["gpu"]:
        for dtype in SPEC.tolerances:
            why = ctl.unsupported_reason(shape, dtype)
            assert why == var.unsupported_reason(shape, dtype) or (
                why is None and var.unsupported_reason(shape, dtype) is None
            ), (shape.id, dtype)
    assert ctl.unsupported_reason(Shape({"M": 1024, "N": 65536}, "t"), torch.float16)
    assert ctl.unsupported_reason(Shape({"M": 8192, "N": 4097}, "t"), torch.float16) is None
    for shape in SPEC.shape_sets["cpu"]:
        assert ctl.unsupported_reason(shape, torch.float16) is None, shape.id
