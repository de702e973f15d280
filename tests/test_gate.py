"""The correctness gate's own checks, each against a planted bug that only that check can reject.

A toy kernel (``out = 2 |x|``, exact in every dtype) keeps the arithmetic out of the way: its input holds a NaN
(reference NaN), a -inf (reference +inf) and a 0 (reference 0), so every branch of the gate has something to
look at. Each broken implementation is built here and is wrong in one way (two entries plant two wrongs, to
check how several failures are reported); the test asserts the
*whole* failure string, so it fails both when the check it guards is removed (the bug passes, or is caught by
another check with another message) and when a check starts firing where it should not.

The second half runs every kernel's own tolerance at each dtype: an output wrong by one representable step
beyond the tolerance is rejected, one inside it everywhere passes.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from kernelscope import correctness, faults, registry
from kernelscope.spec import Implementation, Invariant, KernelSpec, Shape, Tolerance, generator, randn

N = 64
SHAPE = Shape({"n": N}, "toy")
SEEDS = (0, 1, 2)
# powers of two, so that an output exactly on the bound is representable (the bound itself must pass)
TOL = Tolerance(2**-10, 2**-7, "toy: exact op, loose enough to plant errors inside it")
OUTSIDE = f"elements outside atol={TOL.atol:g} rtol={TOL.rtol:g}"


def _make_inputs(shape, dtype, device, seed):
    x = randn((shape["n"],), dtype, generator(seed, device), scale=4.0)
    x[0], x[1], x[2], x[3] = math.nan, -math.inf, 0.0, 1.0  # reference NaN, +inf, 0 and 2 at indices 0-3
    return {"x": x}


def _reference(inputs):
    return 2 * inputs["x"].abs()


def _nonneg_error(out, inputs):
    assert "x" in inputs  # the gate must hand the invariant the case's inputs
    finite = torch.nan_to_num(out.double(), nan=0.0, posinf=0.0, neginf=0.0)
    return max(0.0, -float(finite.min()))


def _nonneg_limit(dtype, inputs):
    # the limit may depend on the dtype and the inputs (kernels' limits grow with sizes): both must arrive
    return 0.0 if dtype == inputs["x"].dtype else math.inf


NONNEG = Invariant("negative_output", _nonneg_error, _nonneg_limit, "2|x| is never negative")


def _eager(fn, name="torch", **kw):
    """An implementation that allocates its own output: ``fn(x, call_number)`` returns it."""
    calls = {"n": 0}

    def prepare(inputs, out, config):
        def run():
            calls["n"] += 1
            return fn(inputs["x"], calls["n"])

        return run

    return Implementation(name, "eager", prepare, writes_out=False, **kw)


def _writer(fn, name):
    """An implementation that writes into the gate's (poisoned) output: ``fn(x, out, call_number)``."""
    calls = {"n": 0}

    def prepare(inputs, out, config):
        def run():
            calls["n"] += 1
            fn(inputs["x"], out, calls["n"])
            return out

        return run

    return Implementation(name, "eager", prepare, writes_out=True)


CORRECT = _eager(lambda x, n: 2 * x.abs())


def _spec(controls=(), invariants=(NONNEG,)) -> KernelSpec:
    return KernelSpec(
        name="toy",
        description="2|x|",
        make_inputs=_make_inputs,
        make_output=lambda inputs: torch.zeros_like(inputs["x"]),
        reference=_reference,
        implementations=[CORRECT],
        tolerances={torch.float32: TOL},
        flops=lambda s: 0.0,
        bytes_moved=lambda s, d: 0.0,
        shape_sets={"cpu": [SHAPE]},
        invariants=invariants,
        negative_controls=controls,
    )


def _check(impl, dtype=torch.float32):
    return correctness.check_implementation(_spec(), impl, SHAPE, dtype, SEEDS, {})


def _plus_at(t, i, delta):
    t = t.clone()
    t[i] += delta
    return t


def _write_all(x, out, n):
    out.copy_(2 * x.abs())


def _half_after_first_seed(x, out, n):
    # seed 0 runs twice (two poisons): calls 1 and 2 are complete, later seeds leave the second half unwritten
    stop = N if n <= 2 else N // 2
    out[:stop] = 2 * x[:stop].abs()


