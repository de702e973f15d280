"""vector_add beyond the generic gate: the whole config space, the control's failure mode, pruning,
the invariant's sensitivity and the traffic model."""

import math

import pytest
import torch

from kernels import vector_add
from kernelscope import correctness
from kernelscope.spec import Implementation, Shape

SPEC = vector_add.KERNEL
TRITON = SPEC.implementation("triton_blocked")
TAIL = Shape({"n": 1025}, "one more than the default block")


@pytest.mark.parametrize(
    "config", TRITON.configs(TAIL, torch.float16), ids=lambda c: f"B{c['BLOCK_SIZE']}_w{c['num_warps']}"
)
def test_every_config_passes_on_a_tail(config):
    # 1025 leaves a partial last block for every BLOCK_SIZE, so each config's mask is exercised.
    record = correctness.check_implementation(SPEC, TRITON, TAIL, torch.float16, seeds=(0, 1), config=config)
    assert record["status"] == "pass", record["failure"]


def test_default_config_is_in_the_config_space():
    shape = SPEC.shape_sets["gpu"][0]
    assert TRITON.default_config(shape, torch.float32) in TRITON.configs(shape, torch.float32)


def test_control_leaves_exactly_the_last_element_unwritten():
    control = SPEC.implementation("drops_last_element")
    inputs = SPEC.make_inputs(TAIL, torch.float32, torch.device("cpu"), seed=0)
    out = correctness.run_poisoned(control, SPEC, inputs, {}, math.nan)
    assert torch.isnan(out[-1])
    assert not torch.isnan(out[:-1]).any()
    record = correctness.check_implementation(SPEC, control, TAIL, torch.float32, seeds=(0,))
    assert record["status"] == "fail"
    assert "non-finite" in record["failure"]


def test_prune_drops_blocks_wider_than_the_vector_but_keeps_the_default():
    configs = TRITON.configs(Shape({"n": 4096}, "x"), torch.float16)
    kept = {c["BLOCK_SIZE"] for c in configs if TRITON.prune(c, Shape({"n": 4096}, "x"), torch.float16, {}) is None}
    assert kept == {256, 1024, 4096}
    one = Shape({"n": 1}, "x")
    assert {c["BLOCK_SIZE"] for c in configs if TRITON.prune(c, one, torch.float16, {}) is None} == {256, 1024}


def test_invariant_catches_a_lossy_intermediate():
    # fp32 inputs summed through an fp16 intermediate are still close in relative terms for most
    # elements, but not correctly rounded: the invariant must see it.
    lossy = Implementation(
        "via_fp16",
        "eager",
        lambda inputs, out, config: lambda: (inputs["x"].half() + inputs["y"].half()).float(),
        writes_out=False,
    )
    record = correctness.check_implementation(SPEC, lossy, Shape({"n": 1000}, "x"), torch.float32, seeds=(0,))
    assert record["status"] == "fail"
    assert record["ulps_from_correctly_rounded"] > 1


def test_rejects_non_contiguous_input():
    inputs = SPEC.make_inputs(Shape({"n": 64}, "x"), torch.float32, torch.device("cpu"), seed=0)
    inputs["x"] = torch.arange(128, dtype=torch.float32)[::2]
    with pytest.raises(ValueError, match="contiguous"):
        TRITON.prepare(inputs, torch.empty(64), TRITON.default_config(Shape({"n": 64}, "x"), torch.float32))


def test_traffic_model_and_issue_target_shape():
    # 64M elements at fp16: two reads and a write of 128 MiB each
    big = next(s for s in SPEC.shape_sets["gpu"] if s["n"] >= 64 * 2**20)
    assert SPEC.bytes_moved(big, torch.float16) == 3 * 2 * big["n"]
    assert SPEC.flops(big) == big["n"]
