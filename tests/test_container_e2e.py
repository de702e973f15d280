"""Opt-in: the user's command, `snakemake --cores 1 --use-singularity`, end to end under a real Apptainer.

Builds the pinned image with scripts/container-e2e.sh (unless it exists; KERNELSCOPE_CONTAINER_REBUILD=1 builds
it again), then runs the user's command in a copy of the workflow with the small CPU config given by
--configfile, the image named as a pre-built one (config container_image), and the real Apptainer behind
`apptainer`. Checks, from inside the image, that every kernelscope job ran in it, and that the report's
environment section shows the image's sha256 and the lock's hash. Writes build/container-e2e.json, the record
docs/container.md copies.

Skipped unless KERNELSCOPE_CONTAINER_E2E=1 (`make container-e2e` sets it): it needs root, downloads several GB
(the CUDA torch stack) and takes tens of minutes, so CI keeps the stand-in tests of tests/test_container.py.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernelscope import container
from workflow_support import ROOT, SMALL_CONFIG, copy_workflow, job_counts

pytestmark = [
    pytest.mark.container_e2e,
    pytest.mark.skipif(
        os.environ.get("KERNELSCOPE_CONTAINER_E2E") != "1",
        reason="opt-in (KERNELSCOPE_CONTAINER_E2E=1, or make container-e2e): builds a multi-GB image",
    ),
]

SCRIPT = ROOT / "scripts" / "container-e2e.sh"
# Rules that run on the host even under --use-singularity; every other rule must run in the image.
HOST_RULES = {"specs", "container_image", "container_identity", "all"}


def _sha256(path: Path) -> str:
    return container.sha256_file(path)


def test_the_users_command_runs_every_job_in_the_real_image(tmp_path):
    image = Path(os.environ.get("KS_CONTAINER_IMAGE", ROOT / "build" / "kernelscope.sif")).resolve()
    env = dict(
        os.environ,
        KS_CONTAINER_IMAGE=str(image),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )

    started = time.time()
    built = not image.exists() or os.environ.get("KERNELSCOPE_CONTAINER_REBUILD") == "1"
    if built:
        subprocess.run([str(SCRIPT), "build"], env=env, check=True)
    build_s = time.time() - started

    workdir = copy_workflow(tmp_path)  # the repository's config/config.yaml, unchanged
    # The repository's config with the small CPU selection and the image, replacing (not merged into) the
    # workflow's config: a merge would keep every kernel of config/config.yaml.
    config = yaml.safe_load((workdir / "config" / "config.yaml").read_text())
    (workdir / "e2e.yaml").write_text(yaml.safe_dump({**config, **SMALL_CONFIG, "container_image": str(image)}))
    command = [
        "snakemake",
        "--cores",
        "1",
        "--use-singularity",
        "--configfile",
        "e2e.yaml",
        "--replace-workflow-config",
    ]
    started = time.time()
    run = subprocess.run([str(SCRIPT), *command], cwd=workdir, env=env, capture_output=True, text=True, timeout=7200)
    run_s = time.time() - started
    output = run.stdout + run.stderr
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "container-e2e.log").write_text(output)
    assert run.returncode == 0, output[-5000:]

    # Every job of every containerized rule wrote, from inside, the image it ran in to its log.
    expected = {rule: n for rule, n in job_counts(output).items() if rule not in HOST_RULES}
    assert {"environment", "correctness", "sweep", "timing", "profile", "report"} <= set(expected), expected
    inside: dict[str, int] = {}
    for log in sorted((workdir / "logs").rglob("*.log")):
        text = log.read_text()
        for stage in re.findall(r"^kernelscope (\w[\w-]*): in Apptainer image (\S+)$", text, re.M):
            assert Path(stage[1]).resolve() == image, (log, stage)
            inside[stage[0]] = inside.get(stage[0], 0) + 1
        assert "not in an Apptainer container" not in text, log
    assert inside == expected, (inside, expected)

    env_record = json.loads(next((workdir / "results").glob("*/environment.json")).read_text())
    assert env_record["container"]["containerized"] is True
    assert env_record["container"]["runtime"] == "apptainer"
    assert Path(env_record["container"]["image"]).resolve() == image
    image_sha256 = _sha256(image)
    identity = {
        "image_sha256": image_sha256,
        "base_image": str(container.recipe(workdir / container.DEFINITION).base),
        "lock_sha256": _sha256(workdir / container.LOCK),
    }
    assert {key: env_record.get(key) for key in identity} == identity

    report = next((workdir / "reports").glob("*/report.md")).read_text()
    assert f"apptainer: {env_record['container']['image']}" in report
    for value in identity.values():
        assert value in report

    version = subprocess.run([str(SCRIPT), "apptainer", "version"], env=env, capture_output=True, text=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    record = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        "dirty": dirty,
        "command": " ".join(command),
        "config": SMALL_CONFIG,
        "apptainer": version.stdout.strip(),
        "image": str(image),
        "image_sha256": image_sha256,
        "image_bytes": image.stat().st_size,
        "image_built_by_this_run": built,
        "build_s": round(build_s),
        "workflow_s": round(run_s),
        "lock_sha256": identity["lock_sha256"],
        "base_image": identity["base_image"],
        "jobs_in_image": inside,
        "inside": {key: env_record.get(key) for key in ("python", "torch", "triton", "cuda_runtime", "os", "backend")},
    }
    (ROOT / "build" / "container-e2e.json").write_text(json.dumps(record, indent=1) + "\n")
