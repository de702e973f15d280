"""Report stage: per-case result files → long-format tables → Markdown and HTML (jinja2) + roofline.

Nothing here measures or re-derives a result: it reads what the stages wrote, joins it with the
kernel declarations' FLOP/byte models and the measured ceilings, and applies the claim rules.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import claims, environment, registry
from kernelscope.document import bullets, kv, render, table, text
from kernelscope.spec import DTYPES, Shape



def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def collect(results: Path) -> dict[str, Any]:
    specs = _load(results / "specs.json")
    if specs is None:
        raise FileNotFoundError(f"{results}/specs.json is missing: run the workflow first")
    data = {"specs": specs, "environment": _load(results / "environment.json") or {},
            "calibration": _load(results / "calibration.json") or {}, "cases": [],
            "job_costs": _job_costs(results / "benchmarks")}
    for case in specs["cases"]:
        rel = Path(case["kernel"]) / case["dtype"] / case["shape"]
        data["cases"].append({
            **case,
            "correctness": _load(results / "correctness" / rel.with_suffix(".json")),
            "timing": _load(results / "timing" / rel.with_suffix(".json")),
            "profile": _load(results / "profile" / rel.with_suffix(".json")),
            "ncu": _load(results / "ncu" / rel.with_suffix(".json")),
            "sweeps": (_load(results / "sweep" / rel.with_suffix(".json")) or {}).get("variants", []),
        })
    return data


def capped_measurements(data: dict[str, Any]) -> int:
    """Timed records that stopped at a cap without meeting the stopping rule. The rule is re-applied to the
    data with each job's own settings, because records written before timing.measure required min_samples
    at a cap (the H200 runs of 5f19e28 and 93b7ea7) could say "reached" with fewer samples than that."""
    count = 0
    for case in data["cases"]:
        doc = case["timing"] or {}
        min_samples = int((doc.get("settings") or {}).get("min_samples", 0))
        count += sum(1 for r in doc.get("implementations", []) if r.get("status") == "ok"
                     and (not r.get("target_reached") or r.get("n", 0) < min_samples))
    return count


def _timed_cases_by(data: dict[str, Any], record: str, env: str, field: str) -> dict[str, int]:
    """Timed cases per value of ``timing[record][field]``; records without it count under the run's
    ``environment[env][field]``."""
    run_value = (data["environment"].get(env) or {}).get(field)
    counts: dict[str, int] = {}
    for case in data["cases"]:
        if case["timing"]:
            value = str((case["timing"].get(record) or {}).get(field) or run_value)
            counts[value] = counts.get(value, 0) + 1
    return counts


def case_commits(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per git commit of the job that timed them (records from before the commit was stored per
    case count under the run's environment commit)."""
    return _timed_cases_by(data, "git", "git", "commit")


def case_cards(data: dict[str, Any]) -> dict[str, int]:
    """Timed cases per physical GPU (NVML UUID in each timing record; records without one count under the
    run's environment card). A resumed run can hold cases timed on different cards of one model."""
    return _timed_cases_by(data, "nvml", "gpu", "uuid")


def _job_costs(root: Path) -> pd.DataFrame:
    """Wall time of every per-case job, from the files Snakemake's ``benchmark:`` directive writes
    (``results/<device>/benchmarks/<stage>/<kernel>/<dtype>/<shape>.tsv``)."""
    rows = []
    for path in sorted(root.glob("*/*/*/*.tsv")):
        stage, kernel, dtype = path.parts[-4:-1]
        bench = pd.read_csv(path, sep="\t")
        if "s" in bench and len(bench):
            rows.append({"stage": stage, "kernel": kernel, "dtype": dtype, "shape": path.stem,
                         "wall_s": float(bench["s"].iloc[0])})
    return pd.DataFrame(rows, columns=["stage", "kernel", "dtype", "shape", "wall_s"])


def _job_cost_section(data: dict[str, Any]) -> dict[str, Any] | None:
    jobs = data["job_costs"]
    if jobs.empty:
        return None
    by_stage = jobs.groupby("stage")["wall_s"].agg(jobs="count", total_s="sum", median_s="median", max_s="max")
    return {"title": "Run cost", "blocks": [
        text("Wall time of each per-case job (Snakemake `benchmark:` files under results/<device>/benchmarks/), "
              "including process start-up and compilation. Sweep, timing and ncu jobs hold the GPU alone; the "
              "others share it. Jobs carried over from an earlier invocation keep their own times."),
        table(by_stage.reset_index(), ["stage", "jobs", "total_s", "median_s", "max_s"], digits=1)]}