def _skips_where_reference_is_nan(x, out, n):
    # index 0 (reference NaN) is never written: the NaN poison looks like the right answer there
    out[1:] = 2 * x[1:].abs()


def _abs_in_place(x, n):
    return 2 * x.abs_()  # same result every time, but the caller's input loses its signs


def _shrink(x):
    out = 2 * x.abs()
    x.resize_(x.shape[0] - 1)  # the caller's tensor changes shape (the second run then sees 63 elements)
    return out


def _bound_at(i):
    """The tolerance at index ``i`` of seed 0's reference."""
    ref = _reference(_make_inputs(SHAPE, torch.float32, "cpu", 0)).double()
    return TOL.atol + TOL.rtol * float(ref[i].abs())


# planted bug -> (a fresh broken implementation: some count their calls, the gate's complete verdict). Each
# entry is one check of the gate; see the module docstring.
PLANTED = {
    # NaN poison: unwritten elements show up as NaN (seed 1 only, so the repeat check on seed 0 cannot see it)
    "unwritten elements (NaN poison)": (
        lambda: _writer(_half_after_first_seed, "half"),
        "seed 1: 32 non-finite outputs where the reference is finite",
    ),
    # second run with another poison: an unwritten element where the reference itself is NaN
    "unwritten where the reference is NaN (second poison)": (
        lambda: _writer(_skips_where_reference_is_nan, "skip_nan"),
        "seed 0: a second run with another poison differs: unwritten elements or a race",
    ),
    # second run: a result that moves between identical runs, by less than the tolerance
    "nondeterministic (race)": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1e-4 * (n % 2))),
        "seed 0: a second run with another poison differs: unwritten elements or a race",
    ),
    "modifies its input": (lambda: _eager(_abs_in_place), "seed 0: inputs modified: ['x']"),
    "wrong output dtype": (
        lambda: _eager(lambda x, n: (2 * x.abs()).double()),
        "seed 0: output dtype torch.float64 != input dtype torch.float32",
    ),
    "NaN where the reference is finite": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 5, math.nan)),
        "seed 0: 1 non-finite outputs where the reference is finite",
    ),
    "Inf where the reference is finite": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 5, math.inf)),
        "seed 0: 1 non-finite outputs where the reference is finite",
    ),
    "finite where the reference is NaN": (
        lambda: _eager(lambda x, n: torch.nan_to_num(2 * x.abs(), nan=0.0, posinf=math.inf)),
        "seed 0: 1 outputs differ where the reference is NaN/Inf",
    ),
    "-inf where the reference is +inf": (
        lambda: _eager(lambda x, n: torch.where(torch.isinf(x), -math.inf, 2 * x.abs())),
        "seed 0: 1 outputs differ where the reference is NaN/Inf",
    ),
    "finite where the reference is +inf": (
        lambda: _eager(lambda x, n: (2 * x.abs()).clamp(max=1e4)),
        "seed 0: 1 outputs differ where the reference is NaN/Inf",
    ),
    "one element outside the tolerance": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1.5 * _bound_at(5))),
        f"seed 0: 1 {OUTSIDE}",
    ),
    # an element inside the tolerance that breaks an invariant: only the invariant sees it
    "invariant broken inside the tolerance": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 2, -5e-4)),
        "seed 0: negative_output=0.0005 exceeds 0 (2|x| is never negative)",
    ),
    # several checks at once: each says so, in the gate's order (numbers, dtype, invariants, inputs, repeat)
    "wrong dtype and modifies its input": (
        lambda: _eager(lambda x, n: _abs_in_place(x, n).double()),
        "seed 0: output dtype torch.float64 != input dtype torch.float32; inputs modified: ['x']",
    ),
    "shrinks its input in place": (
        lambda: _eager(lambda x, n: _shrink(x)),
        "seed 0: inputs modified: ['x']; a second run with another poison differs: unwritten elements or a race",
    ),
    "wrong shape": (lambda: _eager(lambda x, n: (2 * x.abs())[:-1]), "seed 0: shape (63,) != reference shape (64,)"),
    # every seed is checked: wrong only on the last one (calls 1-2 are seed 0, 3 seed 1, 4 seed 2)
    "wrong on the last seed only": (
        lambda: _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1.0 if n == 4 else 0.0)),
        f"seed 2: 1 {OUTSIDE}",
    ),
}


