"""Every implementation of every kernel, on every CPU-set shape and declared dtype, against fp64.

This is the correctness gate itself (kernelscope.correctness.check_case), so the test and the pipeline
cannot drift apart. Each kernel's negative controls must be rejected by the same gate.
"""

import pytest

from kernelscope import correctness, registry

SEEDS = (0, 1, 2)

CASES = [
    pytest.param(spec, shape, dtype, id=f"{spec.name}-{shape.id}-{str(dtype).removeprefix('torch.')}")
    for spec in registry.all_kernels().values()
    for shape in spec.shape_sets["cpu"]
    for dtype in spec.tolerances
]


@pytest.mark.parametrize(("spec", "shape", "dtype"), CASES)
def test_every_implementation_passes_and_every_control_is_rejected(spec, shape, dtype):
    result = correctness.check_case(spec, shape, dtype, SEEDS)
    checked = [r for r in result["implementations"] if r["status"] != "unsupported"]
    assert checked, "no implementation supports this CPU shape"
    for record in checked:
        assert record["status"] == "pass", f"{record['implementation']}: {record['failure']}"
    for control in result["negative_controls"]:
        name = control["implementation"]
        assert control["status"] == "fail", f"negative control {name}: {control['status']} ({control.get('failure')})"
        assert control["rejected"], f"negative control {name} was accepted"
        # rejected for what it was built to get wrong (its declared rejected_for), not by some other check
        wanted = spec.implementation(name).rejected_for
        assert wanted in control["failure"], f"{name} rejected for another reason than {wanted!r}: {control['failure']}"
    assert result["gate_live"]


def test_every_kernel_declares_a_negative_control_cpu_and_gpu_shapes():
    for spec in registry.all_kernels().values():
        assert spec.negative_controls, f"{spec.name} has no negative control"
        assert spec.shape_sets.get("cpu") and spec.shape_sets.get("gpu"), spec.name
        assert spec.triton_variants and spec.baselines, spec.name
        for shapes in spec.shape_sets.values():
            for shape in shapes:
                assert shape.reason.strip(), f"{spec.name} {shape.id} has no reason"


def test_no_default_config_is_pruned_on_any_declared_shape():
    """The sweep must always time the config a user gets without tuning (the report ranks it)."""
    from kernelscope import runtime

    limits = runtime.device_limits()
    for spec in registry.all_kernels().values():
        for shapes in spec.shape_sets.values():
            for shape in shapes:
                for dtype in spec.tolerances:
                    for impl in spec.triton_variants:
                        if impl.prune is None or impl.unsupported_reason(shape, dtype):
                            continue
                        reason = impl.prune(impl.default_config(shape, dtype), shape, dtype, limits)
                        assert reason is None, f"{spec.name} {impl.name} {shape.id} {dtype}: default pruned ({reason})"
