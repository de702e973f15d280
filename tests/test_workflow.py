"""The real Snakemake workflow: the plan for the default config, config validation with clear errors, and
an end-to-end CPU run whose report has every section and supports no performance claim."""

import json

import pytest

from kernelscope import cases, catalog, report, runtime
from workflow_support import ROOT, copy_workflow, finished_small_run, job_counts, snakemake

STAGES = ("correctness", "sweep", "timing", "profile")


@pytest.mark.workflow
def test_dry_run_lists_every_stage_for_every_configured_case(tmp_path):
    import yaml

    work = copy_workflow(tmp_path)
    run = snakemake(work, "--dry-run")
    assert run.returncode == 0, run.stderr[-3000:]
    counts = job_counts(run.stdout)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    planned = cases.plan(config, runtime.INTERPRETER_KEY)
    assert "kernels" not in config  # every kernel module, every declared dtype
    assert {c.kernel for c in planned} == set(catalog.load()["kernels"])
    for stage in STAGES:
        assert counts[stage] == len(planned), stage
    assert counts["report"] == counts["environment"] == counts["calibrate"] == 1
    assert "ncu" not in counts  # optional stage, off by default
    with_ncu = job_counts(snakemake(work, "--dry-run", "--config", "ncu=True").stdout)
    assert with_ncu["ncu"] == len(planned)
    first = planned[0]
    seed = f"{first.kernel}/{first.dtype}/{first.shape}"
    some = job_counts(snakemake(work, "--dry-run", "--config", f"ncu=[{seed}, vector_add]").stdout)
    assert some["ncu"] == 1 + sum(c.kernel == "vector_add" for c in planned)
    assert first.kernel != "vector_add"
    bad = snakemake(work, "--dry-run", "--config", "ncu=[softmax/float16/M1_N1]")
    assert bad.returncode != 0 and "ncu names ['softmax/float16/M1_N1']" in bad.stdout + bad.stderr


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("kernels={nosuch: {}}", "unknown kernel(s) ['nosuch']"),
        ("kernels={softmax: {dtypes: [float64]}}", "float64"),
        ("seeds=[-1]", "-1"),
        ("kernels={matmul: {dtypes: [float32]}}", "dtype(s) ['float32'] not supported"),
    ],
)
def test_bad_config_fails_with_a_message_naming_the_problem(tmp_path, override, message):
    work = copy_workflow(tmp_path)
    run = snakemake(work, "--dry-run", "--config", override)
    assert run.returncode != 0
    assert message in run.stdout + run.stderr


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    return finished_small_run(tmp_path_factory.mktemp("run"))


@pytest.mark.workflow
def test_cpu_run_writes_a_report_with_every_section(cpu_run):
    out = cpu_run / "reports" / runtime.INTERPRETER_KEY
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    details, kernel = (out / "details.md").read_text(), (out / "kernels" / "softmax.md").read_text()
    for page, heading in (
        (md, "## Environment in brief"),
        (md, "## What this run supports and does not"),
        (details, "## Environment"),
        (details, "## Measured ceilings"),
        (details, "## Method"),
        (details, "## Appendix: what this report supports / does not support"),
        (details, "## Reference numbers from elsewhere (not comparable)"),
        (kernel, "## Kernel: softmax"),
        (kernel, "### softmax · M3_N5 · float32"),
    ):
        assert heading in page, heading
    assert "INTERPRETER RUN" in md and "INTERPRETER RUN" in html
    assert "Any performance comparison: this run used Triton's interpreter" in md
    supported = md.split("Supports:", 1)[1].split("Does not support:", 1)[0]
    assert "faster" not in supported and "slower" not in supported
    assert "Correctness of every passing implementation" in supported
    assert "Ranking this run against the reference row 'seed 000" in details
    assert "Nsight Compute: stage not run for this case" in kernel
    # its one case was timed: the answer table says so, and why that supports no comparison
    answer = md.split("## The answer", 1)[1].split("\n## ", 1)[0]
    assert "| softmax | – | 1 of 1 cases timed, under the interpreter: no comparison |" in answer, answer
    assert "no timing result" not in answer
    for table in ("timing", "samples", "correctness", "sweep", "profile", "claims"):
        assert (cpu_run / "reports" / runtime.INTERPRETER_KEY / "tables" / report.table_file(table)).is_file()