def test_the_toy_kernel_passes_when_implemented_correctly():
    # Without this, every planted-bug test below could pass because the toy itself fails (e.g. NaN inputs
    # read as "modified" when compared with torch.equal, which says NaN != NaN).
    for impl in (CORRECT, _writer(_write_all, "writer")):
        rec = _check(impl)
        assert rec["status"] == "pass", rec["failure"]
        # the second-poison run happens on the first seed only, and agrees there
        assert [r.get("repeat_identical") for r in rec["seeds"]] == [True, None, None]


@pytest.mark.parametrize("bug", list(PLANTED))
def test_each_planted_bug_is_rejected_by_its_check_alone(bug):
    make, expected = PLANTED[bug]
    rec = _check(make())
    assert rec["status"] == "fail" and rec["ok"] is False
    assert rec["failure"] == expected


def test_the_element_counts_and_worst_index_point_at_the_planted_error():
    rec = _check(PLANTED["one element outside the tolerance"][0]())
    seed0 = rec["seeds"][0]
    assert seed0["n_bad"] == 1 and seed0["worst_index"] == [5]
    assert seed0["max_abs_err"] == pytest.approx(1.5 * _bound_at(5), rel=1e-5)  # fp32 rounding
    assert seed0["n_nan"] == 1  # the reference's own NaN, returned as NaN
    assert [r["seed"] for r in rec["seeds"]] == list(SEEDS)  # a failing seed does not stop the others
    # the reported error metrics, recomputed: relative error at the planted element, and the relative L2 error
    # over the finite reference (the NaN and +inf positions are excluded, as in the gate)
    ref = _reference(_make_inputs(SHAPE, torch.float32, "cpu", 0)).double()
    finite = torch.isfinite(ref)
    assert seed0["max_rel_err"] == pytest.approx(1.5 * _bound_at(5) / float(ref[5]), rel=1e-5)
    assert seed0["rel_l2_err"] == pytest.approx(
        1.5 * _bound_at(5) / float(torch.linalg.vector_norm(ref[finite])), rel=1e-5
    )
    assert seed0["n_elements"] == N
    # a NaN output has an infinite error norm, not an undefined one
    nan_rec = _check(PLANTED["NaN where the reference is finite"][0]())
    assert nan_rec["seeds"][0]["rel_l2_err"] == math.inf


def test_a_nan_or_infinite_output_has_a_nan_or_infinite_error_not_zero():
    # an all-NaN output was reported with max_abs_err 0: the non-finite differences were left out of the max
    all_nan = _check(_eager(lambda x, n: torch.full_like(x, math.nan)))
    assert all_nan["status"] == "fail" and all_nan["failure"].startswith("seed 0: 62 non-finite outputs")
    for rec in (all_nan, all_nan["seeds"][0]):
        assert math.isnan(rec["max_abs_err"]) and math.isnan(rec["max_rel_err"]) and rec["rel_l2_err"] == math.inf
    one_inf = _check(PLANTED["Inf where the reference is finite"][0]())
    assert one_inf["max_abs_err"] == one_inf["max_rel_err"] == math.inf
    # NaN on the last seed only: the record's summary is NaN too (max() keeps a NaN only in first place)
    last = _check(_eager(lambda x, n: _plus_at(2 * x.abs(), 5, math.nan if n == 4 else 0.0)))
    assert [math.isnan(r["max_abs_err"]) for r in last["seeds"]] == [False, False, True]
    assert math.isnan(last["max_abs_err"]) and math.isnan(last["max_rel_err"])


def test_an_output_exactly_on_the_bound_passes_and_compare_reports_ok():
    # |out - ref| <= atol + rtol |ref| is inclusive: at ref = 2 the bound 2^-10 + 2^-6 is exact in fp32
    bound = TOL.atol + TOL.rtol * 2.0
    on = _check(_eager(lambda x, n: _plus_at(2 * x.abs(), 3, bound)))
    assert on["status"] == "pass" and on["max_abs_err"] == bound
    # compare() on its own says ok / not ok too (callers other than check_seed read it)
    ref = torch.tensor([2.0, 4.0], dtype=torch.float64)
    assert correctness.compare(ref.float(), ref, TOL.atol, TOL.rtol)["ok"] is True
    assert correctness.compare((ref + 1).float(), ref, TOL.atol, TOL.rtol)["ok"] is False
    assert correctness.compare(ref[:1].float(), ref, TOL.atol, TOL.rtol)["ok"] is False


