"""Edge cases of the softmax variants beyond the generic gate (tests/test_kernels.py).

Every closeness check goes through ``kernelscope.correctness`` (fp64 reference, NaN-poisoned output,
repeat with another poison, inputs unchanged, row-sum invariant), so a pass here means what it means in
the pipeline. Shapes are tiny: the kernels run in Triton's interpreter.
"""

import functools
import math

import pytest
import torch
import triton
import triton.language as tl

import helpers
from helpers import H200_LIMITS as H200
from helpers import assert_pass, shape
from kernels import softmax
from kernelscope import correctness, heuristics, teams

SPEC = softmax.KERNEL
SEEDS = (0, 1, 2)  # one seed per input regime of make_inputs (N(0,1); +100 offset; wide spread)
TRITON = ("triton_row", "triton_persistent", "triton_online", "triton_split")
NUM_SMS = 4  # kernelscope.runtime.device_limits() under the interpreter


@pytest.fixture(autouse=True)
def split_on_every_width(monkeypatch):
    # triton_split is only *run* on wide rows (a cost policy, SPLIT_MIN_N); these tests check that it is
    # right on every width, edge cases included.
    monkeypatch.setattr(softmax, "SPLIT_MIN_N", 1)


gate = functools.partial(helpers.gate, SPEC, seeds=SEEDS)


