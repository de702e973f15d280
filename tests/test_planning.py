"""Planning: every way to get the config wrong is refused before any job runs, with the field, the value and
what is allowed; and the plan depends on the config, not on the machine that parses the Snakefile (no torch,
no GPU needed to plan a GPU run)."""

import copy
import json
import sys

import pytest
import yaml

from kernelscope import cases, catalog, configuration
from workflow_support import ROOT, copy_workflow, snakemake

SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
BASE = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
CPU = cases.INTERPRETER_KEY


def config(**overrides):
    doc = copy.deepcopy(BASE)
    doc.update(overrides)
    return doc


def refused(doc, key=CPU):
    with pytest.raises(cases.ConfigError) as err:
        cases.specs(doc, key)
    return str(err.value)


def schema_error(doc):
    with pytest.raises(cases.ConfigError) as err:
        configuration.check(doc, SCHEMA, configuration.Sources([], {}))
    return str(err.value)


def output(run):
    return run.stdout + run.stderr


def softmax(**entry):
    return {"softmax": {"dtypes": ["float32"], **entry}}


# --- kernels, implementations, dtypes ---------------------------------------------------------------------


def test_unknown_kernel():
    msg = refused(config(kernels={"nosuch": {}}))
    assert "unknown kernel(s) ['nosuch']" in msg and "'softmax'" in msg


def test_unknown_variant():
    msg = refused(config(kernels=softmax(variants=["triton_magic"])))
    assert "kernels.softmax.variants" in msg and "['triton_magic']" in msg and "triton_row" in msg


def test_unknown_baseline():
    msg = refused(config(kernels=softmax(baselines=["torch", "cudnn"])))
    assert "kernels.softmax.baselines" in msg and "['cudnn']" in msg and "torch_compile" in msg


def test_primary_baseline_cannot_be_left_out():
    msg = refused(config(kernels=softmax(baselines=["torch_compile"])))
    assert "leaves out 'torch'" in msg and "primary baseline" in msg


def test_selected_implementations_reach_the_specs():
    doc = cases.specs(config(kernels=softmax(variants=["triton_online"], baselines=["torch"])), CPU)
    assert {(tuple(c["variants"]), tuple(c["baselines"])) for c in doc["cases"]} == {(("triton_online",), ("torch",))}


def test_sweep_tie_margin_reaches_the_specs_from_the_schema():
    """The tie margin's default is written once, in the config schema; a config's own value replaces it."""
    assert SCHEMA["properties"]["sweep"]["properties"]["keep_default_within"]["default"] == 0.03
    assert cases.specs(config(), CPU)["sweep"]["keep_default_within"] == 0.03
    mine = config(sweep={**BASE["sweep"], "keep_default_within": 0.0})
    assert cases.specs(mine, CPU)["sweep"]["keep_default_within"] == 0.0


def test_undeclared_dtype():
    msg = refused(config(kernels={"matmul": {"dtypes": ["float32"]}}))
    assert "kernels.matmul.dtypes" in msg and "['float32'] not supported" in msg and "float16" in msg


def test_unknown_shape_set():
    msg = refused(config(kernels=softmax(shape_set="huge")))
    assert "kernels.softmax.shape_set" in msg and "'huge'" in msg and "['cpu', 'gpu']" in msg


# --- shapes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ({"M": 4}, "lacks ['N']"),
        ({"M": 4, "N": 8, "Q": 3}, "unknown parameter(s) ['Q']"),
        ({"M": 0, "N": 8}, "M=0 in {'M': 0, 'N': 8} is a size; allowed: an integer >= 1"),
        ({"M": -4, "N": 8}, "M=-4 in {'M': -4, 'N': 8} is a size; allowed: an integer >= 1"),
        ({"M": 2.5, "N": 8}, "M=2.5 in {'M': 2.5, 'N': 8} is not an integer"),
        ({"M": True, "N": 8}, "M=True in {'M': True, 'N': 8} is not an integer"),
    ],
    ids=["missing", "extra", "zero", "negative", "non-integer", "boolean"],
)
def test_bad_shape(shape, message):
    msg = refused(config(kernels=softmax(shapes=[shape])))
    assert msg.startswith("kernels.softmax.shapes: ") and message in msg, msg


