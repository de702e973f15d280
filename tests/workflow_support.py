"""Running the real workflow from tests: a copy of it in a temporary directory with a small config, so a
run never touches the repository's results/ or reports/."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW_FILES = [
    "Snakefile",
    "workflow",
    "kernelscope",
    "kernels",
    "config",
    "profiles",
    "env",
    "pyproject.toml",
    "README.md",
    "Dockerfile",
]
# One kernel, one dtype, one tiny shape, two seeds: every rule runs once, in well under a minute on a CPU.
SMALL_CONFIG = {
    "kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5}]}},
    "seeds": [0, 1],  # seed 1 is the large-logit regime that exposes naive_no_max
    "calibration": {"dtypes": ["float32"]},
}


def copy_workflow(dest: Path, config_update: dict | None = None) -> Path:
    for name in WORKFLOW_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest / name)
    if config_update:
        config = yaml.safe_load((dest / "config" / "config.yaml").read_text())
        config.update(config_update)
        (dest / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 3000) -> subprocess.CompletedProcess:
    """`snakemake --cores 1 ARGS` as a user types it (the default profile applies)."""
    env = dict(env or os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def finished_small_run(dest: Path) -> Path:
    """A copy of the workflow with SMALL_CONFIG in ``dest``, run to the end."""
    work = copy_workflow(dest, SMALL_CONFIG)
    run = snakemake(work)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return work


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"(?m)^(\w+)\s+(\d+)$", table)}


def archived_results(run: str, dest: Path) -> Path:
    """The results folder of ``reports/<run>/raw-results.tar.gz``, unpacked under ``dest`` and migrated
    (``scripts/migrate-results.py``: a no-op on an archive migrated already)."""
    with tarfile.open(ROOT / "reports" / run / "raw-results.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    (results,) = (p.parent for p in (dest / "results").glob("*/specs.json"))
    migrate = [sys.executable, str(ROOT / "scripts" / "migrate-results.py"), str(results)]
    subprocess.run(migrate, check=True, capture_output=True, text=True, timeout=600)
    return results
