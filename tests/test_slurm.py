"""The workflow on a real SLURM cluster: a one-node cluster on localhost (Debian's slurm-wlm and munge, which
.ci/run installs), the CPU configuration submitted through snakemake-executor-plugin-slurm with
profiles/slurm, end to end to the report. Skipped where slurm or the plugin is not installed.

The cluster has no accounting database (as many small clusters), so the plugin polls job status with squeue,
and the account is not looked up (--slurm-no-account)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernelscope import cases
from workflow_support import ROOT, SMALL_CONFIG, copy_workflow

DAEMONS = ("munged", "slurmctld", "slurmd")
# Jobs' srun reads the default path (the plugin's job scripts do not pass SLURM_CONF on), so the test's
# cluster writes it there, marked, and never overwrites a configuration it did not write.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by kernelscope tests/test_slurm.py\n"

needs_slurm = pytest.mark.skipif(
    not all(shutil.which(d, path="/usr/sbin:" + os.environ.get("PATH", "")) for d in DAEMONS) or os.geteuid() != 0,
    reason="slurm-wlm and munge are not installed (apt-get install slurm-wlm munge), or not root (the daemons run "
    "as root)",
)


def _conf(state: Path) -> str:
    return (
        MARK
        + "\n".join(
            [
                "ClusterName=kernelscope",
                "SlurmctldHost=localhost",
                "SlurmUser=root",
                "SlurmdUser=root",
                "SlurmctldPort=16817",
                "SlurmdPort=16818",
                "AuthType=auth/munge",
                f"StateSaveLocation={state}/state",
                f"SlurmdSpoolDir={state}/spool",
                f"SlurmctldPidFile={state}/slurmctld.pid",
                f"SlurmdPidFile={state}/slurmd.pid",
                f"SlurmctldLogFile={state}/slurmctld.log",
                f"SlurmdLogFile={state}/slurmd.log",
                # no cgroups in a container: plain process tracking
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "MpiDefault=none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory",
                "ReturnToService=2",
                # squeue keeps finished jobs visible this long: the plugin reads their final state there
                "MinJobAge=600",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                f"NodeName=localhost CPUs={os.cpu_count()} RealMemory=4000 State=UNKNOWN",
                "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
            ]
        )
        + "\n"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.read_text().startswith(MARK):
        pytest.skip(f"{SYSTEM_CONF} belongs to another cluster; not touching it")
    pytest.importorskip("snakemake_executor_plugin_slurm")
    state = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (state / sub).mkdir()
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.write_text(_conf(state))
    sbin = "/usr/sbin/"
    started = []
    munge_dir = Path("/run/munge")
    munge_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(munge_dir, "munge", "munge")
    if not Path("/etc/munge/munge.key").exists():
        subprocess.run([sbin + "mungekey", "--create"], check=True)
        shutil.chown("/etc/munge/munge.key", "munge", "munge")
    if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:  # no munged running yet
        # its pid file where the munge user can write (pytest's base temp dir is private to root)
        subprocess.run(
            ["runuser", "-u", "munge", "--", sbin + "munged", "--pid-file", str(munge_dir / "test-munged.pid")],
            check=True,
        )
        started.append(munge_dir / "test-munged.pid")
    for daemon in ("slurmctld", "slurmd"):
        subprocess.run([sbin + daemon], check=True)
        started.append(state / f"{daemon}.pid")
    deadline = time.monotonic() + 60
    while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline, (state / "slurmctld.log").read_text()[-2000:]
        time.sleep(1)
    yield state
    for pid_file in reversed(started):  # only the daemons this fixture started, by their pids
        if pid_file.exists():
            subprocess.run(["kill", pid_file.read_text().strip()], check=False)
    SYSTEM_CONF.unlink(missing_ok=True)


@pytest.mark.workflow
@needs_slurm
def test_cpu_configuration_runs_through_the_slurm_executor(cluster, tmp_path):
    work = copy_workflow(tmp_path, SMALL_CONFIG)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--profile",
            "profiles/slurm",
            "--slurm-no-account",
            "--slurm-status-command",
            "squeue",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--slurm-keep-successful-logs",
            # the profile's defaults are for GPU nodes; this node has 4 GB and a few cores
            "--default-resources",
            "mem_mb=500",
            "runtime=30",
            "cpus_per_task=1",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    report = work / "reports" / cases.INTERPRETER_KEY
    assert "### softmax · M3_N5 · float32" in (report / "kernels" / "softmax.md").read_text()
    assert "## Appendix: what this report supports / does not support" in (report / "details.md").read_text()
    # every job went through sbatch: the plugin keeps one log per SLURM job
    slurm_logs = list((work / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert {p.parts[-3] for p in slurm_logs} >= {"rule_correctness", "rule_sweep", "rule_timing", "rule_report"}


def test_slurm_profile_requests_gpus_only_through_standard_resources():
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    for rule, resources in profile.get("set-resources", {}).items():
        extra = str(resources.get("slurm_extra", ""))
        assert "--gres" not in extra and "--gpus" not in extra, rule  # the plugin refuses these since 1.9
    assert {r for r, res in profile["set-resources"].items() if "--exclusive" in res.get("slurm_extra", "")} == {
        "sweep",
        "timing",
        "calibrate",
        "ncu",
    }


@pytest.mark.workflow
def test_gpu_rules_request_standard_gpu_resources(tmp_path):
    from workflow_support import snakemake

    work = copy_workflow(tmp_path)
    gpu = snakemake(work, "--dry-run", "--config", "device=nvidia-h200", "gpu_model=h200")
    assert gpu.returncode == 0, gpu.stdout[-2000:]
    jobs = gpu.stdout.split("rule ")[1:]
    for job in jobs:
        name = job.split(":", 1)[0]
        wants_gpu = name in ("correctness", "sweep", "timing", "profile", "environment", "calibrate")
        assert ("gpu=1, gpu_model=h200" in job) == wants_gpu, job[:400]
    cpu = snakemake(work, "--dry-run")
    assert "gpu=" not in cpu.stdout  # an interpreter plan asks for no GPU
