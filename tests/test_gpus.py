"""The per-GPU lock and the device binding, on pretend devices (KERNELSCOPE_PRETEND_GPUS): jobs spread over
every card, no two sampling sections ever overlap on one card, shared work never overlaps a sampler, a
stream of shared work cannot starve a sampler, and a killed job frees its card."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelscope import gpus

ROOT = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path, n: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            gpus.PRETEND_ENV: str(n),
            gpus.LOCK_DIR_ENV: str(tmp_path / "locks"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        }
    )
    env.pop(gpus.BOUND_ENV, None)
    return env


def _job(body: str, env: dict[str, str]) -> subprocess.Popen:
    """A stand-in job: binds like a real one, then runs ``body`` (which may use gpus, json, time, sys)."""
    code = "import json, sys, time\nfrom kernelscope import gpus\ngpus.bind('test')\n" + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _go(tmp_path: Path) -> str:
    return str(tmp_path / "go")


@pytest.mark.parametrize("n_devices", [1, 2, 8])
def test_jobs_spread_over_every_device(tmp_path, n_devices):
    env = _env(tmp_path, n_devices)
    jobs = []
    for _ in range(2 * n_devices):  # bound one after another, each alive while the next chooses
        job = _job("print(gpus.bound_uuid(), flush=True)\nsys.stdin.read()\n", env)
        jobs.append((job, job.stdout.readline().strip()))
    for job, _ in jobs:
        job.stdin.close()
        job.wait(timeout=30)
    chosen = [uuid for _, uuid in jobs]
    assert sorted(set(chosen)) == [f"PRETEND-{i}" for i in range(n_devices)]
    assert all(chosen.count(u) == 2 for u in set(chosen)), chosen  # the least-loaded card each time


SECTIONS = """
import pathlib
while not pathlib.Path({go!r}).exists():
    time.sleep(0.01)
for i in range(4):
    with gpus.shared("work"):
        time.sleep(0.03)
    with gpus.exclusive("sampling"):
        time.sleep(0.05)
print(json.dumps(gpus.summary()), flush=True)
"""


def _overlaps(spans):
    spans = sorted(spans)
    return [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]


@pytest.mark.parametrize("n_devices", [1, 2, 8])
def test_no_two_sampling_sections_overlap_on_one_device(tmp_path, n_devices):
    env = _env(tmp_path, n_devices)
    jobs = [_job(SECTIONS.format(go=_go(tmp_path)), env) for _ in range(3 * n_devices)]
    time.sleep(0.5)
    Path(_go(tmp_path)).touch()
    summaries = [json.loads(job.communicate(timeout=120)[0]) for job in jobs]
    by_device: dict[str, dict[str, list]] = {}
    for summary in summaries:
        assert summary["uuid"].startswith("PRETEND-") and summary["exclusive_s"] > 0
        for s in summary["sections"]:
            by_device.setdefault(summary["uuid"], {"exclusive": [], "shared": []})[s["mode"]].append(
                (s["start"], s["end"])
            )
    assert len(by_device) == n_devices
    for uuid, spans in by_device.items():
        assert len(spans["exclusive"]) == 3 * 4  # every job's four sections on its card
        assert not _overlaps(spans["exclusive"]), f"{uuid}: two samplers at once"
        for lo, hi in spans["exclusive"]:
            inside = [s for s in spans["shared"] if s[0] < hi and lo < s[1]]
            assert not inside, f"{uuid}: shared work ran inside a sampling section"
    if n_devices > 1:  # the cards are used at the same time
        all_exclusive = [(s, u) for u, spans in by_device.items() for s in spans["exclusive"]]
        assert any(
            a[0][0] < b[0][1] and b[0][0] < a[0][1] and a[1] != b[1] for a in all_exclusive for b in all_exclusive
        )


def test_a_stream_of_shared_work_does_not_starve_a_sampler(tmp_path):
    env = _env(tmp_path, 1)
    # two jobs whose shared sections overlap each other, so without the gate the lock is never free
    busy = """
    time.sleep(0.5)  # past the start-up, so the two workers' sections interleave as started
    t_end = time.time() + 6
    while time.time() < t_end:
        with gpus.shared("busy"):
            time.sleep(0.2)
    """
    workers = []
    for _ in range(2):  # half a section apart: one of them always holds the lock
        workers.append(_job(busy, env))
        time.sleep(0.6)
    sampler = _job(
        """
    t0 = time.time()
    with gpus.exclusive("sampling"):
        waited = time.time() - t0
    print(waited, flush=True)
    """,
        env,
    )
    waited = float(sampler.communicate(timeout=60)[0])
    for w in workers:
        w.wait(timeout=60)
    assert waited < 1.0, f"the sampler waited {waited:.2f} s behind shared work"


def test_a_killed_job_frees_its_device(tmp_path):
    env = _env(tmp_path, 1)
    holder = _job(
        """
    with gpus.exclusive("sampling"):
        print("held", flush=True)
        time.sleep(600)
    """,
        env,
    )
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    successor = _job(
        """
    t0 = time.time()
    with gpus.exclusive("sampling"):
        print(time.time() - t0, flush=True)
    """,
        env,
    )
    waited = float(successor.communicate(timeout=30)[0])
    assert waited < 2.0
    registry = json.loads((tmp_path / "locks" / "jobs.json").read_text())
    assert str(holder.pid) not in registry  # the dead job's entry is dropped


def test_sections_do_not_nest_and_do_nothing_unbound(tmp_path, monkeypatch):
    monkeypatch.setattr(gpus, "_BINDING", gpus._Binding())
    with gpus.exclusive("unbound"):  # the interpreter: no card, no lock
        pass
    assert gpus.summary() is None
    monkeypatch.setenv(gpus.PRETEND_ENV, "1")
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(gpus.BOUND_ENV, "")  # restored after the test: bind() sets it
    assert gpus.bind("test") == "PRETEND-0"
    with gpus.shared("outer"), pytest.raises(RuntimeError, match="do not nest"), gpus.exclusive("inner"):
        pass
    with gpus.exclusive("outer"), gpus.shared("inner"):  # shared work inside a sampler's section is its own
        pass
    summary = gpus.summary()
    assert [s["mode"] for s in summary["sections"]] == ["shared", "exclusive"]


def test_visible_devices_follow_cuda_visible_devices(monkeypatch):
    host = ["GPU-aaaa-1", "GPU-bbbb-2", "GPU-cccc-3"]
    monkeypatch.delenv(gpus.PRETEND_ENV, raising=False)
    monkeypatch.setattr(gpus, "_nvml_uuids", lambda: host)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.visible_devices() == host
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert gpus.visible_devices() == ["GPU-cccc-3", "GPU-aaaa-1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    assert gpus.visible_devices() == ["GPU-bbbb-2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,7,0")  # CUDA stops at the first invalid index
    assert gpus.visible_devices() == ["GPU-bbbb-2"]