def test_a_nan_and_an_element_outside_are_each_counted_once():
    # a non-finite output is one bad element, not also an out-of-tolerance one, and it does not hide one
    both = _eager(lambda x, n: _plus_at(_plus_at(2 * x.abs(), 5, math.nan), 6, 1.0))
    rec = _check(both)
    assert rec["failure"] == (f"seed 0: 1 non-finite outputs where the reference is finite; 1 {OUTSIDE}")
    assert rec["seeds"][0]["n_bad"] == 2 and rec["seeds"][0]["worst_index"] == [5]  # NaN is the worst


def test_check_case_runs_a_triton_variant_at_its_default_config():
    seen = []

    def prepare(inputs, out, config):
        seen.append(dict(config))
        return lambda: 2 * inputs["x"].abs()

    variant = Implementation(
        "toy_triton",
        "triton",
        prepare,
        configs=lambda shape, dtype: [{"BLOCK": 8}, {"BLOCK": 64}],
        default_config=lambda shape, dtype: {"BLOCK": shape["n"] // 2},
    )
    spec = dataclasses.replace(_spec(), implementations=[CORRECT, variant])
    result = correctness.check_case(spec, SHAPE, torch.float32, SEEDS)
    rec = {r["implementation"]: r for r in result["implementations"]}["toy_triton"]
    assert rec["status"] == "pass" and rec["config"] == {"BLOCK": 32} and seen and all(c == {"BLOCK": 32} for c in seen)


def test_a_crash_is_an_error_with_its_exception_and_an_unsupported_case_is_neither():
    def boom(x, n):
        if n == 3:  # seed 1: the seed 0 record is kept beside the error
            raise RuntimeError("planted crash")
        return 2 * x.abs()

    rec = _check(_eager(boom))
    assert rec["status"] == "error" and rec["ok"] is False and rec["failure"] == "RuntimeError: planted crash"
    assert "planted crash" in rec["traceback"] and [r["seed"] for r in rec["seeds"]] == [0]
    seen = []

    def supports(shape, dtype):
        seen.append((shape, dtype))
        return "toy: not this size"

    rec = _check(_eager(lambda x, n: 2 * x.abs(), supports=supports))
    assert rec["status"] == "unsupported" and rec["ok"] is None and rec["reason"] == "toy: not this size"
    assert rec["seeds"] == [] and seen == [(SHAPE, torch.float32)]


def test_the_record_summarises_every_seed():
    # the report reads these: implementation, kind, config, and the worst error of any seed
    rec = _check(PLANTED["wrong on the last seed only"][0]())
    assert (rec["implementation"], rec["kind"], rec["config"]) == ("torch", "eager", {})
    for key in ("max_abs_err", "max_rel_err", "rel_l2_err"):
        assert rec[key] == max(r[key] for r in rec["seeds"]) and rec[key] == rec["seeds"][2][key] > 0
    invariant = _check(PLANTED["invariant broken inside the tolerance"][0]())
    assert invariant["negative_output"] == max(r["negative_output"] for r in invariant["seeds"])
    assert invariant["negative_output"] == pytest.approx(5e-4)
    special = _check(PLANTED["finite where the reference is NaN"][0]())["seeds"][0]
    assert special["n_bad"] == 1 and special["worst_index"] is None  # a NaN-position mismatch has no "worst" error
    assert _check(CORRECT)["seeds"][0]["worst_index"] is None


def test_a_control_counts_as_rejected_only_when_it_fails_by_its_numbers():
    wrong = _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1.0), name="wrong_numbers", rejected_for=OUTSIDE)

    def boom(x, n):
        raise RuntimeError("control crashed")

    crashing = _eager(boom, name="crashes", rejected_for=OUTSIDE)
    accepted = _eager(lambda x, n: 2 * x.abs(), name="secretly_correct", rejected_for=OUTSIDE)

    live = correctness.check_case(_spec([wrong]), SHAPE, torch.float32, SEEDS)
    assert live["tolerance"] == {"atol": TOL.atol, "rtol": TOL.rtol, "reason": TOL.reason}
    assert live["seeds"] == list(SEEDS)
    [rec] = live["negative_controls"]
    assert rec["status"] == "fail" and rec["rejected"] is True and "control_error" not in rec
    assert live["gate_live"] is True and live["implementations"][0]["status"] == "pass"

    # a crash tests nothing about the tolerance: recorded apart, and the gate is not live
    crashed = correctness.check_case(_spec([wrong, crashing]), SHAPE, torch.float32, SEEDS)
    by_name = {c["implementation"]: c for c in crashed["negative_controls"]}
    assert by_name["crashes"]["rejected"] is False
    assert by_name["crashes"]["control_error"] == "RuntimeError: control crashed"
    assert by_name["wrong_numbers"]["rejected"] is True and crashed["gate_live"] is False

    loose = correctness.check_case(_spec([wrong, accepted]), SHAPE, torch.float32, SEEDS)
    assert {c["implementation"]: c["rejected"] for c in loose["negative_controls"]} == {
        "wrong_numbers": True,
        "secretly_correct": False,
    }
    assert loose["gate_live"] is False and "control_error" not in loose["negative_controls"][1]


