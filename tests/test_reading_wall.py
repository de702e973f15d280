"""The wall between measuring and reading (issue 22): the reading side is a function of ``results/`` alone.

- The reading modules import neither torch, triton nor ``kernels/`` (directly or transitively), and a report and
  a comparison of archived result folders render in a process where those cannot be imported.
- Old archives are migrated once by ``scripts/migrate-results.py``; an unmigrated folder is refused, naming the
  file and the command.
- The package has no import cycle; every writer of a result goes through ``results.atomic``; the timing
  defaults have one source (the config schema) and specs.json records them resolved.
"""

from __future__ import annotations

import ast
import dataclasses
import graphlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from kernelscope import cases, index, results, rundata
from workflow_support import ROOT

READING = (
    "rundata",
    "claims",
    "scores",
    "compare",
    "report",
    "plots",
    "document",
    "index",
    "bases",
    "runsummary",
    "reruns",
    "records",
    "fingerprint",
)
#: a process in which torch, triton and the kernel modules cannot be imported
BLOCKER = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "kernels"):
            raise ImportError(f"{name} is blocked: the reading side must not import it")
        return None
sys.meta_path.insert(0, Blocked())
"""


def _without_torch(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + code], cwd=cwd, capture_output=True, text=True, timeout=600)


def migrate_script():
    spec = importlib.util.spec_from_file_location("migrate_results", ROOT / "scripts" / "migrate-results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- import graph ------------------------------------------------------------------------------------------


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at any level (a function-level import counts: it runs)."""
    modules = {f"{package.name}.{p.stem}": p for p in package.glob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_the_package_has_no_import_cycle():
    graph = import_graph(ROOT / "kernelscope")
    assert "kernelscope.records" in graph["kernelscope.claims"]  # the graph sees the package's imports
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle in kernelscope: {' -> '.join(exc.args[1])}")


def test_no_reading_module_reaches_torch_or_the_kernels_through_the_package():
    graph = import_graph(ROOT / "kernelscope")
    measuring = {"kernelscope.registry", "kernelscope.runtime", "kernelscope.spec", "kernelscope.environment"}
    for name in READING:
        reached, todo = set(), [f"kernelscope.{name}"]
        while todo:
            for m in graph[todo.pop()] - reached:
                reached.add(m)
                todo.append(m)
        assert not reached & measuring, f"kernelscope.{name} imports {sorted(reached & measuring)}"


# --- the reading side without torch ------------------------------------------------------------------------


def test_the_reading_modules_import_where_torch_triton_and_the_kernels_cannot():
    code = f"""
import importlib
for name in {READING!r}:
    importlib.import_module("kernelscope." + name)
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "kernels")]
assert not loaded, loaded
print("imported every reading module")
try:
    import torch
except ImportError:
    print("and torch is blocked")
"""
    proc = _without_torch(code, ROOT)
    # the second line proves the blocker works: the imports before it succeeded, torch itself did not
    assert proc.stdout.splitlines() == ["imported every reading module", "and torch is blocked"], proc.stderr[-3000:]


@pytest.fixture(scope="module")
def archived(tmp_path_factory) -> dict[str, Path]:
    """Two archived calibration runs of one configuration (a rerun pair), copied and migrated."""
    root = tmp_path_factory.mktemp("archived")
    folders = {}
    for name in ("h200-a1", "h200-a2"):
        tarball = root / f"{name}.tar.gz"
        shutil.copy(ROOT / "calibration" / "runs" / f"{name}.tar.gz", tarball)
        migrate_script().migrate(tarball)  # a no-op once the committed archives are migrated
        with tarfile.open(tarball) as tar:
            tar.extractall(root, filter="data")
        folders[name] = root / name
    return folders


def test_a_report_and_a_comparison_of_archived_folders_render_without_torch(archived, tmp_path):
    a, b = archived["h200-a1"], archived["h200-a2"]
    runs = {
        "report": ["report", "--results", str(a), "--out", str(tmp_path / "report")],
        "compare": ["compare", "--a", str(a), "--b", str(b), "--out", str(tmp_path / "compare")],
    }
    for argv in runs.values():  # what python -m kernelscope <argv> runs (kernelscope/__main__.py)
        code = f"""
from kernelscope.cli import exit_now, main
main({argv!r})
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "kernels")]
assert not loaded, loaded
exit_now()
"""
        proc = _without_torch(code, tmp_path)
        assert proc.returncode == 0 and "blocked" not in proc.stderr, proc.stderr[-3000:]
    md = (tmp_path / "report" / "report.md").read_text()
    kernel = (tmp_path / "report" / "kernels" / "softmax.md").read_text()
    # the kernel page's description and implementations come from the records' declaration
    assert "Row-wise stable softmax" in kernel and "triton_row (triton):" in kernel
    assert "| reproduced |" not in md  # from the comparison, which is written after the report
    assert (tmp_path / "compare" / "comparison.csv").is_file()
    assert proc.stdout.strip().endswith("h200-a2: rerun (same GPU model, same software)")


# --- migration ---------------------------------------------------------------------------------------------


def as_written_before(name: str, dest: Path) -> Path:
    """calibration/runs/<name>.tar.gz as it was before the records carried their declarations (whether or not
    the committed archive is migrated): unpacked under ``dest``, with what the migration adds taken out."""
    with tarfile.open(ROOT / "calibration" / "runs" / f"{name}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    folder = dest / name
    for path in folder.rglob("*.json"):
        doc = json.loads(path.read_text())
        if doc.pop("migrated", None) is not None and path.name == "reruns.json":
            path.unlink()
        elif doc.pop("declaration", None) is not None or path.name == "specs.json":
            path.write_text(json.dumps(doc))
    return folder


def test_migration_adds_the_declarations_once_and_says_so(tmp_path):
    tarball = tmp_path / "a.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(as_written_before("h200-a1", tmp_path / "old"), arcname="h200-a1")
    shutil.rmtree(tmp_path / "old")
    with tarfile.open(tarball) as tar:
        before = set(tar.getnames())
    migrate = migrate_script()
    changed = migrate.migrate(tarball, at="2026-12-01T12:00:00+0000")
    assert "h200-a1/specs.json" in changed and "h200-a1/reruns.json" in changed
    assert migrate.migrate(tarball) == []  # once: a migrated archive is left as it is
    with tarfile.open(tarball) as tar:
        assert {m.name for m in tar.getmembers()} == before | {"h200-a1/reruns.json"}
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "h200-a1"
    specs = json.loads((folder / "specs.json").read_text())
    assert specs["migrated"][0]["at"] == "2026-12-01T12:00:00+0000"
    assert specs["migrated"][0]["by"] == "scripts/migrate-results.py"
    from kernelscope import registry
    from kernelscope.spec import DTYPES, Shape

    case = specs["cases"][0]
    doc = json.loads((folder / "timing" / case["kernel"] / case["dtype"] / f"{case['shape']}.json").read_text())
    spec = registry.get(case["kernel"])
    shape = Shape(case["params"], case["reason"])
    assert doc["declaration"]["flops"] == spec.flops(shape)
    assert doc["declaration"]["bytes_moved"] == spec.bytes_moved(shape, DTYPES[case["dtype"]])
    assert doc["migrated"] == {"at": "2026-12-01T12:00:00+0000", "by": migrate.BY, "added": ["declaration"]}
    assert results.load(folder / "reruns.json")["reason"] == migrate.NO_RERUNS
    data = rundata.collect(folder)
    assert all(c["declaration"] for c in data["cases"])


def test_migration_records_which_unsupported_implementations_declined():
    migrate = migrate_script()
    case = {"kernel": "k", "dtype": "float16", "shape": "N1", "params": {"N": 1}, "reason": "r"}
    declared = {
        "implementations": [
            {"name": "budget", "declined": True},
            {"name": "design", "declined": False},
        ]
    }
    gate = {
        "implementations": [
            {"implementation": "budget", "status": "unsupported"},
            {"implementation": "design", "status": "unsupported"},
            {"implementation": "gone", "status": "unsupported"},  # no longer declared: not a budget
            {"implementation": "kept", "status": "unsupported", "declined": True},  # recorded: kept
            {"implementation": "ran", "status": "pass"},
        ],
        "specs": {},
    }
    assert migrate.migrate_record(gate, "correctness", case, "now", lambda c: declared)
    assert [r.get("declined") for r in gate["implementations"]] == [True, False, False, True, None]
    assert gate["migrated"]["added"] == ["declaration", "implementations[].declined"]


def test_migration_gives_old_timing_records_the_runs_commit_card_and_enqueue_method():
    migrate = migrate_script()
    case = {"kernel": "k", "dtype": "float16", "shape": "N1", "params": {"N": 1}, "reason": "r"}
    env = {"git": {"commit": "abc", "dirty": False}, "gpu": {"uuid": "GPU-1"}}
    old = {"implementations": [{"status": "ok"}, {"status": "fail"}], "nvml": {"sm_clock_max_mhz": 1980}}
    assert migrate.migrate_record(old, "timing", case, "now", lambda c: {}, env)
    assert old["git"] == env["git"] and old["nvml"] == {"sm_clock_max_mhz": 1980, "uuid": "GPU-1"}
    assert [r.get("enqueue") for r in old["implementations"]] == ["per-sample-sync", None]
    # a record that carries its own keeps them
    own = {
        "declaration": {},
        "git": {"commit": "def"},
        "nvml": {"uuid": "GPU-2"},
        "implementations": [{"status": "ok", "enqueue": "batched:10"}],
    }
    assert not migrate.migrate_record(own, "timing", case, "now", lambda c: {}, env)
    assert own["git"] == {"commit": "def"} and own["nvml"] == {"uuid": "GPU-2"}


def test_migration_refuses_a_path_without_results(tmp_path):
    migrate = migrate_script()
    (tmp_path / "empty").mkdir()
    with pytest.raises(migrate.NotResults, match="has no specs.json"):
        migrate.migrate(tmp_path / "empty")
    assert migrate.main([str(tmp_path / "empty")]) == 2


def test_an_unmigrated_folder_is_refused_naming_the_record_and_the_command(tmp_path):
    folder = as_written_before("h200-a1", tmp_path)
    with pytest.raises(results.CorruptResult, match=r"has no declaration .* scripts/migrate-results.py") as exc:
        rundata.collect(folder)
    assert str(folder) in str(exc.value) and exc.value.path.suffix == ".json"


# --- reproduced, where the run and its comparison both exist ----------------------------------------------


def test_the_index_computes_reproduced_from_the_comparison_beside_the_run(tmp_path):
    from kernelscope import claims

    csv = tmp_path / "comparison.csv"
    verdicts = [
        ("softmax", claims.UNRESOLVED, "below_floor"),
        ("softmax", claims.UNRESOLVED, "below_floor"),
        ("softmax", claims.UNRESOLVED, "not_significant"),
        # a significant difference above the floor with no calibrated rerun floor to judge it by: not agreement
        ("softmax", claims.UNRESOLVED, "no_rerun_calibration"),
        ("softmax", claims.FASTER, "above_floor"),
        ("softmax", claims.NOT_COMPARABLE, "no_timing_in_run"),
        ("matmul", claims.NOT_COMPARABLE, "gate_not_both"),
    ]
    pd.DataFrame(verdicts, columns=["kernel", "verdict", "reason"]).to_csv(csv, index=False)
    assert index.reproduced(csv) == [
        {"kernel": "matmul", "reproduced": "–"},
        {"kernel": "softmax", "reproduced": "3/5"},
    ]
    csv.write_text("\n")  # a refused comparison: its header only
    assert index.reproduced(csv) == []


# --- one writer, one source of defaults --------------------------------------------------------------------


def test_every_writer_of_the_package_goes_through_results_atomic():
    # a rename over a target is the atomic writer's alone (gpus.py's lock-section log is not a result)
    for path in sorted((ROOT / "kernelscope").glob("*.py")):
        if path.name in ("results.py", "gpus.py"):
            continue
        text = path.read_text()
        assert "os.replace(" not in text and "tmp.replace(" not in text, f"{path.name} renames a file itself"


def test_the_timing_defaults_have_one_source_and_specs_record_them_resolved():
    from kernelscope import timing

    fields = {f.name: f.default for f in dataclasses.fields(timing.TimingSettings)}
    # the schema is the source; TimingSettings' own defaults (kernelscope/timing.py) must agree with it
    assert cases.timing_defaults() == fields
    spelled = cases.resolved_timing({"max_samples": 2000})
    assert spelled == {**fields, "max_samples": 2000}
    assert cases.resolved_timing({}) == cases.resolved_timing(dict(cases.timing_defaults()))