def _ceilings(calibration: dict[str, Any], dtype: str) -> tuple[float | None, float | None]:
    copy = (calibration.get("copy") or {}).get("gbps")
    mm = ((calibration.get("matmul") or {}).get(dtype) or {}).get("tflops")
    return copy, mm


def tables(data: dict[str, Any]) -> dict[str, pd.DataFrame]:
    correctness_rows, timing_rows, sample_rows, sweep_rows, profile_rows, claim_rows = [], [], [], [], [], []
    for case in data["cases"]:
        key = {"kernel": case["kernel"], "shape": case["shape"], "dtype": case["dtype"]}
        spec = registry.get(case["kernel"])
        shape = Shape(case["params"], case["reason"])
        flops, nbytes = spec.flops(shape), spec.bytes_moved(shape, DTYPES[case["dtype"]])
        copy_gbps, mm_tflops = _ceilings(data["calibration"], case["dtype"])
        gate = case["correctness"] or {}
        for rec in gate.get("implementations", []) + gate.get("negative_controls", []):
            correctness_rows.append({**key, "implementation": rec["implementation"],
                                     "role": "negative control" if "rejected" in rec else rec["kind"],
                                     "status": rec["status"], "rejected": rec.get("rejected"),
                                     "max_abs_err": rec.get("max_abs_err"), "max_rel_err": rec.get("max_rel_err"),
                                     "rel_l2_err": rec.get("rel_l2_err"),
                                     **{inv.name: rec.get(inv.name) for inv in spec.invariants},
                                     "failure": rec.get("failure") or rec.get("reason")})
        doc = case["timing"] or {"implementations": []}
        for rec in doc["implementations"]:
            row = {**key, "implementation": rec["implementation"], "kind": rec.get("kind"),
                   "block": rec.get("block", ""), "status": rec["status"], "reason": rec.get("reason"),
                   "config": json.dumps(rec.get("config", {}), sort_keys=True)}
            if rec["status"] == "ok":
                med = rec["median_us"]
                gbps = nbytes / (med * 1e-6) / 1e9
                tflops = flops / (med * 1e-6) / 1e12
                clk = rec.get("clocks") or {}
                graph = rec.get("graph") or {}
                row.update({
                    "median_us": med, "p20_us": rec["p20_us"], "p80_us": rec["p80_us"], "min_us": rec["min_us"],
                    "max_us": rec["max_us"], "ci95_low_us": rec["ci95_low_us"], "ci95_high_us": rec["ci95_high_us"],
                    "n": rec["n"], "target_reached": rec["target_reached"], "first_call_ms": rec.get("first_call_ms"),
                    "prepare_ms": rec.get("prepare_ms"),
                    "gbps": gbps, "tflops": tflops,
                    "pct_copy_bw": 100 * gbps / copy_gbps if copy_gbps else None,
                    "pct_matmul_peak": 100 * tflops / mm_tflops if mm_tflops else None,
                    "intensity_flop_per_byte": flops / nbytes if nbytes else math.nan,
                    "graph_us": graph.get("median_us"), "graph_status": graph.get("status"),
                    "launch_bound": claims.launch_bound(rec),
                    "host_wall_us": rec.get("host_wall_us"), "l2_flushed": rec.get("l2_flushed"),
                    "flagged": clk.get("n_flagged"), "sm_mhz_min": clk.get("sm_mhz_min"),
                    "sm_mhz_max": clk.get("sm_mhz_max"),
                })
                for i, s in enumerate(rec["samples_us"]):
                    flag = (clk.get("flags") or [""] * len(rec["samples_us"]))[i] if clk else ""
                    sm = (clk.get("sm_mhz") or [None] * len(rec["samples_us"]))[i] if clk.get("sm_mhz") else None
                    sample_rows.append({**key, "implementation": rec["implementation"], "block": rec.get("block", ""),
                                        "sample": i, "us": s, "sm_mhz": sm, "flag": flag})
            timing_rows.append(row)
        if case["timing"]:
            for c in claims.case_claims(case["timing"], case["correctness"]):
                claim_rows.append({**key, **{k: c.get(k) for k in ("a", "b", "verdict", "basis", "why", "rel_diff",
                                                                     "mannwhitney_p", "aa_floor_rel")},
                                   "sentence": claims.sentence(c)})
        for sw in case["sweeps"]:
            for rec in sw.get("configs", []):
                sweep_rows.append({**key, "implementation": sw["implementation"], "config": rec["key"],
                                   "is_default": rec["is_default"], "status": rec["status"],
                                   "is_best": bool(sw.get("best")) and rec["key"] == sw["best"]["key"],
                                   "first_call_ms": rec.get("first_call_ms"), "median_us": rec.get("median_us"),
                                   "reason": rec.get("reason")})
        for rec in (case["profile"] or {}).get("implementations", []):
            for k in rec.get("kernels", []):
                profile_rows.append({**key, "implementation": rec["implementation"], "cuda_kernel": k["name"],
                                     "launches_per_call": k["launches_per_call"],
                                     "device_us_per_call": k["device_us_per_call"]})
    return {"correctness": pd.DataFrame(correctness_rows), "timing": pd.DataFrame(timing_rows),
            "samples": pd.DataFrame(sample_rows), "sweep": pd.DataFrame(sweep_rows),
            "profile": pd.DataFrame(profile_rows), "claims": pd.DataFrame(claim_rows)}


