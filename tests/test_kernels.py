"""Every implementation of every kernel, on every CPU-set shape and declared dtype, against fp64.

This is the correctness gate itself (kernelscope.correctness.check_case), so the test and the pipeline
cannot drift apart. Each kernel's negative controls must be rejected by the same gate, and each declared
tolerance must be the reviewed one (kernels/tolerances.json).
"""

import dataclasses

import pytest
import torch

from kernelscope import catalog, correctness, registry

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
    sat_out = {r["reason"] for r in result["implementations"] if r["status"] == "unsupported"}
    for control in result["negative_controls"]:
        name = control["implementation"]
        if control["status"] == "unsupported":
            # only beside the implementation it guards (gluon_flash's controls under the interpreter)
            assert control["reason"] in sat_out and control["rejected"] is None, f"{name}: {control}"
            continue
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


def test_every_declared_tolerance_is_the_reviewed_one():
    """A tolerance changes only on purpose: kernels/tolerances.json records each kernel's per dtype, with its reason,
    and a loosened (or tightened) one fails here until it is accepted and the record's diff reviewed."""
    record = catalog.recorded_tolerances()
    for spec in registry.all_kernels().values():
        assert spec.name in record, (
            f"kernels/tolerances.json has no record of {spec.name}'s tolerances: run `{catalog.REGENERATE}` "
            "(it records a new kernel's) and commit the file with the module"
        )
        declared, reviewed = catalog.declared_tolerances(spec), record[spec.name]
        for dtype in sorted(set(declared) | set(reviewed)):
            assert declared.get(dtype) == reviewed.get(dtype), (
                f"kernels/{spec.name}.py declares the {dtype} tolerance {declared.get(dtype)}; the reviewed record "
                f"kernels/tolerances.json has {reviewed.get(dtype)}. If the change is meant, run "
                f"`{catalog.ACCEPT} {spec.name}` and commit kernels/tolerances.json with the module, saying why"
            )


def test_the_catalog_step_records_new_tolerances_and_keeps_reviewed_ones(tmp_path):
    softmax, vector_add = registry.get("softmax"), registry.get("vector_add")
    path = tmp_path / "tolerances.json"
    assert catalog.update_tolerances(path, {"softmax": softmax}) == []
    assert catalog.recorded_tolerances(path) == {"softmax": catalog.declared_tolerances(softmax)}
    # a new kernel is recorded as declared; a loosened tolerance of a recorded one is not
    fp32 = softmax.tolerances[torch.float32]
    loose = dataclasses.replace(
        softmax, tolerances={**softmax.tolerances, torch.float32: dataclasses.replace(fp32, atol=100 * fp32.atol)}
    )
    assert catalog.update_tolerances(path, {"softmax": loose, "vector_add": vector_add}) == ["softmax"]
    record = catalog.recorded_tolerances(path)
    assert record == {
        "softmax": catalog.declared_tolerances(softmax),
        "vector_add": catalog.declared_tolerances(vector_add),
    }
    # accepted on purpose, it is recorded; a kernel whose module is gone leaves the record
    assert catalog.update_tolerances(path, {"softmax": loose}, accept=("softmax",)) == []
    assert catalog.recorded_tolerances(path) == {"softmax": catalog.declared_tolerances(loose)}
    with pytest.raises(ValueError, match=r"--accept-tolerances names \['nosuch'\]"):
        catalog.update_tolerances(path, {"softmax": loose}, accept=("nosuch",))


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