def test_a_control_sits_out_only_beside_the_implementation_it_guards():
    """gluon_flash's controls do not run under the interpreter, and neither does gluon_flash: such a control
    counts neither as rejected nor as accepted. Unsupported for a reason no implementation shares, it would
    leave a variant unguarded, and the gate is not live."""
    wrong = _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1.0), name="wrong_numbers", rejected_for=OUTSIDE)
    why = "GPU only"
    gpu_only = _eager(lambda x, n: 2 * x.abs(), name="gpu_variant", supports=lambda shape, dtype: why)
    gpu_control = _eager(
        lambda x, n: 2 * x.abs(), name="gpu_control", supports=lambda shape, dtype: why, rejected_for=OUTSIDE
    )
    spec = dataclasses.replace(_spec([wrong, gpu_control]), implementations=[CORRECT, gpu_only])
    doc = correctness.check_case(spec, SHAPE, torch.float32, SEEDS)
    by_name = {c["implementation"]: c for c in doc["negative_controls"]}
    assert by_name["gpu_control"]["status"] == "unsupported" and by_name["gpu_control"]["rejected"] is None
    assert "control_error" not in by_name["gpu_control"] and doc["gate_live"] is True

    alone = correctness.check_case(_spec([wrong, gpu_control]), SHAPE, torch.float32, SEEDS)
    control = {c["implementation"]: c for c in alone["negative_controls"]}["gpu_control"]
    assert control["rejected"] is False and why in control["control_error"] and alone["gate_live"] is False

    # a plan that leaves the guarded variant out (a narrowed run): the control sits out for that variant's reason,
    # asked of the kernel's declared implementations, and the variants that ran are still guarded by the others
    narrowed = correctness.check_case(
        _spec([wrong, gpu_control]), SHAPE, torch.float32, SEEDS, declared=[CORRECT, gpu_only]
    )
    control = {c["implementation"]: c for c in narrowed["negative_controls"]}["gpu_control"]
    assert control["rejected"] is None and "control_error" not in control and narrowed["gate_live"] is True
    assert [r["implementation"] for r in narrowed["implementations"]] == [CORRECT.name]  # gpu_variant not run

    # no control that ran: nothing shows the tolerance is live
    only = correctness.check_case(
        dataclasses.replace(_spec([gpu_control]), implementations=[CORRECT, gpu_only]), SHAPE, torch.float32, SEEDS
    )
    assert only["gate_live"] is False


def test_a_reference_that_raises_is_the_references_fault_not_the_implementations():
    calls = {"n": 0}

    def reference(inputs):
        calls["n"] += 1
        if calls["n"] > 1:  # seed 0 of the first implementation is judged; then the reference breaks
            raise RuntimeError("planted reference bug")
        return _reference(inputs)

    wrong = _eager(lambda x, n: _plus_at(2 * x.abs(), 5, 1.0), name="wrong_numbers", rejected_for=OUTSIDE)
    spec = dataclasses.replace(_spec([wrong]), reference=reference)
    doc = correctness.check_case(spec, SHAPE, torch.float32, SEEDS)
    why = "the reference of toy raised RuntimeError: planted reference bug"
    assert doc["reference_error"] == why and doc["gate_live"] is False
    [impl], [control] = doc["implementations"], doc["negative_controls"]
    assert impl["status"] == control["status"] == correctness.REFERENCE_ERROR
    assert impl["ok"] is False and impl["failure"] == f"not checked: {why} (seed 1)" and len(impl["seeds"]) == 1
    assert control["failure"] == f"not checked: {why} (seed 0)" and control["rejected"] is False
    assert control["control_error"] == control["failure"]
    healthy = correctness.check_case(_spec([wrong]), SHAPE, torch.float32, SEEDS)
    assert healthy["reference_error"] is None and healthy["implementations"][0]["status"] == "pass"