def test_switch_parameter_takes_only_0_or_1():
    shape = {"B": 1, "H": 2, "S": 16, "D": 64, "causal": 2}
    msg = refused(config(kernels={"attention": {"dtypes": ["float16"], "shapes": [shape]}}))
    assert "causal=2" in msg and "switch; allowed: 0 or 1" in msg


def test_zero_switch_and_optional_size_are_accepted():
    doc = cases.specs(
        config(
            kernels={
                "layernorm": {"dtypes": ["float32"], "shapes": [{"M": 3, "N": 5, "stride": 8}]},
                "attention": {"dtypes": ["float16"], "shapes": [{"B": 1, "H": 1, "S": 16, "D": 16, "causal": 0}]},
            }
        ),
        CPU,
    )
    assert [c["shape"] for c in doc["cases"]] == ["M3_N5_stride8", "B1_H1_S16_D16_causal0"]


def test_schema_refuses_non_integer_dims_before_planning():
    msg = schema_error(config(kernels=softmax(shapes=[{"M": "four", "N": 8}])))
    assert "kernels.softmax.shapes[0].M: 'four' is not of type 'integer'; allowed: an integer" in msg
    # a quoted number in a config file is a string, as YAML reads it (the command line's digits are typed)
    assert "kernels.softmax.shapes[0].N: '8' is not of type 'integer'" in schema_error(
        config(kernels=softmax(shapes=[{"M": 4, "N": "8"}]))
    )


def test_shape_that_cannot_fit_the_target_device():
    huge = {"M": 2**20, "N": 2**17}  # 2^37 fp32 elements in and out: 1 TiB
    msg = refused(config(kernels=softmax(shapes=[huge])), "nvidia-h200")
    assert "M1048576_N131072 at float32 needs at least 1024.0 GiB" in msg and "nvidia-h200 has 140.4 GiB" in msg
    assert "needs at least" in refused(
        config(kernels=softmax(shapes=[{"M": 2**15, "N": 2**15}]), device_memory_gib=4), "my-gpu"
    )
    cases.specs(config(kernels=softmax(shapes=[huge])), "some-unknown-gpu")  # memory unknown: not checked


def test_shape_that_cannot_fit_this_machine_is_refused_for_the_interpreter(monkeypatch):
    # under the interpreter the tensors live in host memory: M=N=99999999999 crashed every job before
    assert cases.host_memory_gib() > 0
    msg = refused(config(kernels=softmax(shapes=[{"M": 99999999999, "N": 99999999999}])))
    assert "M99999999999_N99999999999 at float32 needs at least" in msg
    assert f"cpu-interpreter (this machine's memory) has {cases.host_memory_gib():.1f} GiB" in msg
    monkeypatch.setattr(cases, "host_memory_gib", lambda: 1.0)
    two_gib = {"M": 2**14, "N": 2**14}  # 2^28 fp32 elements in and out: 2 GiB
    msg = refused(config(kernels=softmax(shapes=[two_gib])))
    assert "needs at least 2.0 GiB" in msg and "has 1.0 GiB" in msg
    cases.specs(config(kernels=softmax(shapes=[two_gib]), device_memory_gib=4), CPU)  # the config's memory wins


def test_footprint_formula_matches_bytes_moved():
    from kernelscope import registry
    from kernelscope.spec import DTYPES, Shape

    for name, entry in catalog.load()["kernels"].items():
        spec = registry.get(name)
        for shapes in entry["shape_sets"].values():
            for shape in shapes:
                for dtype in entry["dtypes"]:
                    want = spec.bytes_moved(Shape(shape["params"], ""), DTYPES[dtype])
                    assert catalog.footprint_bytes(entry, shape["params"], dtype) == pytest.approx(want)


# --- timing, comparison ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "settings", "message"),
    [
        ("timing", {"min_samples": 500, "max_samples": 100}, "timing: min_samples=500 exceeds max_samples=100"),
        ("timing_interpreter", {"min_time_s": 2.0, "max_time_s": 1.0}, "timing_interpreter: min_time_s=2.0 exceeds"),
    ],
)
def test_timing_bounds_out_of_order(block, settings, message):
    msg = refused(config(**{block: {**BASE[block], **settings}}))
    assert message in msg and "allowed:" in msg


