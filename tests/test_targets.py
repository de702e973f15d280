"""Every performance target a kernel module declares names a Triton variant and a baseline of that kernel,
checked here rather than when a declaration is built, so that one narrowed to some implementations (a
config's variant selection) still builds."""

import pytest

from kernelscope import registry


@pytest.mark.parametrize("name", sorted(registry.available()))
def test_declared_targets_name_real_variants_and_baselines(name):
    spec = registry.get(name)
    variants = {i.name for i in spec.triton_variants}
    baselines = {i.name for i in spec.baselines}
    for target in spec.targets:
        assert target.variant in variants, f"{name}: target variant {target.variant!r} is not one of {variants}"
        assert target.baseline is None or target.baseline in baselines, (
            f"{name}: target baseline {target.baseline!r} is not one of {baselines}"
        )


@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_every_large_row_case_has_a_copy_bandwidth_goal_of_85_percent(name):
    """Issue 24: the best Triton softmax and layernorm reach 85 % of copy bandwidth on every GPU shape moving
    64 MB or more, every dtype; so each such case is covered by such a target on a variant that runs it."""
    spec = registry.get(name)
    for shape in spec.shape_sets["gpu"]:
        for dtype in spec.tolerances:
            nbytes = spec.bytes_moved(shape, dtype)
            if nbytes < 64e6:
                continue
            dtype_name = str(dtype).removeprefix("torch.")
            covering = [
                t
                for t in spec.targets
                if t.metric == "pct_copy_bw"
                and t.at_least >= 85
                and t.covers(shape.params, dtype_name, nbytes)
                and not spec.implementation(t.variant).unsupported_reason(shape, dtype)
            ]
            assert covering, f"{name} {shape.id} {dtype_name} ({nbytes / 1e6:.0f} MB) has no 85 % target"


def test_attention_target_is_the_issue_goal():
    from kernelscope.spec import DTYPES

    # issue 24: the descriptor flash variant >= 0.95x SDPA, fp16 and bf16, D = 128, S >= 4096, causal and not;
    # D = 64, S < 4096 and fp32 are outside it.
    spec = registry.get("attention")
    (goal,) = [t for t in spec.targets if t.variant == "triton_flash_tma"]
    assert (goal.metric, goal.baseline, goal.at_least) == ("speedup", "sdpa", 0.95)
    covered = {
        (shape.id, dtype)
        for shape in spec.shape_sets["gpu"]
        for dtype in ("float16", "bfloat16", "float32")
        if goal.covers(shape.params, dtype, spec.bytes_moved(shape, DTYPES[dtype]))
    }
    cases = ("B4_H16_S4096_D128_causal0", "B4_H16_S4096_D128_causal1", "B2_H16_S8192_D128_causal1")
    assert covered == {(case, dtype) for case in cases for dtype in ("float16", "bfloat16")}