# --- every kernel's tolerance, at each dtype ----------------------------------------------------------------


def _step(v: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """The next representable value of ``v``'s dtype towards ``direction`` (element-wise)."""
    return torch.nextafter(v, direction.to(v.dtype))


def _at_tolerance(spec: KernelSpec, dtype: torch.dtype, mode: str, sign: float) -> Implementation:
    """An implementation built from the fp64 reference: ``over`` puts one element (the largest) the smallest
    representable step beyond ``atol + rtol |ref|`` (on the side ``sign``), the rest rounded reference;
    ``within`` puts every element at the representable value closest to the bound from inside, with signs
    alternating."""
    tol = spec.tolerance(dtype)

    def prepare(inputs, out, config):
        def run():
            ref = correctness.reference_for(spec, inputs)
            out_dtype = spec.make_output(inputs).dtype
            bound = tol.atol + tol.rtol * ref.abs()  # the gate's formula, in fp64
            if mode == "over":
                flat = ref.flatten()
                i = int(torch.argmax(torch.where(torch.isfinite(flat), flat.abs(), -1.0)))
                result = flat.to(out_dtype)
                v = (flat[i] + sign * bound.flatten()[i]).to(out_dtype)
                if sign * (v.double() - flat[i]) <= bound.flatten()[i]:
                    v = _step(v, torch.tensor(sign * math.inf))
                result[i] = v
                return result.reshape(ref.shape)
            signs = torch.ones_like(ref).flatten()
            signs[1::2] = -1.0
            signs = signs.reshape(ref.shape)
            v = (ref + signs * bound).to(out_dtype)
            outside = (v.double() - ref).abs() > bound
            v = torch.where(outside, _step(v, ref.to(out_dtype)), v)
            return torch.where(torch.isfinite(ref), v, ref.to(out_dtype))

        return run

    return Implementation(f"at_tolerance_{mode}", "eager", prepare, writes_out=False)


TOLERANCE_CASES = [
    pytest.param(spec, dtype, id=f"{spec.name}-{str(dtype).removeprefix('torch.')}")
    for spec in registry.all_kernels().values()
    for dtype in spec.tolerances
]


@pytest.mark.parametrize(("spec", "dtype"), TOLERANCE_CASES)
def test_each_kernels_tolerance_is_live_at_each_dtype(spec, dtype):
    # Invariants are checks of their own (tested above on the toy); here only the tolerance decides.
    bare = dataclasses.replace(spec, invariants=())
    shape = spec.shape_sets["cpu"][0]
    tol = spec.tolerance(dtype)
    within = correctness.check_implementation(bare, _at_tolerance(spec, dtype, "within", 1.0), shape, dtype, (0, 1))
    assert within["status"] == "pass", within["failure"]
    for sign in (1.0, -1.0):
        over = correctness.check_implementation(bare, _at_tolerance(spec, dtype, "over", sign), shape, dtype, (0, 1))
        assert over["failure"] == f"seed 0: 1 elements outside atol={tol.atol:g} rtol={tol.rtol:g}", sign
        # one element of the whole output, one representable step beyond the bound, is enough
        assert over["seeds"][0]["n_bad"] == 1


# what the invariants add: an output at the edge of the tolerance everywhere (every element as far from the
# reference as the tolerance allows, signs alternating) passes the element-wise check by construction; at the
# dtypes an invariant declares itself tighter than the tolerance (Invariant.tighter_than_tolerance: the row-sum,
# variance and exact-rounding invariants at fp32, ...) it must reject it, so it is live inside the tolerance; at
# the other dtypes (limits that scale with the dtype's epsilon) every invariant lets it through.
INVARIANT_CASES = [p for p in TOLERANCE_CASES if p.values[0].invariants]


@pytest.mark.parametrize(("spec", "dtype"), INVARIANT_CASES)
def test_the_invariants_judge_an_output_at_the_tolerance_edge(spec, dtype):
    shape = spec.shape_sets["cpu"][0]
    record = correctness.check_implementation(spec, _at_tolerance(spec, dtype, "within", 1.0), shape, dtype, (0, 1))
    tighter = [inv.name for inv in spec.invariants if dtype in inv.tighter_than_tolerance]
    if not tighter:
        assert record["status"] == "pass", record["failure"]
    else:
        assert record["status"] == "fail", f"{tighter} let an output at the tolerance's edge through"
        assert all(f" {name}=" in record["failure"] for name in tighter), record["failure"]
        assert "elements outside" not in record["failure"]  # the tolerance alone lets it through


def test_the_relative_l2_error_of_an_all_zero_reference_is_the_absolute_one():
    # no norm to divide by: the error is reported as it is (an exact output 0, an error of 3e-3 as 3e-3), never
    # a division by zero, NaN or infinity that would hide whether the output was right
    zero = torch.zeros(8, dtype=torch.float64)
    assert correctness.compare(torch.zeros(8), zero, 1e-2, 0.0)["rel_l2_err"] == 0.0
    off = torch.zeros(8)
    off[3] = 3e-3
    record = correctness.compare(off, zero, 1e-2, 0.0)
    assert record["ok"] is True and record["rel_l2_err"] == pytest.approx(3e-3, rel=1e-6)
    assert record["max_rel_err"] == pytest.approx(3e-3 / torch.finfo(torch.float64).tiny)  # huge, and finite
    # any non-zero norm divides, however small: a reference of norm 0.5 doubles the error
    half = torch.zeros(8, dtype=torch.float64)
    half[0] = 0.5
    assert correctness.compare(off + half.float(), half, 1e-2, 0.0)["rel_l2_err"] == pytest.approx(6e-3, rel=1e-5)


CompilationError = type("CompilationError", (Exception,), {})  # what triton raises, matched by name


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (faults.ImplementationTimeout("ran past the limit"), "timeout"),
        (torch.OutOfMemoryError("CUDA out of memory"), "oom"),
        (CompilationError("bad kernel"), "compile_error"),
        (RuntimeError("boom"), "error"),
    ],
    ids=["timeout", "oom", "compile_error", "error"],
)
def test_every_kind_of_crash_is_recorded_as_itself_and_never_as_a_rejection(exc, status):
    # a control that timed out, ran out of memory or failed to compile tested nothing about the tolerance
    def crash(x, n):
        raise exc

    doc = correctness.check_case(
        _spec([_eager(crash, name="crashes", rejected_for=OUTSIDE)], invariants=()), SHAPE, torch.float32, SEEDS
    )
    [control] = doc["negative_controls"]
    assert control["status"] == status and control["rejected"] is False and doc["gate_live"] is False
    assert control["control_error"] == f"{type(exc).__name__}: {exc}"
    crashed = correctness.check_implementation(_spec(invariants=()), _eager(crash), SHAPE, torch.float32, SEEDS)
    assert crashed["status"] == status