def roofline(data: dict[str, Any], timing_df: pd.DataFrame, path: Path) -> bool:
    """Arithmetic intensity vs achieved throughput, with the measured ceilings as the roof."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = timing_df[timing_df.get("status", pd.Series(dtype=str)) == "ok"] if not timing_df.empty else timing_df
    if ok.empty:
        return False
    fig, ax = plt.subplots(figsize=(9, 6))
    copy = (data["calibration"].get("copy") or {}).get("gbps")
    xs = [10 ** (i / 10) for i in range(-20, 41)]
    for name, entry in (data["calibration"].get("matmul") or {}).items():
        if copy and entry.get("tflops"):
            ax.plot(xs, [min(copy * x / 1e3, entry["tflops"]) for x in xs], lw=1, ls="--",
                    label=f"roof: copy {copy:.0f} GB/s, {name} matmul {entry['tflops']:.0f} TFLOP/s")
    for impl, grp in ok[ok["block"] != "A2"].groupby("implementation"):
        ax.scatter(grp["intensity_flop_per_byte"], grp["tflops"], label=impl, s=18)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, minimal traffic)")
    ax.set_ylabel("achieved TFLOP/s")
    env = data["environment"]
    ax.set_title(f"{(env.get('gpu') or {}).get('name') or 'CPU interpreter'} — torch {env.get('torch')}, "
                 f"triton {env.get('triton')}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def supports(data: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """The "supports / does not support" section, generated from the data."""
    env = data["environment"]
    fp = environment.fingerprint(env)
    interpreter = data["specs"]["interpreter"]
    yes: list[str] = []
    no: list[str] = []
    where = (f"on {fp['gpu']} with torch {fp['torch']}, triton {fp['triton']}, CUDA {fp['cuda_runtime']}, "
             f"driver {fp['driver']}")
    claim_df = tbl["claims"]
    if interpreter:
        no.append("Any performance comparison: this run used Triton's interpreter on the CPU; its timings measure "
                  "the interpreter and support no statement about GPU speed.")
    elif not claim_df.empty:
        resolved = claim_df[claim_df["verdict"].isin([claims.FASTER, claims.SLOWER])]
        if len(resolved):
            yes.append(f"The orderings below, {where}, config hash {data['specs']['config_hash']} (settings in "
                       "the Method section), each for exactly the shape, dtype and layout named and each Triton "
                       "variant at the launch config in brackets (the sweep's choice):")
        for _, c in resolved.iterrows():
            yes.append(f"{c['kernel']} {c['shape']} {c['dtype']}: {c['sentence']}.")
        unresolved = claim_df[claim_df["verdict"] == claims.UNRESOLVED]
        for _, c in unresolved.iterrows():
            no.append(f"An ordering of {c['a']} and {c['b']} for {c['kernel']} {c['shape']} {c['dtype']}: {c['why']}.")
    corr = tbl["correctness"]
    if not corr.empty:
        bad = corr[(corr["role"] != "negative control") & corr["status"].isin(["fail", "error"])]
        for _, r in bad.iterrows():
            no.append(f"Any timing of {r['implementation']} on {r['kernel']} {r['shape']} {r['dtype']}: it failed the "
                      f"correctness gate ({r['failure']}).")
        live = corr[corr["role"] == "negative control"]
        accepted = live[live["rejected"] == False]  # noqa: E712 - pandas element-wise comparison
        for _, r in accepted.iterrows():
            no.append(f"The correctness verdicts for {r['kernel']} {r['shape']} {r['dtype']}: the negative control "
                      f"{r['implementation']} was accepted, so the gate is too loose there.")
        if not live.empty and accepted.empty:
            yes.append(f"Correctness of every passing implementation against an fp64 reference at the declared "
                       f"tolerances, for the listed shapes and dtypes and {len(data['specs']['seeds'])} seeds; every "
                       f"negative control ({live['implementation'].nunique()} kinds, {len(live)} runs) was rejected.")
    timing = tbl["timing"]
    if not timing.empty and "target_reached" in timing:
        missed = capped_measurements(data)
        if missed:
            no.append(f"Precision beyond the measured spread for {missed} measurements that stopped at the time "
                      f"cap before the median's CI reached ±{data['specs']['timing'].get('target_rel_ci', 0.005):.1%} "
                      f"with at least min_samples samples; their CIs are in the tables.")
    flagged = timing.get("flagged") if not timing.empty else None
    if flagged is not None and flagged.notna().any():
        disclosure = claims.disclosures(list(zip(timing["flagged"].fillna(0).astype(int), timing["n"].fillna(0).astype(int))))
        if disclosure:
            no.append(f"Clock-clean timings: {disclosure}; they are included in the medians and listed per sample in "
                      f"tables/samples.csv.")
    counters = [c for c in data["cases"] if (c.get("ncu") or {}).get("ran")]
    if len(counters) < len(data["cases"]):
        reasons = sorted({(c.get("ncu") or {}).get("reason", _ncu_absent(data["specs"]))
                          for c in data["cases"] if not (c.get("ncu") or {}).get("ran")})
        no.append(f"Hardware-counter explanations (DRAM throughput, occupancy, registers, spills) for "
                  f"{len(data['cases']) - len(counters)} of {len(data['cases'])} cases: Nsight Compute did not run "
                  f"there ({'; '.join(reasons)}).")
    warm = [c for c in data["cases"] if c["timing"] and not data["specs"]["interpreter"]
            and any(r.get("l2_flushed") is False for r in c["timing"]["implementations"] if r.get("status") == "ok")]
    if warm:
        no.append(f"Cold-cache times for {len(warm)} cases timed with a warm L2 (flush_l2: false): their inputs "
                  "may be read from L2, as in a loop over the same tensors, not as in a model's step.")
    commits = case_commits(data)
    if len(commits) > 1:
        no.append("Reading every case as one commit's code: the timings come from " + ", ".join(
            f"{n} cases at {commit}" for commit, n in commits.items()) + " (a run resumed across commits; each "
            "case's kernel-module hash is in its record), so cases of different commits may differ in their kernel "
            "or in the measuring code.")
    cards = case_cards(data)
    if len(cards) > 1:
        run_card = (data["environment"].get("gpu") or {}).get("uuid")
        no.append("Reading every case as measured on one card: the timings come from " + ", ".join(
            f"{n} cases on {card}" for card, n in cards.items()) + f" (one GPU model; a run resumed on another "
            f"machine). The environment section and the measured ceilings come from {run_card}, so a case timed "
            "on another card is put against that card's ceilings, and a difference between cases of different "
            "cards can be the cards'.")
    missing = [f"{c['kernel']} {c['shape']} {c['dtype']}" for c in data["cases"] if c["timing"] is None]
    if missing:
        no.append(f"Anything about {len(missing)} of {len(data['cases'])} planned cases that have no timing result "
                  f"in this run (not run, or their job failed): {', '.join(missing)}.")
    for ref in data["specs"].get("external_references", []):
        reasons = claims.reference_comparability(fp, ref)
        no.append(f"Ranking this run against the reference row '{ref['label']}': {'; '.join(reasons)}.")
    no += [
        "Other shapes, dtypes, strides or memory layouts than those listed: rankings between kernels change with "
        "shape (seed 000 shows one where the teaching kernel is slower than torch).",
        "Other GPUs, drivers, or torch/triton/CUDA versions than those recorded in the environment section.",
        "Cold-start cost beyond the single first-call measurement per job (compile times are one sample each, "
        "from an empty cache directory, and depend on the host CPU).",
        "End-to-end model speed: these are isolated kernels with cold L2 (unless stated), not a model's step.",
    ]
    return {"supports": yes, "does_not_support": no}


def _environment_section(data: dict[str, Any]) -> dict[str, Any]:
    env = data["environment"]
    gpu = env.get("gpu") or {}
    cont = env.get("container") or {}
    git = env.get("git") or {}
    pairs = [("device key", env.get("device_key")), ("backend", env.get("backend")),
             ("Triton interpreter", env.get("triton_interpreter")), ("GPU", gpu.get("name") or gpu.get("reason")),
             ("compute capability", gpu.get("capability")), ("SMs", gpu.get("sm_count")),
             ("memory (GiB)", gpu.get("memory_gib")), ("L2 (MiB)", gpu.get("l2_mib")),
             ("max SM / memory clock (MHz)", f"{gpu.get('max_sm_mhz', '–')} / {gpu.get('max_mem_mhz', '–')}"),
             ("power limit (W)", gpu.get("power_limit_w")), ("driver", gpu.get("driver")),
             ("CUDA runtime", env.get("cuda_runtime")), ("cuDNN", env.get("cudnn")), ("Python", env.get("python")),
             ("torch", env.get("torch")), ("triton", env.get("triton")), ("kernelscope", env.get("kernelscope")),
             ("CPU", f"{env.get('cpu')} ({env.get('cpu_count')} logical)"), ("OS", env.get("os")),
             ("git commit", f"{git.get('commit')}{' (dirty)' if git.get('dirty') else ''}"
                            + (f" — {git['source']}" if str(git.get("source", "git")).startswith("corrected") else "")),
             ("config hash", env.get("config_hash")),
             ("container", (f"{cont.get('runtime')}: {cont.get('image') or 'image not identified'}"
                            if cont.get("containerized") else "none (host)"))]
    for key in ("image_sha256", "image_reference", "image_digest", "base_image", "lock_sha256"):
        if env.get(key) or cont.get(key):
            pairs.append((key.replace("_", " "), env.get(key) or cont.get(key)))
    return {"title": "Environment", "blocks": [kv(pairs)]}


def enqueue_modes(data: dict[str, Any]) -> set[str]:
    """How the run's timed samples were enqueued (``batched:<k>``, or ``per-sample-sync`` for older records)."""
    return {rec.get("enqueue", "per-sample-sync") for case in data["cases"] if case["timing"]
            for rec in case["timing"]["implementations"] if rec.get("status") == "ok"}


