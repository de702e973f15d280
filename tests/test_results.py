"""Interrupted runs: no result file is ever half-written, every result file a later stage reads is checked
against its schema (a corrupt one fails with its path, what is wrong and the command that rebuilds it), and a
workflow killed mid-run resumes with the same command, keeping what it had computed."""

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from kernelscope import report, results
from workflow_support import ROOT, SMALL_CONFIG, copy_workflow


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    root = tmp_path_factory.mktemp("h200")
    with tarfile.open(ROOT / "reports" / "nvidia-h200" / "raw-results.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return root / "results" / "nvidia-h200"


def test_every_published_result_file_matches_its_schema(h200):
    kinds = {}
    for path in sorted(h200.rglob("*.json")):
        kind = results.kind_of(path)
        results.load(path)  # raises CorruptResult if the schema and the writers disagree
        kinds[kind] = kinds.get(kind, 0) + 1
    assert {"specs", "environment", "calibration", "correctness", "sweep", "timing", "profile"} <= set(kinds)


def test_truncated_result_names_its_path_and_the_rebuild_command(h200, tmp_path):
    path = h200 / "timing" / "softmax" / "float16" / "M4096_N1000.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # a job killed mid-write by something that is not kernelscope
    try:
        with pytest.raises(results.CorruptResult) as err:
            report.build(h200, tmp_path / "out")
    finally:
        path.write_text(text)
    msg = str(err.value)
    assert msg.startswith(f"{path} is not valid JSON") and f"snakemake --cores 1 --force {path}" in msg


def test_result_that_breaks_its_schema_says_what_is_wrong(h200, tmp_path):
    path = h200 / "correctness" / "softmax" / "float16" / "M4096_N1000.json"
    text = path.read_text()
    doc = json.loads(text)
    del doc["implementations"][1]["status"]
    path.write_text(json.dumps(doc))
    try:
        with pytest.raises(
            results.CorruptResult,
            match=re.escape(
                f"{path} is not a valid correctness result: 'status' is a required property (at implementations/1)"
            ),
        ):
            report.build(h200, tmp_path / "out")
    finally:
        path.write_text(text)
    timing = {
        "device": "d",
        "kernel": "k",
        "shape": "s",
        "dtype": "t",
        "primary_baseline": "torch",
        "implementations": [{"implementation": "torch", "status": "ok", "samples_us": [], "median_us": 1, "n": 1}],
    }
    bad = tmp_path / "timing" / "k" / "t" / "s.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps(timing))
    with pytest.raises(results.CorruptResult, match=r"\[\] should be non-empty \(at implementations/0/samples_us\)"):
        results.load(bad)


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([1.0, 2, float("nan"), 3.5], None),  # ints, floats and NaN are JSON Schema numbers
        ([1.0, True, 2.0], r"True is not of type 'number' \(at implementations/0/samples_us/1\)"),
        ([1.0, 2.0, "3.0"], r"'3.0' is not of type 'number' \(at implementations/0/samples_us/2\)"),
        ([1.0, None], r"None is not of type 'number' \(at implementations/0/samples_us/1\)"),
    ],
)
def test_the_fast_samples_check_gives_the_drafts_verdict_and_message(tmp_path, samples, message):
    # results.load checks long arrays of numbers in one pass; the verdict and the message must stay the draft's
    doc = {
        "device": "d",
        "kernel": "k",
        "shape": "s",
        "dtype": "t",
        "primary_baseline": "torch",
        "implementations": [{"implementation": "torch", "status": "ok", "samples_us": samples, "median_us": 1, "n": 1}],
    }
    path = tmp_path / "timing" / "k" / "t" / "s.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    if message is None:
        assert results.load(path)["implementations"][0]["samples_us"][:2] == [1.0, 2]
    else:
        with pytest.raises(results.CorruptResult, match=message):
            results.load(path)


def test_a_job_reading_a_corrupt_input_fails_naming_it(tmp_path):
    from kernelscope import cli

    specs = tmp_path / "specs.json"
    specs.write_text('{"device": "cpu-interpreter", "cases": [')
    with pytest.raises(SystemExit, match=re.escape(f"{specs} is not valid JSON")):
        cli.main(["environment", "--specs", str(specs), "--out", str(tmp_path / "env.json")])


def test_an_interrupted_write_leaves_the_previous_file(tmp_path):
    target = tmp_path / "tables" / "timing.csv"
    results.write_text(target, "old\n")
    with pytest.raises(KeyboardInterrupt), results.atomic(target) as tmp:
        tmp.write_text("half of the new")
        raise KeyboardInterrupt  # the job is killed mid-write
    assert target.read_text() == "old\n" and os.listdir(target.parent) == ["timing.csv"]


# Imported by every Python process of the first run below (on its PYTHONPATH): the job that writes HOLD waits, once
# its result is on disk and before it exits, until the test has sent its SIGTERM, so the interrupt always lands
# in the window in which a loaded machine first showed it: a finished result not yet recorded by Snakemake.
HOLD_EXIT = """
import os, sys, time
argv = sys.orig_argv
out = argv[argv.index("--out") + 1] if "--out" in argv else None
if argv[1:3] == ["-m", "kernelscope"] and out == os.environ["KERNELSCOPE_TEST_HOLD"]:
    exit_now = os._exit

    def held_exit(code):
        deadline = time.monotonic() + 300
        while not os.path.exists(os.environ["KERNELSCOPE_TEST_RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        exit_now(code)

    os._exit = held_exit
"""


@pytest.mark.workflow
def test_killed_workflow_resumes_with_the_same_command(tmp_path):
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work", SMALL_CONFIG)
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    command = [sys.executable, "-m", "snakemake", "--cores", "1"]
    done = work / "results" / "cpu-interpreter" / "correctness" / "softmax" / "float32" / "M3_N5.json"
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(HOLD_EXIT)
    release = tmp_path / "killed"
    held = {
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "hook"), env.get("PYTHONPATH")])),
        "KERNELSCOPE_TEST_HOLD": str(done.relative_to(work)),
        "KERNELSCOPE_TEST_RELEASE": str(release),
    }
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(command, cwd=work, env=held, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 600
    while not done.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert done.exists() and first.poll() is None, "the first run ended before it could be interrupted"
    # the whole workflow and its running job, as `kill`, a scheduler's time limit or a shutdown does (after a
    # SIGKILL, which no process can handle, Snakemake's lock stays: `snakemake --unlock` once, see
    # docs/troubleshooting.md); the job's result is written and the job has not exited
    os.killpg(first.pid, signal.SIGTERM)
    release.touch()
    first.wait(timeout=120)
    assert done.exists(), "the interrupt deleted a finished result:\n" + (tmp_path / "first.log").read_text()[-3000:]
    kept = (done.read_text(), done.stat().st_mtime_ns)
    again = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert (done.read_text(), done.stat().st_mtime_ns) == kept  # what was computed is not recomputed
    pages = work / "reports" / "cpu-interpreter"
    assert "### softmax · M3_N5 · float32" in (pages / "kernels" / "softmax.md").read_text()
    assert "## Appendix: what this report supports / does not support" in (pages / "details.md").read_text()
    leftovers = [p for p in work.rglob("*.tmp")]
    assert leftovers == []
    for path in (work / "results" / "cpu-interpreter").rglob("*.json"):
        results.load(path)