def run(name: str, x: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    impl = SPEC.implementation(name)
    # the row stride too: whether aligned=1 applies (the default where it does) depends on it
    shp = shape(M=x.shape[0], N=x.shape[1], stride=x.stride(0))
    out = SPEC.make_output({"x": x}).fill_(math.nan)
    return impl.prepare({"x": x}, out, config or impl.default_config(shp, x.dtype))()


@pytest.mark.parametrize("name", TRITON)
def test_single_column_rows_are_exactly_one(name):
    # N=1: the row kernels' 1-wide block, the online kernel's BLOCK_N=1; stride 3 makes rows non-contiguous.
    x = softmax.make_inputs(shape(M=5, N=1, stride=3), torch.float32, torch.device("cpu"), seed=1)["x"]
    assert torch.equal(run(name, x), torch.ones(5, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("name", TRITON)
def test_non_power_of_two_width(name, dtype):
    assert_pass(gate(name, shape(M=5, N=100), dtype))


@pytest.mark.parametrize(
    ("name", "config", "n_cols"),
    [
        ("triton_row", {"num_warps": 4}, 257),  # 257 pads to 512
        ("triton_persistent", {"programs_per_sm": 2, "num_stages": 2, "num_warps": 4}, 257),
        ("triton_online", {"BLOCK_N": 64, "num_warps": 2}, 65),  # block + 1-wide tail
        ("triton_online", {"BLOCK_N": 64, "num_warps": 2}, 129),  # 2 blocks + 1
        # persistent grid: the interpreter has 4 SMs, so 4 programs loop over the 6 rows (two do a second row)
        ("triton_online", {"BLOCK_N": 64, "num_warps": 2, "programs_per_sm": 1}, 129),
        ("triton_online", {"BLOCK_N": 64, "num_warps": 2, "programs_per_sm": 2, "l2_hints": 1}, 129),
        # teams of 2 and 3 programs (the last one holding a 1-wide tail); programs_per_sm=1 gives 4 programs, so
        # one or two teams loop over the 6 rows
        ("triton_split", {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 1}, 65),
        ("triton_split", {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 1}, 129),
    ],
)
def test_one_more_than_a_block(name, config, n_cols):
    assert_pass(gate(name, shape(M=6, N=n_cols), torch.float32, config))


@pytest.mark.parametrize("name", TRITON)
def test_strided_rows(name):
    shp = shape(M=7, N=90, stride=133)
    x = softmax.make_inputs(shp, torch.float16, torch.device("cpu"), seed=0)["x"]
    assert x.stride(0) == 133 and not x.is_contiguous()
    assert_pass(gate(name, shp, torch.float16))


def inputs_with_infinities(dtype: torch.dtype) -> torch.Tensor:
    """Rows that each put -inf where an online softmax can go wrong (N=300, blocks of 64 in the test)."""
    x = torch.randn(7, 300, generator=torch.Generator().manual_seed(5)) * 3
    inf = -math.inf
    x[1, :150] = inf  # the first two blocks are all -inf: the running max is still -inf when they are summed
    x[2, ::7] = inf  # scattered -inf in every block
    x[3, :] = inf  # a fully -inf row: torch and the fp64 reference give NaN
    x[4, :-1] = inf  # one finite value, in the tail block: the output is one-hot
    x[5, 256:] = inf  # the whole tail block is -inf after finite blocks
    x[6, 3] = 80.0  # the max grows by a lot inside the first block, then never again
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("triton_row", None),
        ("triton_persistent", {"programs_per_sm": 1, "num_stages": 2, "num_warps": 4}),
        ("triton_online", {"BLOCK_N": 64, "num_warps": 2}),
        ("triton_online", {"BLOCK_N": 512, "num_warps": 4}),
        # teams of 5 (the first two chunks of row 1 all -inf, the last chunk 44 wide), and of 1
        ("triton_split", {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 2}),
        ("triton_split", {"CHUNK": 512, "num_warps": 4, "programs_per_sm": 2}),
        # segments of two 64-wide blocks (teams of 3; row 1's first segment all -inf, row 5's last 44 wide and
        # all -inf), with and without the next row published before the wait
        ("triton_split", {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 2, "BLOCKS": 2}),
        ("triton_split", {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 2, "BLOCKS": 2, "overlap": 1}),
    ],
)
def test_minus_infinity_entries_and_rows_match_torch(name, config, dtype):
    x = inputs_with_infinities(dtype)
    out = run(name, x, config)
    expected = correctness.reference_for(SPEC, {"x": x})
    assert torch.isnan(expected[3]).all() and not torch.isnan(expected[[0, 1, 2, 4, 5, 6]]).any()
    tol = SPEC.tolerance(dtype)
    result = correctness.compare(out, expected, tol.atol, tol.rtol)
    assert result["ok"], result["failure"]
    # Same NaN positions as torch itself, and masked-out -inf entries are exact zeros.
    assert torch.equal(torch.isnan(out), torch.isnan(torch.softmax(x, dim=-1)))
    finite_rows = [0, 1, 2, 4, 5, 6]
    assert (out[finite_rows][x[finite_rows] == -math.inf] == 0).all()
    assert out[4, -1] == 1


def test_minus_infinity_one_column_at_a_time():
    # BLOCK_N=1: the running max moves (or stays -inf) at every column.
    x = inputs_with_infinities(torch.float32)
    out = run("triton_online", x, {"BLOCK_N": 1, "num_warps": 1})
    result = correctness.compare(out, correctness.reference_for(SPEC, {"x": x}), 1e-7, 2e-5)
    assert result["ok"], result["failure"]


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("name", TRITON)
def test_rows_sum_to_one(name, dtype):
    shp = shape(M=9, N=300)
    for seed in SEEDS:
        x = softmax.make_inputs(shp, dtype, torch.device("cpu"), seed)["x"]
        out = run(name, x)
        assert softmax._row_sum_error(out, {"x": x}) <= softmax._row_sum_limit(dtype, {"x": x})
        assert (out >= 0).all() and (out <= 1).all()


@pytest.mark.parametrize("block_n", [4, 16, 64, 128, 256, 512])
def test_online_block_widths_agree_on_one_input(block_n):
    # From 75 blocks of four columns to one block for the whole row, on the same inputs: within
    # tolerance of fp64 on every regime (the rescale path with many blocks, the plain path with one).
    assert_pass(gate("triton_online", shape(M=4, N=300), torch.float32, {"BLOCK_N": block_n, "num_warps": 1}))


def test_online_running_sum_is_compensated():
    # One row: exp(0) = 1 first, then 512 terms of 0.9 * 2^-24, each under half an ulp of a sum near 1,
    # so plain sequential fp32 adds drop every one of them (the row sum comes out 2.7e-5 too high).
    terms = torch.full((512,), 0.9 * 2.0**-24, dtype=torch.float64)
    x = torch.cat([torch.zeros(1, dtype=torch.float64), terms.log()]).to(torch.float32)[None, :]
    plain = torch.tensor(0.0)
    for value in torch.exp(x[0]):
        plain += value
    exact = torch.exp(x[0].double()).sum()
    limit = softmax._row_sum_limit(torch.float32, {"x": x})
    assert abs(exact / plain.double() - 1) > 5 * limit  # the input defeats uncompensated summation
    out = run("triton_online", x, {"BLOCK_N": 1, "num_warps": 1})
    assert softmax._row_sum_error(out, {"x": x}) <= limit


def test_online_handles_rows_too_wide_for_one_block():
    shp = shape(M=2, N=262144)
    for name in ("triton_row", "triton_persistent"):
        assert SPEC.implementation(name).unsupported_reason(shp, torch.float32)
    assert_pass(gate("triton_online", shp, torch.float32, {"BLOCK_N": 16384, "num_warps": 8}))


@pytest.mark.parametrize("use_tl_range", [True, False])
def test_persistent_programs_loop_over_several_rows(monkeypatch, use_tl_range):
    # 33 rows on a grid of 4 programs: 9, 8, 8, 8 rows each (also through the plain-range fallback).
    monkeypatch.setattr(softmax, "PIPELINED_RANGE", use_tl_range and softmax.PIPELINED_RANGE)
    assert softmax.persistent_grid(33, programs_per_sm=1) == NUM_SMS
    config = {"programs_per_sm": 1, "num_stages": 2 if use_tl_range else 1, "num_warps": 4}
    assert_pass(gate("triton_persistent", shape(M=33, N=70, stride=80), torch.float16, config))


def test_persistent_grid_is_capped_at_the_row_count():
    # 3 rows, 4 SMs x 8 programs: the grid is the 3 rows, one each; a larger grid would leave programs
    # with no row, which is harmless, but the cap is what makes small launches identical to triton_row.
    assert softmax.persistent_grid(3, programs_per_sm=8) == 3
    assert_pass(
        gate(
            "triton_persistent",
            shape(M=3, N=300),
            torch.float32,
            {"programs_per_sm": 8, "num_stages": 2, "num_warps": 4},
        )
    )


def test_online_control_is_rejected_and_only_its_rescale_is_wrong():
    case = correctness.check_case(SPEC, shape(M=3, N=300), torch.float32, SEEDS)
    control = next(c for c in case["negative_controls"] if c["implementation"] == "online_no_rescale")
    assert control["rejected"] and control["status"] == "fail", control
    assert case["gate_live"]
    # With the whole row in one block nothing is ever rescaled, and the control is correct: the gate
    # rejects it for the dropped rescale, not for anything else.
    control_impl = SPEC.implementation("online_no_rescale")
    one_block = correctness.check_implementation(
        SPEC, control_impl, shape(M=3, N=300), torch.float32, SEEDS, {"BLOCK_N": 512, "num_warps": 4}
    )
    assert one_block["status"] == "pass", one_block["failure"]


def test_config_spaces_fit_the_h200_and_contain_no_pruned_default():
    for shp in SPEC.shape_sets["gpu"]:
        for dtype in SPEC.tolerances:
            for name in ("triton_persistent", "triton_online", "triton_split"):
                impl = SPEC.implementation(name)
                if impl.unsupported_reason(shp, dtype):
                    continue
                configs = impl.configs(shp, dtype)
                assert 1 <= len(configs) <= 8
                assert impl.prune(impl.default_config(shp, dtype), shp, dtype, H200) is None, (name, shp.id)
                assert any(impl.prune(c, shp, dtype, H200) is None for c in configs)
    # Two stages of a 65536-wide fp32 row (512 KB) cannot be in shared memory.
    wide = shape(M=1024, N=65536)
    assert softmax._persistent_prune({"programs_per_sm": 1, "num_stages": 2, "num_warps": 8}, wide, torch.float32, H200)


def test_online_persistent_grid_loops_over_strided_rows():
    # 33 rows on a 4-program grid (interpreter: 4 SMs x 1): every program handles 8 or 9 rows, each
    # in 3 blocks with a tail, the second pass walking them backwards.
    shp = shape(M=33, N=150, stride=160)
    assert_pass(gate("triton_online", shp, torch.float16, {"BLOCK_N": 64, "num_warps": 2, "programs_per_sm": 1}))


def test_online_default_is_persistent_only_for_wide_rows(monkeypatch):
    monkeypatch.setattr(softmax, "device_limits", lambda: H200)
    assert softmax._online_default(shape(M=1024, N=65536), torch.float16)["programs_per_sm"] == 2
    assert softmax._online_default(shape(M=4096, N=1000), torch.float16)["programs_per_sm"] == 0
    # 256 rows: a 2-per-SM grid (264) would hold every row, the same launch as one program per row,
    # which the prune drops; the default must stay timeable (it did not on the H200 run of 5f19e28).
    wide_few = shape(M=256, N=262144)
    default = softmax._online_default(wide_few, torch.float16)
    assert default["programs_per_sm"] == 0
    assert SPEC.implementation("triton_online").prune(default, wide_few, torch.float16, H200) is None
    for shp in SPEC.shape_sets["gpu"]:
        impl = SPEC.implementation("triton_online")
        assert impl.prune(impl.default_config(shp, torch.float16), shp, torch.float16, H200) is None, shp.id


def test_row_kernel_prunes_warp_counts_that_spill_on_wide_rows():
    wide = shape(M=1024, N=65536)
    row = SPEC.implementation("triton_row")
    assert "registers spill" in row.prune({"num_warps": 1}, wide, torch.float16, H200)
    assert row.prune({"num_warps": 16}, wide, torch.float16, H200) is None
    assert row.prune(row.default_config(wide, torch.float16), wide, torch.float16, H200) is None
    assert row.prune({"num_warps": 1}, shape(M=4, N=1000), torch.float16, H200) is None


# --- triton_split: the team barrier ------------------------------------------------------------------


def test_split_runs_only_on_rows_too_wide_for_one_program(monkeypatch):
    monkeypatch.setattr(softmax, "SPLIT_MIN_N", 16384)
    impl = SPEC.implementation("triton_split")
    assert "fits one program" in impl.unsupported_reason(shape(M=8192, N=8192), torch.float16)
    assert impl.unsupported_reason(shape(M=256, N=262144), torch.float16) is None


def test_split_handles_the_widest_rows_in_teams():
    # 262144 columns in 32 chunks of 8192 (the GPU default): each row is one team's, read once.
    shp = shape(M=2, N=262144)
    config = SPEC.implementation("triton_split").default_config(shp, torch.float32)
    assert softmax.split_parts(262144, config["CHUNK"]) == 32
    assert_pass(gate("triton_split", shp, torch.float32, config, seeds=(1,)))


def test_split_restores_its_workspace_after_every_call():
    # The last reader of each row poisons the partials with NaN and zeroes the counter, so a second launch
    # starts from the state the first did and gives the same bits.
    x = softmax.make_inputs(shape(M=6, N=129), torch.float32, torch.device("cpu"), seed=2)["x"]
    out = SPEC.make_output({"x": x})
    run_split = softmax._prepare_split({"x": x}, out, {"CHUNK": 32, "num_warps": 1, "programs_per_sm": 2})
    first = run_split().clone()
    work = run_split.workspace
    assert torch.isnan(work.stats).all() and (work.arrived == 0).all()
    assert torch.equal(run_split(), first)


SEGMENTS = [
    # teams of 3 segments of 3 blocks (6144 columns): the last holds 2 whole blocks and a 116-wide tail
    ({"CHUNK": 2048, "num_warps": 2, "programs_per_sm": 2, "BLOCKS": 3}, 16500),
    # teams of 2 segments of 3 blocks (12288): the last holds a block, a 116-wide tail and a block past the row
    ({"CHUNK": 4096, "num_warps": 4, "programs_per_sm": 2, "BLOCKS": 3}, 16500),
    # N = 5 in teams of 3 one-column blocks of 2: the last segment's second block is past the row
    ({"CHUNK": 1, "num_warps": 1, "programs_per_sm": 4, "BLOCKS": 2}, 5),
]


@pytest.mark.parametrize("overlap", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("config", "n_cols"), SEGMENTS)
def test_split_segments_pass_the_gate(config, n_cols, dtype, overlap):
    # 9 rows: the grid (4 SMs x 2 programs under the interpreter) holds 2 or 1 teams, so each team loops over
    # several rows and, with overlap=1, finishes each one an iteration after publishing it (the last after the loop
    # has run out of rows to publish).
    assert_pass(gate("triton_split", shape(M=9, N=n_cols), dtype, {**config, "overlap": overlap}))


def test_split_segments_are_sized_by_the_segment_and_restore_the_workspace():
    x = softmax.make_inputs(shape(M=7, N=300), torch.float32, torch.device("cpu"), seed=1)["x"]
    out = SPEC.make_output({"x": x})
    config = {"CHUNK": 32, "num_warps": 1, "programs_per_sm": 2, "BLOCKS": 3, "overlap": 1}
    run_split = softmax._prepare_split({"x": x}, out, config)
    first = run_split().clone()
    work = run_split.workspace
    assert work.stats.shape == (7, 2, 4)  # teams of cdiv(300, 96) = 4 programs
    assert torch.isnan(work.stats).all() and (work.arrived == 0).all()
    assert torch.equal(run_split(), first)
    assert torch.allclose(first, torch.softmax(x, dim=-1), rtol=2e-5, atol=1e-7)


def test_split_overlap_needs_segments():
    x = softmax.make_inputs(shape(M=2, N=300), torch.float32, torch.device("cpu"), seed=0)["x"]
    with pytest.raises(ValueError, match="overlap=1 needs segments"):
        softmax._prepare_split(
            {"x": x}, SPEC.make_output({"x": x}), {"CHUNK": 64, "num_warps": 2, "programs_per_sm": 1, "overlap": 1}
        )


def test_split_prune_sizes_teams_by_the_segment():
    impl = SPEC.implementation("triton_split")
    wide, widest = shape(M=1024, N=65536), shape(M=256, N=262144)
    seg = {"CHUNK": 16384, "num_warps": 8, "programs_per_sm": 2}
    assert impl.prune({**seg, "BLOCKS": 2}, wide, torch.float16, H200) is None  # teams of 2
    assert "segment of 65536 columns" in impl.prune({**seg, "BLOCKS": 4}, wide, torch.float16, H200)
    assert impl.prune({**seg, "BLOCKS": 4}, widest, torch.float16, H200) is None  # teams of 4
    # 1024-wide chunks alone would need teams of 256 programs a row (more than the 132 SMs); in segments of 16
    # chunks, teams of 16
    small = {"CHUNK": 1024, "num_warps": 4, "programs_per_sm": 8}
    assert "team of 256 programs" in impl.prune(small, widest, torch.float16, H200)
    assert impl.prune({**small, "BLOCKS": 16}, widest, torch.float16, H200) is None
    # wide rows sweep the segments; narrower rows only the register configs
    assert any(c.get("BLOCKS", 1) > 1 for c in impl.configs(widest, torch.float16))
    assert not any(c.get("BLOCKS", 1) > 1 for c in impl.configs(shape(M=4096, N=16384), torch.float16))


def test_split_without_its_barrier_reads_poison_not_plausible_numbers():
    # The one-launch GPU mode under the interpreter, where programs run one after another: the first
    # program of each team cannot see its teammates arrive, gives up after MAX_SPINS, and combines
    # partials nobody published. They read as NaN, so the rows come out NaN (the gate's failure), never as
    # a plausible but wrong softmax.
    x = softmax.make_inputs(shape(M=3, N=129), torch.float32, torch.device("cpu"), seed=0)["x"]
    out = torch.zeros_like(x)
    split, chunk = 3, 64
    work = teams.SplitWorkspace(3, 4, x.device)
    softmax._split_softmax_kernel[(3 * split,)](
        out,
        x,
        work.stats,
        work.arrived,
        3,
        129,
        split,
        x.stride(0),
        out.stride(0),
        CHUNK=chunk,
        SPLIT_BLOCK=4,
        PHASE=0,
        MAX_SPINS=2,
        num_warps=1,
    )
    assert torch.isnan(out[:, :chunk]).all()  # part 0 of every team ran first and saw no partial but its own
    gated = correctness.compare(out, correctness.reference_for(SPEC, {"x": x}), 1e-7, 2e-5)
    assert not gated["ok"]


def test_split_grid_holds_whole_teams_that_are_all_resident():
    h200 = {"num_sms": 132, "max_shared_mem_per_block": 227 * 1024, "regs_per_sm": 65536, "max_threads_per_sm": 2048}
    # ptxas counts for sm_90 (see kernelscope.teams.TEAM_SPACE): 64 registers at 8 warps -> 4 programs an SM; 84 at 16
    # warps -> 1 (two would need 2 x 16 x 2816 = 90112 of the 65536 registers); 56 at 4 warps -> 9 (65536 //
    # (4 x 1792), registers, not the 16 that threads allow); 16 at 1 warp -> 32 (the blocks-an-SM limit)
    assert teams.resident_programs(64, 8, 32, h200) == 4 * 132
    assert teams.resident_programs(84, 16, 64, h200) == 132
    assert teams.resident_programs(56, 4, 16, h200) == 9 * 132
    assert teams.resident_programs(16, 1, 16, h200) == 32 * 132
    assert teams.resident_programs(32, 4, 200 * 1024, h200) == 132  # shared memory allows one
    assert teams.resident_programs(None, 8, 0, h200) == 132  # unknown registers: one an SM
    # shared memory is the SM's, each block's with the hardware's 1 KB: gluon_smem's 32 KB parts (32848 B compiled) on
    # 8 warps at 32 registers fit 6 an SM in 228 KB, not the 7 that the per-block limit alone would allow
    sm90 = {**h200, "shared_mem_per_sm": 228 * 1024}
    assert teams.resident_programs(32, 8, 32848, sm90) == 6 * 132
    assert (
        teams.resident_programs(40, 16, 65632, sm90) == 3 * 132 and teams.resident_programs(40, 16, 131264, sm90) == 132
    )
    # 262144 columns in chunks of 8192: teams of 32; 4 an SM allows 16 teams (512 programs) of the 528
    assert teams.split_grid(256, 32, 4, 4 * 132, 132) == 512
    # the request is capped by residency: asking 8 an SM where 1 fits gives 4 teams of 32 (128 <= 132)
    assert teams.split_grid(256, 32, 8, 132, 132) == 128
    assert teams.split_grid(3, 4, 4, 528, 132) == 12  # never more teams than rows
    with pytest.raises(ValueError, match="team of 200 programs"):
        teams.split_grid(256, 200, 1, 132, 132)


def test_row_sum_limit_grows_with_the_fp32_reduction_depth():
    # 4 eps of the stored dtype, plus 2 eps32 per level of a pairwise fp32 sum over the row
    fp32, eps = torch.float32, torch.finfo(torch.float32).eps
    assert softmax._row_sum_limit(fp32, {"x": torch.empty(1, 1024)}) == pytest.approx(4 * eps + 20 * eps)
    assert softmax._row_sum_limit(fp32, {"x": torch.empty(1, 1025)}) == pytest.approx(4 * eps + 22 * eps)
    fp16 = softmax._row_sum_limit(torch.float16, {"x": torch.empty(1, 262144)})
    assert fp16 == pytest.approx(4 * torch.finfo(torch.float16).eps + 36 * eps)  # storage dominates at fp16


def test_online_default_uses_the_wide_block_the_h200_sweep_chose_on_wide_rows(monkeypatch):
    monkeypatch.setattr(softmax, "device_limits", lambda: H200)
    for shp, persistent in ((shape(M=1024, N=65536), 2), (shape(M=256, N=262144), 0)):
        default = softmax._online_default(shp, torch.float16)
        assert default == {"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": persistent, "l2_hints": 1}
        assert default in softmax._online_configs(shp, torch.float16)  # no extra config to sweep
    assert softmax._online_default(shape(M=4096, N=16500), torch.float16)["BLOCK_N"] == 4096


@pytest.mark.parametrize("num_stages", [2, 3])
def test_online_pipelined_block_loops_match_the_plain_ones(num_stages):
    # tl.range(num_stages=) changes only the schedule of the block loops (the interpreter runs them
    # plainly): the pipelined kernel must pass the same gate, -inf rows included.
    if not softmax.PIPELINED_RANGE:
        pytest.skip("this Triton has no tl.range(num_stages=)")
    config = {"BLOCK_N": 64, "num_warps": 2, "programs_per_sm": 1, "l2_hints": 1, "num_stages": num_stages}
    assert_pass(gate("triton_online", shape(M=6, N=300, stride=320), torch.float32, config))
    x = inputs_with_infinities(torch.float32)
    out = run("triton_online", x, config)
    assert torch.equal(torch.isnan(out), torch.isnan(torch.softmax(x, dim=-1)))


def test_online_prunes_pipelines_that_overflow_shared_memory():
    impl = SPEC.implementation("triton_online")
    wide = shape(M=1024, N=65536)
    fits = {"BLOCK_N": 16384, "num_warps": 8, "programs_per_sm": 2, "l2_hints": 1, "num_stages": 2}
    assert impl.prune(fits, wide, torch.float32, H200) is None  # 2 x 64 KB of fp32 blocks
    too_much = {**fits, "programs_per_sm": 4}
    assert "shared memory" in impl.prune(too_much, wide, torch.float32, H200)  # 4 x 64 KB > 227 KB


# --- rows split at 16-byte boundaries (aligned=1) ---------------------------------------------------------

ROW_KERNELS = ("triton_row", "triton_persistent")


@triton.jit
def _split_of_every_row(head_ptr, body_ptr, x_ptr, n_cols, row_stride, VEC: tl.constexpr):
    row = tl.program_id(0)
    head, body = heuristics.row_split(x_ptr + row * row_stride, n_cols, VEC)
    tl.store(head_ptr + row, head)
    tl.store(body_ptr + row, body)


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize(
    ("n_cols", "row_stride", "offset"),
    [(1, 1, 0), (3, 3, 1), (7, 9, 0), (70, 70, 0), (70, 70, 5), (2049, 2049, 0), (24, 24, 0)],
)
def test_row_split_starts_the_body_on_a_16_byte_boundary(dtype, n_cols, row_stride, offset):
    # The interpreter does not care whether a vector load is aligned (a GPU faults on a misaligned one), and a
    # wrong split that still covers the row gives right softmaxes: so the split itself is checked, row by row.
    n_rows = 11
    flat = torch.zeros(offset + n_rows * row_stride, dtype=dtype)
    x = flat[offset:].as_strided((n_rows, n_cols), (row_stride, 1))
    head = torch.empty(n_rows, dtype=torch.int64)
    body = torch.empty(n_rows, dtype=torch.int64)
    vec = heuristics.vec_elements(x.element_size())
    _split_of_every_row[(n_rows,)](head, body, x, n_cols, row_stride, VEC=vec)
    for r in range(n_rows):
        h, b = int(head[r]), int(body[r])
        start = x.data_ptr() + r * row_stride * x.element_size()
        tail = n_cols - h - b
        assert 0 <= h < vec and 0 <= tail < vec and b >= 0 and b % vec == 0, (r, h, b)
        if h < n_cols:  # the row reaches a boundary: the body starts on it, and it is the first one
            assert (start + h * x.element_size()) % 16 == 0, (r, h)
        assert h == min(n_cols, (-start % 16) // x.element_size()), (r, h)


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("name", ROW_KERNELS)
@pytest.mark.parametrize(
    "shp",
    [
        shape(M=9, N=1),  # one element: head or tail only, no body
        shape(M=9, N=3),  # shorter than 16 bytes in every dtype
        shape(M=9, N=7),
        shape(M=9, N=129),  # odd: every row starts at another offset from a boundary
        shape(M=5, N=24),  # rows of 48/96 bytes: every row starts on a boundary, body only (24 % 16 != 0)
        shape(M=5, N=70, stride=78),  # strided input: its rows and the output's share their offsets
    ],
    ids=lambda s: s.id,
)
def test_split_rows_pass_the_gate(shp, name, dtype):
    config = SPEC.implementation(name).default_config(shp, dtype)
    assert config["aligned"] == 1
    assert_pass(gate(name, shp, dtype, config))


@pytest.mark.parametrize(
    ("n_cols", "vec", "block"),
    [
        (2049, 8, 2048),
        (4097, 8, 4096),
        (2049, 4, 2048),
        (1000, 8, 1024),
        (129, 8, 128),
        (16, 8, 16),
        (17, 8, 16),
        (5, 8, 1),
    ],
)
def test_split_body_block_covers_the_longest_body_and_no_more(n_cols, vec, block):
    # the body holds at most n_cols // vec * vec elements (row_split), so its block is the power of two above
    # that: half of next_power_of_2(n_cols) just past a power of two (a block too small for the longest body
    # leaves columns unwritten, which the gate on N = 129 and N = 70 rejects)
    assert heuristics.body_block(n_cols, vec) == block
    assert block >= n_cols // vec * vec and (block == 1 or block // 2 < n_cols // vec * vec)


@pytest.mark.parametrize("name", ROW_KERNELS)
def test_split_is_offered_only_where_triton_cannot_prove_rows_aligned(name):
    impl = SPEC.implementation(name)
    odd, known, mismatched = shape(M=64, N=2049), shape(M=64, N=2048), shape(M=33, N=70, stride=80)
    assert all(
        c.get("aligned") == 1 for c in impl.configs(odd, torch.float16) if c not in impl.configs(known, torch.float16)
    )
    assert impl.default_config(odd, torch.float16)["aligned"] == 1
    for shp in (known, mismatched):  # already full width; in and out rows at different offsets (fp16: 20 bytes)
        assert not any(c.get("aligned") for c in impl.configs(shp, torch.float16))
        assert "aligned" not in impl.default_config(shp, torch.float16)
        reason = impl.prune({**impl.default_config(shp, torch.float16), "aligned": 1}, shp, torch.float16, H200)
        assert reason and ("Triton specialises" in reason or "different offsets" in reason), reason
    # triton_row sweeps each warp count both ways where the split applies (one row a program: the rows configs
    # are only for blocks up to 2048, so N = 2048 has them and N = 2049 not)
    if name == "triton_row":
        one_row = [c for c in impl.configs(known, torch.float16) if "rows" not in c]
        assert len(impl.configs(odd, torch.float16)) == 2 * len(one_row)


def test_split_refuses_tensors_whose_rows_sit_at_different_offsets():
    x = softmax.make_inputs(shape(M=4, N=70, stride=80), torch.float16, torch.device("cpu"), seed=0)["x"]
    out = SPEC.make_output({"x": x})
    with pytest.raises(ValueError, match="same offset from a 16-byte boundary.*use aligned=0"):
        SPEC.implementation("triton_row").prepare({"x": x}, out, {"num_warps": 4, "aligned": 1})


def test_aligned_no_tail_control_is_rejected_where_rows_have_no_tail_of_their_own():
    # rows of 24 fp16 (48 bytes) are aligned at both ends: only the control's off-boundary copy gives them tails
    shp = shape(M=5, N=24)
    record = gate(SPEC.implementation("aligned_no_tail"), shp, torch.float16, {})
    assert record["status"] == "fail" and "non-finite outputs where the reference is finite" in record["failure"]


# --- several rows a program (triton_row's rows) ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", list(SPEC.tolerances))
@pytest.mark.parametrize("rows", [2, 4, 8])
@pytest.mark.parametrize(
    "shp",
    [
        shape(M=11, N=70),  # 11 rows: the last program holds 1, 3 or 3 of its rows
        shape(M=13, N=129, stride=140),  # strided rows, a block of 256 with 127 masked lanes
        shape(M=3, N=5),  # fewer rows than one program holds: a single partial program
    ],
    ids=lambda s: s.id,
)
def test_rows_path_passes_the_gate_where_rows_do_not_divide_the_row_count(shp, rows, dtype):
    assert shp["M"] % rows != 0
    for num_warps in (1, 4):
        assert_pass(gate("triton_row", shp, dtype, {"num_warps": num_warps, "rows": rows}))


@pytest.mark.parametrize("rows", [2, 4, 8])
def test_rows_path_leaves_the_rows_past_the_last_unwritten(rows):
    # The last program's rows past M lie outside the tensors, which the gate cannot see; here they are guard rows
    # of the same buffers, so a missing row mask (which would store there) shows. The inputs' guard rows are
    # finite, so an unmasked load reads plausible numbers rather than faulting.
    n_rows, n_cols = 9, 70
    x_all = softmax.make_inputs(shape(M=n_rows + rows, N=n_cols), torch.float32, torch.device("cpu"), seed=1)["x"]
    out_all = torch.full_like(x_all, correctness.SENTINEL)
    x, out = x_all[:n_rows], out_all[:n_rows]
    softmax._prepare_row({"x": x}, out, {"num_warps": 2, "rows": rows})()
    assert (out_all[n_rows:] == correctness.SENTINEL).all()
    result = correctness.compare(out, torch.softmax(x.double(), dim=-1), 1e-7, 2e-5)
    assert result["ok"], result["failure"]


def test_rows_path_matches_torch_on_minus_infinity_rows():
    # a fully -inf row gives NaN as in torch, next to finite rows of the same program
    x = inputs_with_infinities(torch.float32)
    out = run("triton_row", x, {"num_warps": 4, "rows": 4})
    assert torch.equal(torch.isnan(out), torch.isnan(torch.softmax(x, dim=-1)))
    finite = [0, 1, 2, 4, 5, 6]
    result = correctness.compare(out[finite], correctness.reference_for(SPEC, {"x": x})[finite], 1e-7, 2e-5)
    assert result["ok"], result["failure"]


@pytest.mark.parametrize("shp", [shape(M=3, N=5), shape(M=33, N=70, stride=80), shape(M=16, N=129)], ids=lambda s: s.id)
def test_rows_reduce_axis0_control_is_rejected_for_its_numbers(shp):
    # where the default takes several rows (N = 70, strided: 16 in fp16) and where it takes one (N = 5, 129 split
    # rows: the control then takes 2)
    control = SPEC.implementation("rows_reduce_axis0")
    assert control.default_config(shp, torch.float16)["rows"] > 1
    record = gate(control, shp, torch.float16, {})
    assert record["status"] == "fail" and "elements outside atol" in record["failure"], record["failure"]


def test_row_default_takes_several_rows_only_on_unsplit_rows_under_2kb():
    impl = SPEC.implementation("triton_row")
    narrow = shape(M=131072, N=512)  # 1 KB 16-bit rows, 2 KB fp32 rows; N a multiple of 16, so no split
    for dtype in (torch.float16, torch.bfloat16):
        assert impl.default_config(narrow, dtype) == {"num_warps": 2, "rows": 2}
    assert impl.default_config(narrow, torch.float32) == {"num_warps": 4}  # 2 KB already: unchanged
    # the seed case splits (1000 fp16 rows start off 16-byte boundaries): one row a program, as before
    for dtype in SPEC.tolerances:
        assert impl.default_config(shape(M=4096, N=1000), dtype) == {"num_warps": 4, "aligned": 1}
    # the CPU gate's strided shape: rows of 140 / 280 bytes that cannot split, 33 rows not a multiple of the rows
    strided = next(s for s in SPEC.shape_sets["cpu"] if s.params.get("stride"))
    assert impl.default_config(strided, torch.float16) == {"num_warps": 2, "rows": 16}
    assert impl.default_config(strided, torch.float32) == {"num_warps": 2, "rows": 8}
    assert strided["M"] % 16 and strided["M"] % 8
    # no default is pruned on the H200, and the ones without rows are those of before
    for shp in (*SPEC.shape_sets["gpu"], *SPEC.shape_sets["cpu"]):
        for dtype in SPEC.tolerances:
            if impl.unsupported_reason(shp, dtype):
                continue
            default = impl.default_config(shp, dtype)
            assert impl.prune(default, shp, dtype, H200) is None, (shp.id, dtype, default)
            if "rows" in default:
                assert "aligned" not in default and shp["N"] * softmax.element_size(dtype) < 2048


def test_rows_per_program_reaches_the_bytes_a_program_and_stops_at_the_block_cap():
    assert heuristics.rows_per_program(512, 2, 2048) == 2
    assert heuristics.rows_per_program(512, 4, 2048) == 1
    assert heuristics.rows_per_program(70, 2, 2048) == 16  # 2048 / 140 = 14.6, up to a power of two
    assert heuristics.rows_per_program(1, 4, 2048) == 512
    assert heuristics.rows_per_program(512, 2, 65536) == 16  # 64 rows wanted, 8192 elements allow 16


def test_row_configs_add_rows_on_narrow_rows_only_and_prune_with_reasons():
    impl = SPEC.implementation("triton_row")
    for shp in SPEC.shape_sets["gpu"]:
        for dtype in SPEC.tolerances:
            configs = impl.configs(shp, dtype)
            with_rows = [c for c in configs if "rows" in c]
            assert len(with_rows) == (12 if triton.next_power_of_2(shp["N"]) <= 2048 else 0), shp.id
            assert all("aligned" not in c for c in with_rows)
            # the one-row configs first, as before: every warp count, both ways where the split applies
            one_row = [c for c in configs if "rows" not in c]
            assert len(one_row) == len(softmax.ROW_WARPS) * (1 if softmax._split_reason(shp, dtype) else 2)
            assert configs[: len(one_row)] == one_row
    n2048, n512 = shape(M=64, N=2048), shape(M=64, N=512)
    assert "16384 elements a program (> 8192)" in impl.prune({"num_warps": 4, "rows": 8}, n2048, torch.float16, H200)
    assert impl.prune({"num_warps": 4, "rows": 4}, n2048, torch.float16, H200) is None
    reason = impl.prune({"num_warps": 4, "rows": 2, "aligned": 1}, shape(M=64, N=1000), torch.float16, H200)
    assert "aligned=1" in reason
    assert "idle warps" in impl.prune({"num_warps": 8, "rows": 2}, shape(M=64, N=64), torch.float16, H200)
    assert impl.prune({"num_warps": 8, "rows": 8}, n512, torch.float16, H200) is None


def test_rows_refuse_the_split_at_launch():
    x = softmax.make_inputs(shape(M=4, N=70), torch.float16, torch.device("cpu"), seed=0)["x"]
    with pytest.raises(ValueError, match="rows=2 needs aligned=0"):
        softmax._prepare_row({"x": x}, SPEC.make_output({"x": x}), {"num_warps": 4, "rows": 2, "aligned": 1})


# Offline sm_90 builds (ptxas ships with Triton's NVIDIA backend): what the compiler emits for the loads and
# stores, which the interpreter cannot show. Run in a subprocess without TRITON_INTERPRET, since under the
# interpreter @triton.jit functions cannot be compiled.
_SM90_MEMORY_OPS = r"""
import collections, json, re, sys
try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton
except ImportError as e:
    print(json.dumps({"unavailable": f"no offline compiler: {e}"})); sys.exit()
import importlib
cases = json.loads(sys.argv[1])
out = []
for module, kernel, signature, constexprs, num_warps, *divisible in cases:
    fn = getattr(importlib.import_module(module), kernel)
    # arguments the launch would specialise as multiples of 16 (pointers from the allocator, N = 512, ...)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (divisible[0] if divisible else [])}
    k = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    ops = re.findall(r"(?:ld|st)\.global[.\w:]*|cp\.async\.\w+\.shared\.global", k.asm["ptx"])
    out.append(dict(collections.Counter(ops)))
print(json.dumps({"ops": out}))
"""


def sm90_memory_ops(cases: list) -> list[dict]:
    """Counts of the global-memory instructions in the sm_90 PTX of each ``(module, kernel, signature,
    constexprs, num_warps[, divisible])``, ``divisible`` the indices of the arguments known multiples of 16;
    skips the test where this Triton has no offline NVIDIA compiler."""
    return helpers.offline_sm90(_SM90_MEMORY_OPS, cases)["ops"]


def row_kernel_signature(dtype: str) -> dict:
    sig = {
        "out_ptr": f"*{dtype}",
        "in_ptr": f"*{dtype}",
        "n_rows": "i32",
        "n_cols": "i32",
        "in_row_stride": "i32",
        "out_row_stride": "i32",
    }
    return sig | dict.fromkeys(("BLOCK_SIZE", "ALIGNED", "VEC", "KEEP_TAIL", "ROWS", "REDUCE_AXIS"), "constexpr")


def test_split_rows_compile_to_full_width_body_loads_and_stores_on_sm90():
    # A 2049-wide row in a 4096 block at 4 warps: 32 elements a thread. Unsplit, every one is its own 2-byte
    # (fp16) or 4-byte (fp32) load and store; split, the body moves 16 bytes an instruction and only the head
    # and tail (one predicated lane each) go element by element. The persistent kernel's prefetch (2 stages)
    # becomes 16-byte cp.async copies, where the unsplit 16-bit row was not pipelined at all.
    def row(dtype, aligned):
        vec = 8 if dtype == "fp16" else 4
        return [
            "kernels.softmax",
            "_row_softmax_kernel",
            row_kernel_signature(dtype),
            {"BLOCK_SIZE": 4096, "ALIGNED": aligned, "VEC": vec, "KEEP_TAIL": True, "ROWS": 1, "REDUCE_AXIS": 1},
            4,
        ]

    sig = {
        "out_ptr": "*fp16",
        "in_ptr": "*fp16",
        "n_rows": "i32",
        "n_cols": "i32",
        "in_row_stride": "i32",
        "out_row_stride": "i32",
    }
    sig |= dict.fromkeys(("BLOCK_SIZE", "NUM_STAGES", "USE_TL_RANGE", "ALIGNED", "VEC"), "constexpr")
    meta = {"BLOCK_SIZE": 4096, "NUM_STAGES": 2, "USE_TL_RANGE": True, "VEC": 8}
    persistent = [["kernels.softmax", "_persistent_softmax_kernel", sig, {**meta, "ALIGNED": a}, 4] for a in (0, 1)]
    plain16, split16, plain32, split32, persistent_plain, persistent_split = sm90_memory_ops(
        [row("fp16", 0), row("fp16", 1), row("fp32", 0), row("fp32", 1), *persistent]
    )
    assert plain16 == {"ld.global.b16": 32, "st.global.b16": 32}
    assert split16 == {"ld.global.b16": 2, "ld.global.v4.b32": 4, "st.global.b16": 2, "st.global.v4.b32": 4}
    assert plain32 == {"ld.global.b32": 32, "st.global.b32": 32}
    assert split32 == {"ld.global.b32": 2, "ld.global.v4.b32": 8, "st.global.b32": 2, "st.global.v4.b32": 8}
    assert "cp.async.cg.shared.global" not in persistent_plain and persistent_plain["ld.global.b16"] == 32
    assert persistent_split["cp.async.cg.shared.global"] >= 4 and persistent_split["st.global.v4.b32"] == 4


def test_rows_of_16_bit_rows_compile_to_16_byte_loads_on_sm90():
    # softmax 131072 x 512 fp16 at 4 warps: one row a program gives each thread 4 elements, so 8-byte loads and
    # stores; two rows a program give it 8, one 16-byte load and store (pointers, N and the strides specialised as
    # multiples of 16, as the launch does for these tensors).
    def case(rows):
        constexprs = {"BLOCK_SIZE": 512, "ALIGNED": False, "VEC": 8, "KEEP_TAIL": True, "ROWS": rows, "REDUCE_AXIS": 1}
        return ["kernels.softmax", "_row_softmax_kernel", row_kernel_signature("fp16"), constexprs, 4, [0, 1, 3, 4, 5]]

    one_row, two_rows = sm90_memory_ops([case(1), case(2)])
    assert one_row == {"ld.global.v2.b32": 1, "st.global.v2.b32": 1}
    assert two_rows == {"ld.global.v4.b32": 1, "st.global.v4.b32": 1}


def test_split_segments_compile_for_sm90_with_the_l2_hints():
    # The GPU path (PHASE 0) is compiled only on a GPU, never under the interpreter: the overlapped loop's wait once
    # failed to compile (a literal where the spin loop carries a tensor) while every interpreter test passed. Pass 1
    # loads with evict_last, pass 2 loads and stores with evict_first, 16 bytes at a time (pointers, N and the
    # strides specialised as multiples of 16).
    sig = {
        "out_ptr": "*fp16",
        "in_ptr": "*fp16",
        "stats_ptr": "*fp32",
        "arrived_ptr": "*i32",
        "n_rows": "i32",
        "n_cols": "i32",
        "split": "i32",
        "in_row_stride": "i32",
        "out_row_stride": "i32",
    }
    sig |= dict.fromkeys(
        ("CHUNK", "SPLIT_BLOCK", "PHASE", "MAX_SPINS", "BLOCKS", "OVERLAP", "LOCAL_STATS"), "constexpr"
    )
    meta = {"CHUNK": 8192, "SPLIT_BLOCK": 16, "PHASE": 0, "MAX_SPINS": 1 << 16, "BLOCKS": 2, "LOCAL_STATS": False}
    cases = [
        ["kernels.softmax", "_split_softmax_kernel", sig, {**meta, "OVERLAP": o}, 8, [0, 1, 2, 3, 5, 7, 8]]
        for o in (0, 1)
    ]
    for ops in sm90_memory_ops(cases):
        assert ops["ld.global.L1::evict_last.L2::cache_hint.v4.b32"] == 4, ops
        assert ops["ld.global.L1::evict_first.L2::cache_hint.v4.b32"] == 4, ops
        assert ops["st.global.L1::evict_first.L2::cache_hint.v4.b32"] == 4, ops
