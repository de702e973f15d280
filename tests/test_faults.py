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


def _run_job(tmp_path, script, limit_s, variants, env=()):
    """A correctness job of softmax M3_N5 float32 (seed 0) through ``script`` (which plants ``variants`` and calls
    the CLI), under ``implementation_time_limit_s: limit_s``: (the process, its result or None, seconds it took)."""
    import os

    from kernelscope import cases

    config = {
        "kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5}]}},
        "seeds": [0],
        "implementation_time_limit_s": limit_s,
    }
    specs = cases.specs(config, cases.INTERPRETER_KEY)
    specs["cases"][0].update(variants=variants, baselines=["torch"])
    (tmp_path / "specs.json").write_text(json.dumps(specs))
    (tmp_path / "job.py").write_text(script)
    out = tmp_path / "correctness.json"
    argv = ["correctness", "--specs", str(tmp_path / "specs.json"), "--kernel", "softmax", "--shape", "M3_N5"]
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, str(tmp_path / "job.py"), *argv, "--dtype", "float32", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **dict(env)},
    )
    return run, json.loads(out.read_text()) if out.exists() else None, time.monotonic() - started


def test_watchdog_writes_the_partial_result_when_a_hang_cannot_be_interrupted(tmp_path):
    run, doc, took = _run_job(tmp_path, WATCHDOG_JOB, 1, ["triton_stuck"])
    assert took < 100
    assert run.returncode == 0, run.stderr[-2000:]
    assert "not reached" not in run.stdout and "still running" in run.stderr
    assert doc["abandoned"]["implementation"] == "triton_stuck" and doc["kernel"] == "softmax"
    status = {r["implementation"]: r["status"] for r in doc["implementations"]}
    assert status == {"torch": "pass", "triton_stuck": "timeout"}


SLOW_JOB = textwrap.dedent("""
    # Correct implementations that take SLOW_RUN_S seconds on their first call: triton_slow where a signal can
    # interrupt it, triton_slow_blocked with SIGALRM blocked, as a CUDA synchronize on a long kernel (only the
    # watchdog could end it). Each writes to SLOW_RAN how long that call ran.
    import dataclasses, json, os, signal, sys, time
    from kernelscope import cli, registry, runtime
    runtime.select_backend()
    from kernelscope.spec import Implementation

    real = registry.get("softmax")
    torch_impl = real.implementation("torch")
    ran = {}

    def slow(name, blocks_alarm):
        def prepare(inputs, out, config):
            correct = torch_impl.prepare(inputs, out, config)

            def run():
                if name not in ran:
                    ran[name] = None
                    start = time.monotonic()
                    if blocks_alarm:
                        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
                    try:
                        time.sleep(float(os.environ["SLOW_RUN_S"]))
                    finally:
                        ran[name] = time.monotonic() - start
                        with open(os.environ["SLOW_RAN"], "w") as f:
                            json.dump(ran, f)
                        if blocks_alarm:  # an alarm that fired meanwhile lands here
                            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
                return correct()

            return run

        return Implementation(name, "eager", prepare, writes_out=False)

    planted = dataclasses.replace(
        real, implementations=[torch_impl, slow("triton_slow", False), slow("triton_slow_blocked", True)]
    )
    registry.get = lambda name: planted
    cli.main(sys.argv[1:])
""")


def test_a_correct_implementation_slower_than_the_grace_but_within_the_limit_is_not_stopped(tmp_path):
    # longer than faults.GRACE_S (a watchdog or alarm that fired after the grace, or any few seconds, would stop it)
    # and far below the limit: neither tier may call it hung
    run_s = faults.GRACE_S + 2
    env = {"SLOW_RUN_S": str(run_s), "SLOW_RAN": str(tmp_path / "ran.json")}
    run, doc, took = _run_job(tmp_path, SLOW_JOB, 60, ["triton_slow", "triton_slow_blocked"], env)
    assert run.returncode == 0 and "still running" not in run.stderr, run.stderr[-2000:]
    assert "abandoned" not in doc
    status = {r["implementation"]: (r["status"], r["failure"]) for r in doc["implementations"]}
    assert status == {n: ("pass", None) for n in ("torch", "triton_slow", "triton_slow_blocked")}
    ran = json.loads((tmp_path / "ran.json").read_text())
    assert all(run_s <= ran[n] < run_s + 5 for n in ("triton_slow", "triton_slow_blocked")), ran