def test_sweep_timing_bounds_out_of_order():
    sweep = copy.deepcopy(BASE["sweep"])
    sweep["timing"].update(min_samples=300, max_samples=200)
    assert "sweep.timing: min_samples=300 exceeds max_samples=200" in refused(config(sweep=sweep))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"warmup": -1}, "-1 is less than the minimum of 0"),
        ({"min_samples": 0}, "0 is less than the minimum of 1"),
        ({"max_time_s": 0}, "0 is less than or equal to the minimum of 0"),
        ({"target_rel_ci": 1.5}, "1.5 is greater than or equal to the maximum of 1"),
        ({"flush_l2": "yes"}, "'yes' is not of type 'boolean'"),
        ({"warmup": 2.5}, "2.5 is not of type 'integer'"),
    ],
)
def test_schema_refuses_timing_out_of_range(settings, message):
    msg = schema_error(config(timing={**BASE["timing"], **settings}))
    assert f"timing.{next(iter(settings))}: {message}; allowed: " in msg


def test_time_limit_must_be_positive():
    assert "0 is less than or equal to the minimum of 0" in schema_error(config(implementation_time_limit_s=0))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nvidia-h100", "compare_with: 'nvidia-h100' is not a list"),
        (["NVIDIA H100"], "compare_with: ['NVIDIA H100'] are not device keys"),
        ([CPU], "compare_with names this run's own results (cpu-interpreter)"),
    ],
)
def test_malformed_comparison_request(value, message):
    assert message in refused(config(compare_with=value))


def test_comparison_with_a_run_that_is_not_here_says_to_copy_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    msg = refused(config(compare_with=["nvidia-h100", "laptop"]))
    assert "results/nvidia-h100/specs.json, results/laptop/specs.json not found" in msg
    assert "copy the other run's results/<device>/ directory" in msg
    assert "to results/nvidia-h100/, results/laptop/ here" in msg
    for other in ("nvidia-h100", "laptop"):
        (tmp_path / "results" / other).mkdir(parents=True)
        (tmp_path / "results" / other / "specs.json").write_text("{}")
    cases.specs(config(compare_with=["nvidia-h100", "laptop"]), CPU)


def test_schema_refuses_malformed_comparison_request():
    assert "is not of type 'array'" in schema_error(config(compare_with="nvidia-h100"))
    assert "has non-unique elements" in schema_error(config(compare_with=["a", "a"]))


# --- the config from the command line and from config files ----------------------------------------------


def test_command_line_strings_are_read_as_yaml_where_the_schema_wants_no_string():
    # what Snakemake hands over for --config seeds=[0] 'timing={...}' ncu=true label=null 'kernels={...}'
    given = {
        "seeds": ["0", "2"],
        "timing": {"warmup": "3", "max_time_s": "0.5", "flush_l2": "false"},
        "ncu": "true",
        "label": "null",
        "device_memory_gib": "null",
        "device": "auto",
        "kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": "4", "N": "8", "reason": "1024"}]}},
        "sweep": {"max_configs_interpreter": "2", "timing_interpreter": {"min_samples": "x"}},
        "external_references": [{"label": "a", "torch_median_us": "31.5"}],
    }
    assert configuration.typed_overrides(given, SCHEMA) == {
        "seeds": [0, 2],
        "timing": {"warmup": 3, "max_time_s": 0.5, "flush_l2": False},
        "ncu": True,
        "label": None,
        "device_memory_gib": None,
        "device": "auto",
        "kernels": {"softmax": {"dtypes": ["float32"], "shapes": [{"M": 4, "N": 8, "reason": "1024"}]}},
        # not a number: left as it is, for the schema to refuse with the config file's message
        "sweep": {"max_configs_interpreter": 2, "timing_interpreter": {"min_samples": "x"}},
        "external_references": [{"label": "a", "torch_median_us": 31.5}],  # a key the schema leaves open
    }
    assert configuration.typed_overrides({"ncu": ["softmax", "1"], "label": "1"}, SCHEMA) == {
        "ncu": ["softmax", "1"],  # strings where the schema wants strings
        "label": "1",
    }