def _starvation_note(recs: list[dict[str, Any]]) -> str:
    """How many batched samples may hold a launch gap, and what the claims do about it."""
    if not recs:
        return "."
    limit = f"{claims.STARVED_LIMIT:.0%}"
    rule = (f" A short case's record with more than {limit} of them is compared by CUDA-graph replay instead; "
            "longer cases have no graph replay and keep their event medians (a launch gap of a few µs is small "
            "against them).")
    if all(r.get("starved_samples") is not None for r in recs):
        n = sum(int(r.get("n") or 0) for r in recs)
        starved = sum(int(r["starved_samples"]) for r in recs)
        return (f"; {starved} of {n} samples were launched after the GPU could have reached their start event, "
                f"so they may include a launch gap." + rule)
    batches = sum(int(r.get("batches") or 0) for r in recs)
    starved = sum(int(r.get("starved_batches") or 0) for r in recs)
    return (f"; in {starved} of {batches} batches the host took longer to enqueue the batch than the GPU sleep "
            "lasted, so some of their samples may include a launch gap (this run counted per batch, which "
            "over-counts: a call that blocks the host, as torch.compile's wrappers and the caching allocator's "
            "first allocations can, marks its whole batch)." + rule)


def _method_section(data: dict[str, Any]) -> dict[str, Any]:
    specs = data["specs"]
    t = specs["timing"]
    modes = enqueue_modes(data)
    enqueue = []
    if any(m.startswith("batched") for m in modes):
        recs = [rec for case in data["cases"] if case["timing"] for rec in case["timing"]["implementations"]
                if str(rec.get("enqueue", "")).startswith("batched")]
        enqueue.append(f"Samples enqueued {t.get('batch', 10)} at a time behind a GPU sleep and read after one "
                       "synchronisation, so the events bracket the kernel and not the host's launch latency"
                       + _starvation_note(recs))
    if "per-sample-sync" in modes:
        enqueue.append("Some or all timings here were taken with a synchronisation after every sample (the method "
                       "before batched enqueue): for kernels shorter than their launch latency the event median then "
                       "includes host launch time. Such records are marked launch-bound (event median > "
                       f"{claims.LAUNCH_BOUND_RATIO}x the CUDA-graph replay time) and compared by graph replay.")
    items = [
        f"Cases: {len(specs['cases'])} (kernel × shape × dtype) from shape set '{specs['shape_set']}'; config hash "
        f"{specs['config_hash']}.",
        f"Correctness: every implementation against a float64 reference, seeds {specs['seeds']}; outputs poisoned "
        "with NaN before each run, a second run with another poison must be bit-identical (unwritten elements, "
        "races), inputs must be unchanged, NaN/Inf never pass; element-wise |out − ref| ≤ atol + rtol·|ref| with "
        "per-dtype tolerances (listed per kernel below); deliberately broken negative controls must be rejected.",
        "Sweep: every declared launch config of every Triton variant compiled and timed on its own from an empty "
        "cache directory; pruned, failed and wrong configs are recorded; the fastest correct config is timed.",
        f"Timing: first call (JIT / torch.compile from a cold cache) recorded apart; {t.get('warmup', 25)} warm-up "
        f"calls; clocks settled by running the baseline back to back; then samples until ≥ {t.get('min_samples', 100)} "
        f"samples and ≥ {t.get('min_time_s', 0.05)} s, stopping when the 95 % CI of the median is within "
        f"±{t.get('target_rel_ci', 0.005):.1%} or at {t.get('max_time_s', 1.0)} s. "
        + (("Each sample bracketed by CUDA events, L2 flushed before each sample (a 2×L2 write outside the "
            "events). " if t.get("flush_l2", True) else
            "Each sample bracketed by CUDA events. WARM CACHE: L2 was not flushed between samples (flush_l2: "
            "false), so inputs that fit in L2 are read from it; these times are not cold-cache times. ")
           if not specs["interpreter"] else "Host wall clock (interpreter run). ")
        + " ".join(enqueue) + " All samples are kept (tables/samples.csv).",
        "A/A floor: the primary baseline is timed first and again last in every timing job; their relative median "
        "difference is the noise floor below which no difference is claimed.",
        f"Claims: 'A faster than B' needs both correct, ≥ 20 samples each, Mann–Whitney p < {claims.ALPHA}, and a "
        f"median difference above max(A/A floor, {claims.MIN_EFFECT:.0%}).",
        "Clocks: NVML SM/memory clock, temperature, power and throttle reasons read after every batch of samples "
        "(each sample carries its batch's reading); samples taken while throttled or below 95 % of the steady "
        "clock are flagged and disclosed, not dropped.",
        f"Short cases (median under {t.get('graph_below_us', 50)} µs) also get CUDA-graph replay timing (calls "
        "replayed back to back with L2 warm: device time per call without flush or launch gaps, so it is lower "
        "than the cold-L2 event median by the cost of fetching the inputs from HBM) and host wall time per call "
        "(how fast eager Python issues calls; where it exceeds the event median, eager use of the kernel is "
        "limited by the host, not the GPU).",
        "Compile cost: torch.compile compiles in-process (TORCHINDUCTOR_COMPILE_THREADS=1 unless set), so its "
        "first call includes Inductor's whole compile; Triton's first call includes its JIT and launcher build. "
        "Building the callable is timed apart (prepare_ms, where recorded): for torch.compile it holds the "
        "process's first import of Dynamo and Inductor, a cold-process cost its first call does not include.",
        "Profile: torch.profiler lists every CUDA kernel each implementation launches (after warm-up), kept apart "
        "from timing.",
    ]
    return {"title": "Method", "blocks": [bullets(items)]}