def test_an_implementation_still_running_at_the_limit_is_stopped_there(tmp_path):
    limit = 3
    env = {"SLOW_RUN_S": "60", "SLOW_RAN": str(tmp_path / "ran.json")}
    run, doc, took = _run_job(tmp_path, SLOW_JOB, limit, ["triton_slow"], env)
    assert run.returncode == 0, run.stderr[-2000:]
    [slow] = [r for r in doc["implementations"] if r["implementation"] == "triton_slow"]
    assert slow["status"] == "timeout" and f"{limit} s limit" in slow["failure"]
    ran = json.loads((tmp_path / "ran.json").read_text())["triton_slow"]
    # stopped at the limit, not long before or after it; the limit counts from the start of the implementation's
    # checks (its inputs, the reference, then this first call), so the call itself ran a little less
    assert limit - 1 < ran < limit + 1, ran


def test_an_oom_is_run_again_after_a_wait_and_recorded_only_if_it_persists(monkeypatch):
    monkeypatch.setattr(faults, "oom_attempts", lambda: 3)
    monkeypatch.setattr(faults, "OOM_WAIT_S", 0.0)
    calls = []

    def short_of_memory(times):
        def run():
            calls.append(1)
            if len(calls) <= times:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return "done"

        return run

    retried = []
    assert faults.retry_oom(short_of_memory(2), retried) == "done"
    assert len(calls) == 3 and len(retried) == 2 and "Tried to allocate 2.00 GiB" in retried[0]
    calls.clear()
    with pytest.raises(torch.OutOfMemoryError):  # still short after the third attempt: the fault is recorded
        faults.retry_oom(short_of_memory(3))
    assert len(calls) == 3

    def wrong():
        calls.append(1)
        raise ValueError("not a memory fault")

    calls.clear()
    with pytest.raises(ValueError):  # any other fault is not run again
        faults.retry_oom(wrong)
    assert len(calls) == 1


def test_without_a_cuda_device_an_oom_is_recorded_at_once():
    # the interpreter's jobs share no card, so there is nothing to wait for
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert faults.oom_attempts() == 1


_SHORT = {"left": 0}


def _short_once(inputs, out, config):
    """A correct kernel whose first call of each prepared closure finds the card short of memory while _SHORT
    says so (another job's memory, freed by the time it runs again)."""

    def run():
        if _SHORT["left"] > 0:
            _SHORT["left"] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB")
        out.copy_(torch.softmax(inputs["x"].float(), dim=-1).to(out.dtype))
        return out

    return run


def test_sweep_correctness_and_timing_run_an_oom_again_and_keep_the_config(monkeypatch):
    monkeypatch.setattr(faults, "oom_attempts", lambda: 3)
    monkeypatch.setattr(faults, "OOM_WAIT_S", 0.0)
    spec = planted_spec(triton_impl("triton_short", _short_once))
    settings = timing.TimingSettings.from_config(
        {"warmup": 0, "min_samples": 1, "max_samples": 2, "min_time_s": 0, "max_time_s": 0.1, "flush_l2": False}
    )
    _SHORT["left"] = 1
    doc = sweep.sweep_case(spec, SHAPE, torch.float32, settings, max_configs=1)
    short = next(v for v in doc["variants"] if v["implementation"] == "triton_short")
    assert short["configs"][0]["status"] == "ok" and len(short["configs"][0]["oom_retries"]) == 1
    _SHORT["left"] = 2
    gate = correctness.check_case(spec, SHAPE, torch.float32, [0])
    rec = next(r for r in gate["implementations"] if r["implementation"] == "triton_short")
    assert rec["status"] == "pass" and len(rec["oom_retries"]) == 2
    _SHORT["left"] = 1
    timed = timing_stage.time_case(spec, SHAPE, torch.float32, {"triton_row": ROW, "triton_short": {}}, settings)
    rec = next(r for r in timed["implementations"] if r["implementation"] == "triton_short" and r.get("block") != "A2")
    assert rec["status"] == "ok" and len(rec["oom_retries"]) == 1
    # and where the card stays short, each stage records the fault as before
    _SHORT["left"] = 10**6
    doc = sweep.sweep_case(spec, SHAPE, torch.float32, settings, max_configs=1)
    short = next(v for v in doc["variants"] if v["implementation"] == "triton_short")
    assert short["best"] is None and short["configs"][0]["fault"] == "oom"
