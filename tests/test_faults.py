"""Faults: a variant that hangs, runs out of memory, fails to compile or computes wrong results is recorded, the
other implementations go on, and it never reaches a claim. A hang is bounded: a planted kernel that never
returns is ended by the per-implementation time limit, by a signal where Python can be interrupted, and by the
watchdog (which writes the partial result and ends the job) where it cannot, as in a GPU kernel that never
finishes."""

import dataclasses
import json
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import triton
import triton.language as tl

from kernelscope import correctness, faults, registry, sweep, timing, timing_stage
from kernelscope.spec import Implementation, Shape
from workflow_support import ROOT


@triton.jit
def _never_returns(out_ptr, n):
    """A planted kernel whose loop never ends (under the interpreter it keeps the CPU busy)."""
    i = 0
    while n > 0:
        i += 1
    tl.store(out_ptr, i)


def _hang(inputs, out, config):
    def run():
        _never_returns[(1,)](out, 1)
        return out

    return run


def _oom(inputs, out, config):
    def run():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 GiB")

    return run


def _wrong(inputs, out, config):
    return lambda: torch.zeros_like(out)


def planted_spec(*extra):
    spec = registry.get("softmax")
    base = [i for i in spec.implementations if i.name in ("torch", "triton_row")]
    return dataclasses.replace(spec, implementations=[*base, *extra])


def triton_impl(name, prepare):
    return Implementation(name, "triton", prepare, configs=lambda s, d: [{}], default_config=lambda s, d: {})


SHAPE = Shape({"M": 3, "N": 5}, "tiny")
ROW = registry.get("softmax").implementation("triton_row").default_config(SHAPE, torch.float32)


@pytest.fixture
def limit():
    faults.configure(1.0)
    yield
    faults.configure(None)
    faults.on_abandon(None)


def test_hanging_kernel_is_stopped_and_recorded_and_the_others_run(limit):
    spec = planted_spec(
        triton_impl("triton_hang", _hang), triton_impl("triton_oom", _oom), triton_impl("triton_wrong", _wrong)
    )
    started = time.monotonic()
    gate = correctness.check_case(spec, SHAPE, torch.float32, [0, 1])
    assert time.monotonic() - started < 30
    status = {r["implementation"]: r["status"] for r in gate["implementations"]}
    assert status == {
        "torch": "pass",
        "triton_row": "pass",
        "triton_hang": "timeout",
        "triton_oom": "oom",
        "triton_wrong": "fail",
    }
    hang = next(r for r in gate["implementations"] if r["implementation"] == "triton_hang")
    assert "1 s limit" in hang["failure"] and hang["ok"] is False
    # the timing stage does not time what failed the gate (as cli.cmd_timing passes it), so no claim is made of it
    failed = {r["implementation"]: r["failure"] for r in gate["implementations"] if r.get("ok") is False}
    settings = timing.TimingSettings.from_config(
        {
            "warmup": 1,
            "min_samples": 3,
            "max_samples": 3,
            "min_time_s": 0,
            "max_time_s": 0.2,
            "flush_l2": False,
            "clock_warmup_s": 0,
        }
    )
    timed = timing_stage.time_case(
        spec,
        SHAPE,
        torch.float32,
        {"triton_row": ROW, "triton_hang": {}, "triton_oom": {}, "triton_wrong": {}},
        settings,
        failed_correctness=failed,
    )
    by_name = {r["implementation"]: r for r in timed["implementations"] if r.get("block") != "A2"}
    assert {n: by_name[n]["status"] for n in ("triton_hang", "triton_oom", "triton_wrong")} == {
        n: "not_timed" for n in ("triton_hang", "triton_oom", "triton_wrong")
    }
    assert by_name["triton_row"]["status"] == "ok" and timed["aa_floor"] is not None


def test_hang_in_the_sweep_and_the_timing_stage_is_bounded(limit):
    spec = planted_spec(triton_impl("triton_hang", _hang))
    settings = timing.TimingSettings.from_config(
        {
            "warmup": 0,
            "min_samples": 1,
            "max_samples": 2,
            "min_time_s": 0,
            "max_time_s": 0.1,
            "flush_l2": False,
            "clock_warmup_s": 0,
        }
    )
    doc = sweep.sweep_case(spec, SHAPE, torch.float32, settings, max_configs=1)
    hang = next(v for v in doc["variants"] if v["implementation"] == "triton_hang")
    assert hang["best"] is None and hang["configs"][0]["fault"] == "timeout"
    assert sweep.best_configs(doc).keys() == {"triton_row"}
    timed = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_row": ROW, "triton_hang": {}}, settings)
    statuses = [(r["implementation"], r["status"]) for r in timed["implementations"]]
    assert ("triton_hang", "timeout") in statuses and statuses[-1] == ("torch", "ok")  # the A2 block still ran


def test_status_of_compile_and_wrapped_faults():
    class CompilationError(Exception):
        pass

    assert faults.status(CompilationError("bad tl.dot shape")) == "compile_error"
    try:
        try:
            raise faults.ImplementationTimeout("x")
        except faults.ImplementationTimeout as inner:
            raise RuntimeError("interpreter wrapped it") from inner
    except RuntimeError as outer:
        assert faults.status(outer) == "timeout"
    assert faults.status(ValueError("x")) == "error"


WATCHDOG_JOB = textwrap.dedent("""
    # A job whose implementation blocks where no signal reaches Python, as a CUDA synchronize on a kernel
    # that never finishes: SIGALRM is blocked, so only the watchdog can end it.
    import dataclasses, signal, sys, time
    from kernelscope import cli, registry, runtime
    runtime.select_backend()
    from kernelscope.spec import Implementation

    def stuck(inputs, out, config):
        def run():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        return run

    real = registry.get("softmax")
    planted = dataclasses.replace(real, implementations=[
        *[i for i in real.implementations if i.name == "torch"],
        Implementation("triton_stuck", "triton", stuck, configs=lambda s, d: [{}], default_config=lambda s, d: {})])
    registry.get = lambda name: planted
    cli.main(sys.argv[1:])
    print("not reached: the watchdog ends the process")
""")


def test_watchdog_writes_the_partial_result_when_a_hang_cannot_be_interrupted(tmp_path):
    import os

    from kernelscope import cases

    config = {
        "kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5}]}},
        "seeds": [0],
        "implementation_time_limit_s": 1,
    }
    specs = cases.specs(config, cases.INTERPRETER_KEY)
    specs["cases"][0].update(variants=["triton_stuck"], baselines=["torch"])
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    (tmp_path / "job.py").write_text(WATCHDOG_JOB)
    out = tmp_path / "correctness.json"
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "job.py"),
            "correctness",
            "--specs",
            str(tmp_path / "specs.json"),
            "--kernel",
            "softmax",
            "--shape",
            "M3_N5",
            "--dtype",
            "float32",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert time.monotonic() - started < 100
    assert run.returncode == 0, run.stderr[-2000:]
    assert "not reached" not in run.stdout and "still running" in run.stderr
    doc = json.loads(out.read_text())
    assert doc["abandoned"]["implementation"] == "triton_stuck" and doc["kernel"] == "softmax"
    status = {r["implementation"]: r["status"] for r in doc["implementations"]}
    assert status == {"torch": "pass", "triton_stuck": "timeout"}