@pytest.mark.workflow
def test_a_reference_that_raises_is_the_kernels_fault_and_the_report_is_still_built(tmp_path):
    case = {"dtypes": ["float32"], "shapes": [{"n": 100}]}
    small = {"kernels": {"vector_add": case}, "seeds": [0], "calibration": {"dtypes": ["float32"]}}
    work = copy_workflow(tmp_path, small)
    module = work / "kernels" / "vector_add.py"
    head = "def reference(inputs: Inputs) -> torch.Tensor:\n"
    assert module.read_text().count(head) == 1
    module.write_text(module.read_text().replace(head, head + '    raise RuntimeError("planted reference bug")\n'))
    run = snakemake(work)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = work / "results" / runtime.INTERPRETER_KEY
    why = "the reference of vector_add raised RuntimeError: planted reference bug"
    gate = json.loads((results / "correctness/vector_add/float32/n100.json").read_text())
    assert gate["reference_error"] == why and not gate["gate_live"]
    assert {r["status"] for r in gate["implementations"] + gate["negative_controls"]} == {"reference_error"}
    swept = json.loads((results / "sweep/vector_add/float32/n100.json").read_text())
    assert [(v["status"], v["reason"]) for v in swept["variants"]] == [
        ("reference_error", f"not swept: {why}, so no config could be checked")
    ]
    md = (work / "reports" / runtime.INTERPRETER_KEY / "report.md").read_text()
    assert f"Anything about 1 vector_add case(s) (n100 float32): {why}, so no implementation or negative" in md
    assert "| vector_add | – | no timing result (the reference failed on 1 of 1 cases) |" in md
    kernel = (work / "reports" / runtime.INTERPRETER_KEY / "kernels" / "vector_add.md").read_text()
    assert f"The reference failed: {why}. No implementation or negative control" in kernel


@pytest.mark.workflow
def test_cpu_run_records_gate_controls_timing_and_environment(cpu_run):
    results = cpu_run / "results" / runtime.INTERPRETER_KEY
    gate = json.loads((results / "correctness/softmax/float32/M3_N5.json").read_text())
    # every control rejected, but gluon_smem's, which sits out beside gluon_smem (GPU only, rows of N >= 8192)
    controls = {c["implementation"]: c for c in gate["negative_controls"]}
    sat_out = controls.pop("gluon_smem_sum_skips_a_slot")
    assert gate["gate_live"] and all(c["rejected"] for c in controls.values())
    assert sat_out["status"] == "unsupported" and sat_out["rejected"] is None
    # every implementation passes, except triton_split, which is not run on rows this narrow (and says why), and
    # gluon_smem, for the reason its control gives
    statuses = {r["implementation"]: r["status"] for r in gate["implementations"]}
    assert statuses.pop("triton_split") == "unsupported"
    gluon = next(r for r in gate["implementations"] if r["implementation"] == "gluon_smem")
    assert statuses.pop("gluon_smem") == "unsupported" and gluon["reason"] == sat_out["reason"]
    assert set(statuses.values()) == {"pass"} and len(statuses) == 5
    timing = json.loads((results / "timing/softmax/float32/M3_N5.json").read_text())
    blocks = [r.get("block") for r in timing["implementations"]]
    assert blocks[0] == "A1" and blocks[-1] == "A2" and timing["aa_floor"] is not None
    for rec in timing["implementations"]:
        if rec["implementation"] == "triton_split":
            assert rec["status"] == "unsupported" and "fits one program" in rec["reason"]
            continue
        if rec["implementation"] == "gluon_smem":
            assert rec["status"] == "unsupported" and rec["reason"] == gluon["reason"]
            continue
        assert rec["status"] == "ok", rec
        assert len(rec["samples_us"]) == rec["n"] >= 1  # every sample kept
        assert rec["n"] >= 10 or rec["target_reached"] is False  # fewer than min_samples only at the time cap
        # what the job spent on it, measured apart: building the callable, then everything up to the last sample;
        # A2 times A1's closure again, so its preparation and first call are A1's
        if rec.get("block") != "A2":
            assert "first_call_ms" in rec and 0 <= rec["prepare_ms"] / 1e3 <= rec["job_wall_s"]
        else:
            assert "first_call_ms" not in rec and "prepare_ms" not in rec
        assert rec["wall_s"] <= rec["job_wall_s"]
    env = json.loads((results / "environment.json").read_text())
    assert env["triton_interpreter"] is True and env["torch"] and env["triton"] and env["config_hash"]
    profile = json.loads((results / "profile/softmax/float32/M3_N5.json").read_text())
    assert profile["captured"] is False and "interpreter" in profile["reason"]