def _calibration_section(data: dict[str, Any]) -> dict[str, Any]:
    cal = data["calibration"]
    if not cal:
        return {"title": "Measured ceilings", "blocks": [text("No calibration data.")]}
    pairs = [("measured on", cal.get("measured_on")),
             ("copy bandwidth, read + write (GB/s)", (cal.get("copy") or {}).get("gbps"))]
    for name, entry in (cal.get("matmul") or {}).items():
        pairs.append((f"matmul {name} {entry.get('size', '')}³ ({entry.get('precision', 'library default')}) TFLOP/s",
                      entry.get("tflops", entry.get("error"))))
    return {"title": "Measured ceilings", "blocks": [
        text("Measured on this machine in this run; % of ceiling in the timing tables refers to these. Each is "
              "the median at one size (the copy of a multi-GiB buffer, the library's 8192³ product), not the "
              "hardware's peak: other sizes can exceed it, so above 100 % means faster than the library at the "
              "calibration size."), kv(pairs)]}


def _case_blocks(case: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    def sel(df: pd.DataFrame) -> pd.DataFrame:
        if df.empty:
            return df
        return df[(df["kernel"] == case["kernel"]) & (df["shape"] == case["shape"]) & (df["dtype"] == case["dtype"])]

    blocks = [text(f"Shape {json.dumps(case['params'])}: {case['reason']}.")]
    gate = case["correctness"] or {}
    if gate.get("tolerance"):
        tol = gate["tolerance"]
        blocks.append(text(f"Tolerance: atol {tol['atol']:g}, rtol {tol['rtol']:g} — {tol['reason']}."))
    blocks.append(table(sel(tbl["correctness"]), ["implementation", "role", "status", "rejected", "max_abs_err",
                                                   "rel_l2_err", "row_sum_error", "failure"]))
    timing = sel(tbl["timing"])
    blocks.append(table(timing, ["implementation", "block", "status", "median_us", "p20_us", "p80_us", "ci95_low_us",
                                  "ci95_high_us", "n", "prepare_ms", "first_call_ms", "gbps", "pct_copy_bw", "tflops",
                                  "pct_matmul_peak", "graph_us", "launch_bound", "host_wall_us", "flagged",
                                  "reason"]))
    doc = case["timing"] or {}
    aa = doc.get("aa_floor")
    if aa:
        blocks.append(text(f"A/A floor ({doc.get('primary_baseline')} timed twice): {aa['rel_diff']:.2%} "
                            f"(Mann–Whitney p = {aa['mannwhitney_p']:.2g})."))
    claim_df = sel(tbl["claims"])
    if not claim_df.empty:
        blocks.append(bullets(list(claim_df["sentence"])))
    prof = case["profile"] or {}
    if prof.get("captured"):
        blocks.append(table(sel(tbl["profile"]), ["implementation", "cuda_kernel", "launches_per_call",
                                                   "device_us_per_call"], code=("cuda_kernel",)))
    elif prof:
        blocks.append(text(f"Kernel names: not captured — {prof.get('reason')}."))
    blocks.append(_ncu_block(case))
    sweep_lines = []
    for sw in case["sweeps"]:
        c = sw.get("counts", {})
        line = (f"{sw['implementation']}: {len(sw.get('configs', []))} configs — {c.get('ok', 0)} timed, "
                f"{c.get('pruned', 0)} pruned, {c.get('failed', 0)} failed, {c.get('wrong', 0)} wrong")
        if sw.get("best"):
            line += f"; best {sw['best']['key']} at {sw['best']['median_us']:.3f} µs"
            line += f", worst/best {sw['worst_over_best']:.2f}×"
            d = sw.get("default") or {}
            if d.get("over_best"):
                line += f"; default config ranks {d['rank']}/{d['of']} at {d['over_best']:.2f}× best"
            elif d:
                line += f"; default config: {d.get('status')}"
        else:
            line += f" — {sw.get('reason') or 'no valid config'}"
        sweep_lines.append(line)
    if sweep_lines:
        blocks.append(bullets(sweep_lines))
    return blocks


def _ncu_absent(specs: dict[str, Any]) -> str:
    """Why a case has no Nsight Compute result when the stage did not write one."""
    selected = specs.get("ncu")
    if isinstance(selected, list) and selected:
        return "not selected for the optional Nsight Compute stage; the config key ncu lists the cases it profiles"
    return "stage not enabled (config ncu: true)"


def _ncu_block(case: dict[str, Any]) -> dict[str, Any]:
    doc = case.get("ncu")
    if doc is None:
        return text("Nsight Compute: stage not run for this case (enable with the config key `ncu: true`, or list "
                     "the case under `ncu`).")
    if not doc.get("ran"):
        return text(f"Nsight Compute: did not run — {doc.get('reason')}.")
    df = pd.DataFrame(doc["kernels"])
    return table(df, ["implementation", "kernel", "duration_ns", "dram_throughput_pct", "achieved_occupancy_pct",
                       "registers_per_thread", "local_load_bytes", "local_store_bytes", "shared_mem_per_block_bytes"],
                  code=("kernel",))


def _summary_section(data: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """One row per case: the primary baseline against the fastest correct Triton variant, with the verdict
    the claim rules gave for that pair (the per-case sections hold everything else)."""
    timing, claim_df = tbl["timing"], tbl["claims"]
    rows = []
    for case in data["cases"]:
        key = (case["kernel"], case["shape"], case["dtype"])
        row = {"kernel": key[0], "shape": key[1], "dtype": key[2], "baseline": case["primary_baseline"]}
        t = timing[(timing["kernel"] == key[0]) & (timing["shape"] == key[1]) & (timing["dtype"] == key[2])] \
            if not timing.empty else timing
        ok = t[t["status"] == "ok"] if not t.empty else t
        base = ok[(ok["implementation"] == case["primary_baseline"]) & (ok["block"] == "A1")] if not ok.empty else ok
        tri = ok[ok["kind"] == "triton"] if not ok.empty else ok
        if base.empty or tri.empty:
            rows.append({**row, "verdict": "no timing result"})
            continue
        best = tri.loc[tri["median_us"].idxmin()]
        verdict = claim_df[(claim_df["kernel"] == key[0]) & (claim_df["shape"] == key[1]) & (claim_df["dtype"] == key[2])
                           & (claim_df["a"] == best["implementation"]) & (claim_df["b"] == case["primary_baseline"])]
        v = verdict.iloc[0] if len(verdict) else None
        rows.append({**row, "baseline_us": base["median_us"].iloc[0], "best_triton": best["implementation"],
                     "triton_us": best["median_us"], "baseline_graph_us": base["graph_us"].iloc[0],
                     "triton_graph_us": best.get("graph_us"), "pct_copy_bw": best.get("pct_copy_bw"),
                     "pct_matmul_peak": best.get("pct_matmul_peak"),
                     "verdict": f"{v['verdict']} ({v['basis']})" if v is not None and v.get("basis") else
                     (v["verdict"] if v is not None else "–")})
    df = pd.DataFrame(rows)
    return {"title": "Summary", "blocks": [
        text("Per case: the primary baseline's event median against the fastest Triton variant's (by event median), "
              "and the claim rules' verdict for that pair. Launch-bound pairs are judged by CUDA-graph replay."),
        table(df, ["kernel", "shape", "dtype", "baseline", "baseline_us", "best_triton", "triton_us",
                    "baseline_graph_us", "triton_graph_us", "pct_copy_bw", "pct_matmul_peak", "verdict"])]}


def _references_section(data: dict[str, Any]) -> dict[str, Any] | None:
    refs = data["specs"].get("external_references", [])
    if not refs:
        return None
    fp = environment.fingerprint(data["environment"])
    blocks = []
    for ref in refs:
        blocks.append(text(f"{ref['label']} — {ref.get('source', '')}"))
        blocks.append(kv([(k, v) for k, v in ref.items() if k not in ("label", "source")]))
        blocks.append(bullets(["Not rankable against this run: " + "; ".join(claims.reference_comparability(fp, ref))]))
    return {"title": "Reference numbers from elsewhere (not comparable)", "blocks": blocks}


def document(data: dict[str, Any], tbl: dict[str, pd.DataFrame], has_plot: bool) -> dict[str, Any]:
    specs, env = data["specs"], data["environment"]
    fp = environment.fingerprint(env)
    banner = (f"Device {specs['device']}: {fp['gpu'] or 'no GPU'}; torch {fp['torch']}, triton {fp['triton']}; "
              f"{len(specs['cases'])} cases.")
    warn = ("INTERPRETER RUN: Triton ran in interpreter mode on the CPU. The timings below are interpreter timings "
            "and support no performance comparison; correctness results are real.") if specs["interpreter"] else None
    verdict = supports(data, tbl)
    sections = [
        _environment_section(data), _calibration_section(data), _method_section(data),
        {"title": "What this report supports / does not support", "blocks": [
            text("Supports:"), bullets(verdict["supports"] or ["No performance statement."]),
            text("Does not support:"), bullets(verdict["does_not_support"])]},
    ]
    sections.append(_summary_section(data, tbl))
    if has_plot:
        sections.append({"title": "Roofline", "blocks": [
            {"type": "image", "src": "roofline.png", "alt": "roofline: arithmetic intensity vs achieved TFLOP/s"},
            text("Ceilings are the measured copy bandwidth and library matmul peaks above; intensity uses each "
                  "kernel's minimal-traffic model.")]})
    for name in sorted({c["kernel"] for c in data["cases"]}):
        spec = registry.get(name)
        # only what this run recorded: the installed module may declare implementations added after it
        recorded = {r["implementation"] for c in data["cases"] if c["kernel"] == name and c["correctness"]
                    for r in c["correctness"].get("implementations", []) + c["correctness"].get("negative_controls", [])}
        impls = [f"{i.name} ({i.kind}): {i.description}" for i in spec.implementations
                 if not recorded or i.name in recorded]
        controls = [f"negative control {i.name}: {i.description}" for i in spec.negative_controls
                    if not recorded or i.name in recorded]
        sections.append({"title": f"Kernel: {name}", "blocks": [text(spec.description), bullets(impls + controls)]})
        for case in [c for c in data["cases"] if c["kernel"] == name]:
            sections.append({"title": f"{name} · {case['shape']} · {case['dtype']}", "level": 3,
                             "blocks": _case_blocks(case, tbl)})
    for extra in (_references_section(data), _job_cost_section(data)):
        if extra:
            sections.append(extra)
    sections.append({"title": "Data", "blocks": [bullets([
        "tables/timing.csv — one row per implementation and case (medians, spread, CI, throughput, % of ceilings)",
        "tables/samples.csv — every timed sample with its SM clock and flag",
        "tables/correctness.csv, tables/sweep.csv, tables/profile.csv, tables/claims.csv",
        f"raw per-case JSON: results/{specs['device']}/ (path grammar in kernelscope/cases.py)"])]})
    return {"title": f"kernelscope report — {specs['device']}", "banner": banner, "warning": warn, "sections": sections}


def build(results_dir: str | Path, out_dir: str | Path) -> None:
    results, out = Path(results_dir), Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    data = collect(results)
    tbl = tables(data)
    for name, df in tbl.items():
        df.to_csv(out / "tables" / f"{name}.csv", index=False)
    has_plot = roofline(data, tbl["timing"], out / "roofline.png")
    render(document(data, tbl, has_plot), out)
