"""Adding a kernel is one file, and a kernel's recorded code is every module it imports: a module dropped
into kernels/ flows into every stage and the report with nothing else edited, and a change to a module a
kernel imports reruns that kernel's jobs and changes its recorded hash."""

import json
import re

import pytest

from kernelscope import catalog, sources
from workflow_support import ROOT, copy_workflow, job_counts, snakemake

STAGES = ("correctness", "sweep", "timing", "profile")
NEW = "vector_add_copy"


def drop_in_copy(work):
    """kernels/vector_add.py under a new name: the module is the only file that changes."""
    text = (work / "kernels" / "vector_add.py").read_text()
    assert text.count('name="vector_add"') == 1
    (work / "kernels" / f"{NEW}.py").write_text(text.replace('name="vector_add"', f'name="{NEW}"'))


def test_kernel_sources_follow_the_import_graph():
    softmax = sources.kernel_sources("softmax")
    assert {
        "kernels/softmax.py",
        "kernelscope/heuristics.py",
        "kernelscope/baselines.py",
        "kernelscope/spec.py",
    } <= set(softmax)
    assert "kernelscope/heuristics.py" not in sources.kernel_sources("vector_add")
    assert all((ROOT / p).is_file() for p in softmax)


def test_a_change_to_an_imported_module_changes_the_hash_of_the_kernels_that_import_it(tmp_path):
    work = copy_workflow(tmp_path)
    before = {k: sources.kernel_sources_sha256(k, work) for k in ("softmax", "vector_add")}
    sources._closure.cache_clear()
    with open(work / "kernelscope" / "heuristics.py", "a") as f:
        f.write("\n# a change\n")
    after = {k: sources.kernel_sources_sha256(k, work) for k in ("softmax", "vector_add")}
    assert after["softmax"] != before["softmax"]
    assert after["vector_add"] == before["vector_add"]


def test_a_stale_catalog_is_refused_with_the_command_where_torch_is_missing(tmp_path, monkeypatch):
    work = copy_workflow(tmp_path)
    path = work / "kernels" / "catalog.json"
    assert catalog.stale_kernels(json.loads(path.read_text()), path.parent) == []
    drop_in_copy(work)
    assert catalog.stale_kernels(json.loads(path.read_text()), path.parent) == [NEW]
    real = catalog.importlib.util.find_spec
    monkeypatch.setattr(catalog.importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    with pytest.raises(
        catalog.StaleCatalog, match=rf"stale for kernel\(s\) \['{NEW}'\].*`python -m kernelscope.catalog`"
    ):
        catalog.ensure_current(path)
    path.unlink()
    with pytest.raises(catalog.StaleCatalog, match="is missing"):
        catalog.ensure_current(path)


@pytest.mark.workflow
def test_a_dropped_in_module_is_planned_for_every_stage_and_reported(tmp_path):
    work = copy_workflow(tmp_path)
    drop_in_copy(work)
    run = snakemake(work, "--dry-run", "--config", "ncu=True")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"kernels/catalog.json is stale for kernel(s) ['{NEW}']; regenerated it" in run.stderr
    assert NEW in json.loads((work / "kernels" / "catalog.json").read_text())["kernels"]
    counts = job_counts(run.stdout)
    for stage in (*STAGES, "ncu"):
        assert f"{stage}/{NEW}/" in run.stdout.replace("results/cpu-interpreter/", ""), stage
    assert counts["correctness"] > 0
    # a tiny CPU run of the new kernel alone: it is in the report
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(
        json.dumps(
            {
                "kernels": {NEW: {"dtypes": ["float32"], "shapes": [{"n": 5}]}},
                "seeds": [0],
                "calibration": {"dtypes": ["float32"]},
            }
        )
    )
    run = snakemake(work, "--configfile", str(tiny))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert NEW in (work / "reports" / "cpu-interpreter" / "report.md").read_text()
    record = json.loads((work / "results" / "cpu-interpreter" / "timing" / NEW / "float32" / "n5.json").read_text())
    assert record["kernel_sources"] == sources.kernel_sources(NEW, work)
    assert record["kernel_sources_sha256"] == sources.kernel_sources_sha256(NEW, work)


@pytest.mark.workflow
def test_a_change_to_an_imported_module_reruns_only_the_jobs_of_kernels_that_import_it(tmp_path):
    small = {
        "softmax": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5}]},
        "vector_add": {"dtypes": ["float32"], "shapes": [{"n": 5}]},
    }
    work = copy_workflow(tmp_path, {"kernels": small})
    cases = {"softmax": "M3_N5", "vector_add": "n5"}
    targets = [
        f"results/cpu-interpreter/{stage}/{k}/float32/{shape}.json" for stage in STAGES for k, shape in cases.items()
    ]
    # stand-ins for a finished run of these jobs (--touch marks existing outputs up to date, in DAG order)
    for path in ["results/cpu-interpreter/specs.json", *targets]:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text("{}")
    assert snakemake(work, "--touch", *targets).returncode == 0
    assert "Nothing to be done" in snakemake(work, "--dry-run", *targets).stdout
    with open(work / "kernelscope" / "heuristics.py", "a") as f:  # softmax imports it, vector_add does not
        f.write("\n# a change\n")
    run = snakemake(work, "--dry-run", *targets)
    assert run.returncode == 0, run.stderr[-3000:]
    rerun = set(re.findall(r"output: (\S+)", run.stdout))
    assert rerun == {t for t in targets if "/softmax/" in t}