@pytest.mark.workflow
def test_rerun_on_another_device_key_does_not_overwrite(cpu_run):
    first = (cpu_run / "reports" / runtime.INTERPRETER_KEY / "report.md").read_text()
    run = snakemake(cpu_run, "--dry-run", "--config", "device=other-label")
    # a label of the user's own: planned under its own key, beside the first run's results
    assert "results/other-label/specs.json" in run.stdout
    assert (cpu_run / "reports" / runtime.INTERPRETER_KEY / "report.md").read_text() == first


def test_a_job_refuses_to_write_under_another_machines_key(tmp_path):
    """A container started without --nv sees no GPU: its results must not land under the GPU's key."""
    from kernelscope import cli

    specs = {
        "device": "nvidia-h200",
        "hardware": "nvidia-h200",
        "interpreter": False,
        "config_hash": "x",
        "seeds": [0],
        "timing": {},
        "sweep": {},
        "calibration": {},
        "cases": [],
    }
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    with pytest.raises(SystemExit, match="planned for device 'nvidia-h200' but runs on 'cpu-interpreter'.*--nv"):
        cli.main(["environment", "--specs", str(path), "--out", str(tmp_path / "env.json")])
    assert not (tmp_path / "env.json").exists()


def test_selecting_ncu_cases_leaves_the_config_hash_alone():
    # Profiling more cases must not invalidate (and re-run) every measurement of the plan.
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert cases.config_hash({**config, "ncu": ["softmax"]}) == cases.config_hash(config)
    assert cases.config_hash({**config, "seeds": [0]}) != cases.config_hash(config)


def test_sender_supplied_commit_wins_over_a_copied_git(monkeypatch):
    from kernelscope import environment

    monkeypatch.setenv("KERNELSCOPE_GIT_COMMIT", "abc123")
    monkeypatch.setenv("KERNELSCOPE_GIT_DIRTY", "0")
    info = environment.git_info(str(ROOT))
    assert info["commit"] == "abc123" and info["dirty"] is False and info["source"].startswith("environment")
    monkeypatch.delenv("KERNELSCOPE_GIT_COMMIT")
    assert environment.git_info(str(ROOT))["source"] == "git"


@pytest.mark.workflow
def test_compare_rule_runs_against_a_copied_run_and_refuses_interpreter_timings(cpu_run):
    import shutil

    mine = cpu_run / "results" / runtime.INTERPRETER_KEY
    other = cpu_run / "results" / "laptop-run"
    shutil.copytree(mine, other, dirs_exist_ok=True)
    run = snakemake(cpu_run, "--config", "compare_with=[laptop-run]")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    md = (cpu_run / "reports" / runtime.INTERPRETER_KEY / "compare" / "laptop-run" / "report.md").read_text()
    assert "NOT COMPARABLE" in md and "timed Triton's CPU interpreter" in md
    own = snakemake(cpu_run, "--dry-run", "--config", f"compare_with=[{runtime.INTERPRETER_KEY}]")
    assert own.returncode != 0 and "compare_with names this run's own results" in own.stdout + own.stderr
    missing = snakemake(cpu_run, "--dry-run", "--config", "compare_with=[nowhere]")
    assert missing.returncode != 0 and "results/nowhere/specs.json not found" in missing.stdout + missing.stderr
    assert "copy the other run's results/<device>/ directory" in missing.stdout + missing.stderr
