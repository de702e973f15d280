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
