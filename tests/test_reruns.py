"""What a rerun of the workflow recomputes: nothing that finished and did not change (a run narrowed to another
kernel and back keeps every result of the first), and everything that is gone: a deleted result comes back with
the same command, a damaged one with the command its message names. The run's cost counts its own cases only."""

import json
import re

import pytest
import yaml

from workflow_support import SMALL_CONFIG, finished_small_run, job_counts, snakemake

DEVICE = "cpu-interpreter"
CASE_STAGES = ("correctness", "sweep", "timing", "profile")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return finished_small_run(tmp_path_factory.mktemp("reruns"))


def _configure(work, kernels):
    path = work / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**config, "kernels": kernels}))


def _result(work, stage, case="softmax/float32/M3_N5"):
    return work / "results" / DEVICE / stage / f"{case}.json"


@pytest.mark.workflow
def test_a_run_narrowed_to_another_kernel_and_back_keeps_the_finished_cases(work):
    kept = [_result(work, stage) for stage in CASE_STAGES] + [work / "results" / DEVICE / "calibration.json"]
    before = {p: p.stat().st_mtime_ns for p in kept}
    _configure(work, {"vector_add": {"dtypes": ["float32"], "shapes": [{"n": 5}]}})
    other = snakemake(work)
    assert other.returncode == 0, other.stdout[-3000:] + other.stderr[-3000:]
    counts = job_counts(other.stdout + other.stderr)
    assert all(counts[stage] == 1 for stage in CASE_STAGES) and "calibrate" not in counts  # vector_add's case only
    _configure(work, SMALL_CONFIG["kernels"])
    back = snakemake(work)
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-3000:]
    assert set(job_counts(back.stdout + back.stderr)) == {"specs", "environment", "report", "all"}, back.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in kept} == before
    # the report describes softmax's case alone, though results/ also holds vector_add's
    assert _result(work, "timing", "vector_add/float32/n5").is_file()
    run = json.loads((work / "reports" / DEVICE / "run.json").read_text())
    assert run["cases_planned"] == run["cases_timed"] == 1
    assert all(run["stages"][stage]["jobs"] == 1 for stage in CASE_STAGES)


@pytest.mark.workflow
def test_a_deleted_or_damaged_result_is_rebuilt_with_the_documented_command(work):
    # docs/troubleshooting.md: delete X and rerun
    timing = _result(work, "timing")
    timing.unlink()
    again = snakemake(work)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert timing.is_file(), "a deleted result was not rebuilt:\n" + again.stderr[-3000:]
    assert job_counts(again.stdout + again.stderr) == {"timing": 1, "report": 1, "all": 1}
    # a damaged file stops the stage that reads it, naming the command that rebuilds it
    timing.write_text(timing.read_text()[:100])
    stopped = snakemake(work)
    assert stopped.returncode != 0
    log = (work / "logs" / DEVICE / "report.log").read_text()
    [(command, path)] = re.findall(r"`(snakemake --cores 1 --force (\S+))`", log)
    assert path == str(timing.relative_to(work))
    rebuilt = snakemake(work, *command.split()[3:])
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:] + rebuilt.stderr[-3000:]
    assert job_counts(rebuilt.stdout + rebuilt.stderr) == {"timing": 1}
    final = snakemake(work)
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert json.loads(timing.read_text())["kernel"] == "softmax"
    assert (work / "reports" / DEVICE / "report.md").is_file()


def test_a_jobs_digest_follows_what_it_reads_of_the_specs_and_nothing_else():
    from kernelscope import cases

    def digests(**config):
        return cases.job_digests(cases.specs({**SMALL_CONFIG, **config}, DEVICE))

    first = digests()
    case = "softmax/float32/M3_N5"
    both = digests(kernels={**SMALL_CONFIG["kernels"], "vector_add": {"dtypes": ["float32"]}})
    assert both[case] == first[case] and both["calibration"] == first["calibration"]  # another kernel planned too
    assert digests(seeds=[0])[case] != first[case]  # a setting the case's jobs read
    assert digests(seeds=[0])["calibration"] == first["calibration"]  # ... and calibration does not
    narrowed = {"softmax": {**SMALL_CONFIG["kernels"]["softmax"], "variants": ["triton_row"]}}
    assert digests(kernels=narrowed)[case] != first[case]  # the case's own implementations
    assert digests(calibration={"dtypes": ["float16"]})["calibration"] != first["calibration"]