# every override the README and the config's comments show, and the numbers, booleans and lists of each block
OVERRIDES = [
    "seeds=[0]",
    "timing_interpreter={warmup: 3, max_time_s: 0.5, flush_l2: false}",
    "sweep={max_configs_interpreter: 2, timing_interpreter: {min_samples: 4, max_samples: 6}}",
    "kernels={softmax: {dtypes: [float32], shapes: [{M: 3, N: 5}]}, vector_add: {dtypes: [float32]}}",
    "ncu=[softmax]",
    "profile={calls: 2}",
    "implementation_time_limit_s=60",
    "label=second-run",
    "compare_with=[laptop-run]",
]
AS_A_FILE = """seeds: [0]
timing_interpreter: {warmup: 3, max_time_s: 0.5, flush_l2: false}
sweep: {max_configs_interpreter: 2, timing_interpreter: {min_samples: 4, max_samples: 6}}
kernels: {softmax: {dtypes: [float32], shapes: [{M: 3, N: 5}]}, vector_add: {dtypes: [float32]}}
ncu: [softmax]
profile: {calls: 2}
implementation_time_limit_s: 60
label: second-run
compare_with: [laptop-run]
"""


@pytest.mark.workflow
def test_command_line_overrides_plan_what_the_same_config_file_plans(tmp_path):
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    (work / "results" / "laptop-run").mkdir(parents=True)
    (work / "results" / "laptop-run" / "specs.json").write_text("{}")
    specs = work / "results" / "second-run" / "specs.json"
    run = snakemake(work, str(specs.relative_to(work)), "--config", *OVERRIDES)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads(specs.read_text())
    assert doc["seeds"] == [0] and doc["limits"] == {"implementation_s": 60} and doc["profile"] == {"calls": 2}
    assert {k: doc["timing"][k] for k in ("warmup", "max_time_s", "flush_l2", "min_samples")} == {
        "warmup": 3,
        "max_time_s": 0.5,
        "flush_l2": False,
        "min_samples": BASE["timing_interpreter"]["min_samples"],  # merged over the config file's block
    }
    assert doc["sweep"]["max_configs"] == 2 and doc["sweep"]["timing"]["min_samples"] == 4
    assert doc["cases"][0]["params"] == {"M": 3, "N": 5} and doc["ncu"] == ["softmax/float32/M3_N5"]
    specs.unlink()
    (tmp_path / "same.yaml").write_text(AS_A_FILE)
    run = snakemake(work, str(specs.relative_to(work)), "--configfile", str(tmp_path / "same.yaml"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads(specs.read_text()) == doc


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("override", "in_a_file", "message"),
    [
        ("seeds=[-1]", "seeds: [-1]", "seeds[0]: -1 is less than the minimum of 0; allowed: an integer >= 0"),
        ("timing={warmup: 2.5}", "timing: {warmup: 2.5}", "timing.warmup: 2.5 is not of type 'integer'"),
        (
            "timing={min_samples: 500, max_samples: 100}",
            "timing: {min_samples: 500, max_samples: 100}",
            "timing: min_samples=500 exceeds max_samples=100; allowed: min_samples <= max_samples",
        ),
        (
            "sweep={max_configs_interpreter: 0}",
            "sweep: {max_configs_interpreter: 0}",
            "sweep.max_configs_interpreter: 0 is less than the minimum of 1",
        ),
        (
            "kernels={softmax: {shapes: [{M: 99999999999, N: 99999999999}]}}",
            "kernels: {softmax: {shapes: [{M: 99999999999, N: 99999999999}]}}",
            "kernels.softmax.shapes: M99999999999_N99999999999 at float16 needs at least",
        ),
        (
            "bogus=1",
            "bogus: 1",
            "unknown key(s) bogus in the config; allowed keys: calibration, compare_with, container_image, device,",
        ),
    ],
    ids=["seed", "integer", "bounds", "sweep", "host-memory", "unknown-key"],
)
def test_a_bad_value_gets_the_same_message_from_the_command_line_and_a_config_file(
    tmp_path, override, in_a_file, message
):
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    (tmp_path / "mine.yaml").write_text(f"# my settings\n{in_a_file}\n")
    for args, where in (
        (["--config", override], "--config"),
        (["--configfile", str(tmp_path / "mine.yaml")], f"{tmp_path / 'mine.yaml'}, line 2"),
    ):
        run = snakemake(work, "--dry-run", *args)
        out = run.stdout + run.stderr
        assert run.returncode != 0 and f"{where}: {message}" in out, out[-3000:]
        assert len(out.splitlines()) < 10, out  # the message, not the schema and the whole config


@pytest.mark.workflow
def test_config_errors_name_the_file_and_line_and_what_is_allowed(tmp_path):
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    mine = tmp_path / "mine.yaml"
    mine.write_text("timing:\n  warmup: 3\n  warmpu: 4\nkernels:\n  softmax: {dtypes: [float64]}\n  nosuch: {}\n")
    out = output(snakemake(work, "--dry-run", "--configfile", str(mine)))
    assert f"{mine}, line 3: unknown key(s) warmpu in timing; allowed keys: batch, clock_warmup_s, " in out
    assert f"{mine}, line 5: kernels.softmax.dtypes[0]: 'float64' is not one of ['float16', 'bfloat16'" in out
    mine.write_text("# narrowed\nkernels:\n  nosuch: {}\n")
    out = output(snakemake(work, "--dry-run", "--configfile", str(mine)))
    assert f"{mine}, line 3: config names unknown kernel(s) ['nosuch']; kernels/ declares ['attention'" in out
    # the workflow's own config file: Snakemake alone would say only "not valid JSON or YAML"
    text = (work / "config" / "config.yaml").read_text()
    (work / "config" / "config.yaml").write_text(text.replace("seeds: [0, 1, 2]", "seeds: [0, 1, 2"))
    out = output(snakemake(work, "--dry-run"))
    line = text.splitlines().index("seeds: [0, 1, 2]") + 1
    assert "config/config.yaml, line " in out and "not valid YAML: expected ',' or ']'" in out, out
    assert f"(while parsing a flow sequence from line {line}, column 8)" in out, out


# --- the plan depends on the config, not on the machine that plans ---------------------------------------


def test_gpu_plan_on_a_machine_without_a_gpu():
    doc = cases.specs(config(device="nvidia-h200", shape_set="auto"), cases.device_key(config(device="nvidia-h200")))
    assert doc["device"] == doc["hardware"] == "nvidia-h200"
    assert doc["interpreter"] is False and doc["shape_set"] == "gpu"
    # the config's timing settings, with every one it leaves out at the schema's default (resolved once, here)
    assert doc["timing"] == {**cases.timing_defaults(), **BASE["timing"]} != BASE["timing"]
    assert doc["sweep"]["max_configs"] == BASE["sweep"]["max_configs"]
    any_gpu = cases.specs(config(device="any-gpu"), "any-gpu")
    assert any_gpu["hardware"] == "any-gpu" and any_gpu["interpreter"] is False


def test_planning_imports_neither_torch_nor_triton():
    import subprocess

    code = (
        "import sys, yaml; from kernelscope import cases; "
        f"cases.plan(yaml.safe_load(open({str(ROOT / 'config' / 'config.yaml')!r})), 'nvidia-h200'); "
        "bad = [m for m in ('torch', 'triton') if m in sys.modules]; sys.exit(f'imported {bad}' if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_catalog_is_fresh():
    """kernels/catalog.json is what the kernel modules declare (else: python -m kernelscope.catalog)."""
    assert catalog.main(["--check"]) == 0


def test_stale_catalog_is_detected_by_the_job(tmp_path):
    doc = cases.specs(config(kernels=softmax(shapes=[{"M": 3, "N": 5}])), CPU)
    doc["cases"][0]["variants"].append("triton_gone")
    with pytest.raises(cases.ConfigError, match="catalog.json is stale; run `python -m kernelscope.catalog`"):
        cases.load_case(doc, "softmax", "M3_N5", "float32")
    doc["cases"][0]["variants"] = ["triton_online"]
    spec, _, _ = cases.load_case(doc, "softmax", "M3_N5", "float32")
    assert sorted(i.name for i in spec.implementations) == ["torch", "torch_compile", "triton_online"]


@pytest.mark.workflow
def test_snakefile_plans_a_gpu_run_without_torch(tmp_path):
    """A login node: no GPU, and a Python in which torch cannot even be imported."""
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    blocker = tmp_path / "no_torch"
    for name in ("torch", "triton"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('planning imported {name}')\n")
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(work)])}
    run = snakemake(work, "--dry-run", "--config", "device=nvidia-h200", "shape_set=gpu", env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "results/nvidia-h200/timing/matmul/float16/M4096_N4096_K4096.json" in run.stdout
    bad = snakemake(
        work, "--dry-run", "--config", "kernels={softmax: {dtypes: [float16], shapes: [{M: -4, N: 8}]}}", env=env
    )
    assert bad.returncode != 0
    assert "--config: kernels.softmax.shapes: M=-4 in {'M': -4, 'N': 8} is a size" in bad.stdout + bad.stderr
