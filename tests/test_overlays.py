"""Every overlay under config/ still plans, on top of config/config.yaml, against the kernels as they stand: the
schema accepts it, every kernel, variant, baseline, dtype and shape it names exists, and every Nsight Compute case
it names is a case of its plan. The docs tell users to run these files; a kernel or variant renamed since one was
written must fail here, not on a GPU host. Planned for an H100's key (no GPU or torch needed to plan)."""

from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config, validate

from kernelscope import cases

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = sorted(p for p in (ROOT / "config").glob("*.yaml") if p.name != "config.yaml")


def planned(overlay: dict) -> tuple[dict, list[str]]:
    """The merged config's plan (as ``--configfile config/config.yaml <overlay>`` merges them) and its ncu cases."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    update_config(config, overlay)
    validate(config, schema=str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    doc = cases.specs(config, "nvidia-h100-80gb-hbm3")
    return doc, cases.ncu_selection(config.get("ncu", False), doc["cases"])


def test_there_are_overlays_to_check():
    assert len(OVERLAYS) >= 10


@pytest.mark.parametrize("path", OVERLAYS, ids=lambda p: p.name)
def test_every_overlay_plans(path):
    overlay = yaml.safe_load(path.read_text()) or {}
    doc, ncu = planned(overlay)
    assert doc["cases"], f"{path.name} plans no case"
    named = overlay.get("ncu")
    if isinstance(named, list):
        assert ncu, f"{path.name} names Nsight Compute cases, and none is planned"


def test_an_overlay_naming_a_variant_that_does_not_exist_fails():
    """The negative control: the check above fails for a renamed variant."""
    overlay = yaml.safe_load((ROOT / "config" / "kernels-matmul-transb.yaml").read_text())
    overlay["kernels"]["matmul"]["variants"] = ["gluon_persistnt"]
    with pytest.raises(Exception, match="gluon_persistnt"):
        planned(overlay)