def test_a_plan_narrowed_to_one_variant_leaves_no_control_erring(tmp_path):
    """The correctness job of a plan that selects one softmax variant still runs every negative control; those whose
    variant the plan left out sit out for that variant's reason (asked of the kernel's declared implementations),
    rather than erring and killing the gate: the defect of session 23's narrowed GPU runs, where layernorm's class
    controls were recorded as crashed beside a plan without triton_persistent and triton_staged."""
    from kernelscope import cases, cli

    config = {"kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5}]}}, "seeds": [0, 1, 2]}
    specs = cases.specs(config, cases.INTERPRETER_KEY)
    specs["cases"][0].update(variants=["triton_row"], baselines=["torch"])
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    out = tmp_path / "correctness.json"
    cli.main(
        ["correctness", "--specs", str(tmp_path / "specs.json"), "--kernel", "softmax", "--shape", "M3_N5"]
        + ["--dtype", "float32", "--out", str(out)]
    )
    doc = json.loads(out.read_text())
    assert [r["implementation"] for r in doc["implementations"]] == ["triton_row", "torch"]
    controls = {c["implementation"]: c for c in doc["negative_controls"]}
    assert controls["gluon_smem_sum_skips_a_slot"]["rejected"] is None  # sits out where gluon_smem would
    assert not [name for name, c in controls.items() if "control_error" in c] and doc["gate_live"] is True
