"""Report stage: one run's results → the report (Markdown + self-contained HTML), its figures (SVG) and
long-format tables (CSV), and run.json.

The document opens with the answer (one row per kernel and baseline, the targets, the main refusals), then
the figures, then per-kernel details (collapsible in HTML), then the environment, method and ceilings, and
the full claim list in an appendix. Loading and tables live in :mod:`kernelscope.rundata`, the claim and
refusal rules in :mod:`kernelscope.claims`, the scores in :mod:`kernelscope.scores`, the figures in
:mod:`kernelscope.plots`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd

from kernelscope import bases, claims, firstpage, plots, records, results, rundata, scores, wording
from kernelscope.document import bullets, figure, kv, render, table, text
from kernelscope.fingerprint import fingerprint
from kernelscope.verdicts import Basis, Statement, Topic, topic_order

#: the answer section's refusals: the few that change how the whole report is read (the rest: appendix)
MAIN_REFUSALS = 6
#: the tables written beside the report (the report rule declares each: REPORT_TABLES in common.smk)
TABLES = ("correctness", "timing", "samples", "sweep", "profile", "claims", "ratios", "targets")
#: tables written gzip-compressed (every timed sample: tens of MB as text for a full run); the gzip header
#: carries no time stamp, so a re-render is byte-identical
COMPRESSED = ("samples",)


def table_file(name: str) -> str:
    return f"{name}.csv.gz" if name in COMPRESSED else f"{name}.csv"


#: where the comparisons of a run are written, relative to its report
COMPARE_DIR = "compare"


def _job_cost_section(data: dict[str, Any]) -> dict[str, Any] | None:
    run = data["run"]
    jobs = data["job_costs"]
    if not run["stages"] and jobs.empty:
        return None
    blocks = []
    if run["wall_s"] is not None:
        sampling = run["jobs_on_host_while_sampling"]
        blocks.append(
            text(
                f"From run.json: {run['cases_timed']} of {run['cases_planned']} cases timed; wall time from the first "
                f"job's start to the last job's end {run['wall_s']:.0f} s; GPUs held exclusively (sampling) "
                f"{run['gpu_exclusive_s']:.0f} s in all on {len(run['gpus'])} card(s), median "
                + (
                    f"{run['exclusive_s_per_case_median']:.1f}"
                    if run["exclusive_s_per_case_median"] is not None
                    else "–"
                )
                + " s per case (sweep + timing); overlapping exclusive sections on one card: "
                f"{run['exclusive_overlaps']}."
                + (
                    f" While timing jobs sampled, {sampling['min']}–{sampling['max']} kernelscope jobs (median "
                    f"{sampling['median']:g}) were alive on the host, compiling or running shared GPU work on other "
                    "cards or waiting; first-call (compile) times were taken under that CPU load."
                    if sampling
                    else ""
                )
            )
        )
    stage_rows = pd.DataFrame([{"stage": k, **v} for k, v in sorted(run["stages"].items())])
    if not stage_rows.empty:
        blocks.append(
            table(
                stage_rows,
                [
                    c
                    for c in ("stage", "jobs", "job_wall_s", "exclusive_s", "shared_s", "lock_wait_s")
                    if c in stage_rows
                ],
                digits=1,
            )
        )
    if not jobs.empty:
        by_stage = jobs.groupby("stage")["wall_s"].agg(jobs="count", total_s="sum", median_s="median", max_s="max")
        blocks += [
            text(
                "Wall time of each per-case job (Snakemake `benchmark:` files under "
                "results/<device>/jobtimes/), including process start-up and compilation. Jobs run side "
                "by side and take their card exclusively only while they sample; jobs carried over from an "
                "earlier invocation keep their own times."
            ),
            table(by_stage.reset_index(), ["stage", "jobs", "total_s", "median_s", "max_s"], digits=1),
        ]
    return {"title": "Run cost", "blocks": blocks}


#: the image identity fields an environment record can carry, with their row names (shown on the first page
#: too). The base image and the lock are this checkout's recipe's (kernelscope.container.identity): what a
#: pre-built image should have been built from, not a record of what it was built from.
IMAGE_KEYS = {
    "image_sha256": "image sha256",
    "image_reference": "image reference",
    "image_digest": "image digest",
    "base_image": "base image (this checkout's recipe)",
    "lock_sha256": "lock sha256 (this checkout's)",
}


def _environment_pairs(data: dict[str, Any]) -> list[tuple[str, Any]]:
    env = data["environment"]
    gpu = env.get("gpu") or {}
    cont = env.get("container") or {}
    git = env.get("git") or {}
    pairs = [
        ("device key", env.get("device_key")),
        ("backend", env.get("backend")),
        ("Triton interpreter", env.get("triton_interpreter")),
        ("GPU", gpu.get("name") or gpu.get("reason")),
        ("GPU UUID (environment job)", gpu.get("uuid")),
        ("compute capability", gpu.get("capability")),
        ("SMs", gpu.get("sm_count")),
        ("memory (GiB)", gpu.get("memory_gib")),
        ("L2 (MiB)", gpu.get("l2_mib")),
        ("max SM / memory clock (MHz)", f"{gpu.get('max_sm_mhz', '–')} / {gpu.get('max_mem_mhz', '–')}"),
        ("power limit (W)", gpu.get("power_limit_w")),
        ("driver", gpu.get("driver")),
        ("CUDA runtime", env.get("cuda_runtime")),
        ("cuDNN", env.get("cudnn")),
        ("Python", env.get("python")),
        ("torch", env.get("torch")),
        ("triton", env.get("triton")),
        ("kernelscope", env.get("kernelscope")),
        ("CPU", f"{env.get('cpu')} ({env.get('cpu_count')} logical)"),
        ("OS", env.get("os")),
        (
            "git commit (environment job)",
            f"{git.get('commit')}{' (dirty)' if git.get('dirty') else ''}"
            + (f" — {git['source']}" if str(git.get("source", "git")).startswith("corrected") else ""),
        ),
        ("config hash", env.get("config_hash")),
        (
            "container",
            (
                f"{cont.get('runtime')}: {cont.get('image') or 'image not identified'}"
                if cont.get("containerized")
                else "none (host)"
            ),
        ),
    ]
    for key, label in IMAGE_KEYS.items():
        if env.get(key) or cont.get(key):
            pairs.append((label, env.get(key) or cont.get(key)))
    # Whether the image was the lock's (kernelscope.container.versus_lock, recorded inside the image)
    if cont.get("containerized") and "lock_image" in cont:
        verdict = "yes" if cont["lock_image"] else "NO, not the lock's image: " + "; ".join(cont["differences"])
        pairs.append(("image is the lock's", verdict))
    return pairs


def _environment_section(data: dict[str, Any]) -> dict[str, Any]:
    blocks = [
        text("The run's environment record (the environment job: its machine, card and commit)."),
        kv(_environment_pairs(data)),
    ]
    commits, cards = rundata.case_commits(data), rundata.case_cards(data)
    if len(commits) > 1 or len(cards) > 1:
        per_case = pd.DataFrame(
            [
                {
                    "case": rundata.case_label(c),
                    "commit": str(rundata.case_commit(data, c))[:12],
                    "card": rundata.case_card(data, c),
                }
                for c in data["cases"]
                if c["timing"]
            ]
        )
        blocks += [
            text(
                f"The timed cases span {len(commits)} commit(s) and {len(cards)} card(s): "
                + "; ".join(f"{n} cases at {k[:12]}" for k, n in commits.items())
                + "; "
                + "; ".join(f"{n} cases on {k}" for k, n in cards.items())
                + ". The git commit and GPU above are the environment job's; each case's are below."
            ),
            table(per_case, ["case", "commit", "card"]),
        ]
    return {"title": "Environment", "blocks": blocks}


def _starvation_note(recs: list[dict[str, Any]]) -> str:
    """How many batched samples may hold a launch gap, and what the claims do about it."""
    if not recs:
        return "."
    limit = f"{claims.STARVED_LIMIT:.0%}"
    rule = (
        f" A record with more than {limit} of them is launch-bound whatever its median: it is compared by "
        "CUDA-graph replay (recorded for it in the same job), or, where a record of the pair has no graph replay, "
        "not compared by device time at all."
    )
    if all(r.get("starved_samples") is not None for r in recs):
        n = sum(int(r.get("n") or 0) for r in recs)
        starved = sum(int(r["starved_samples"]) for r in recs)
        return (
            f"; {starved} of {n} samples were launched after the GPU could have reached their start event, "
            f"so they may include a launch gap." + rule
        )
    batches = sum(int(r.get("batches") or 0) for r in recs)
    starved = sum(int(r.get("starved_batches") or 0) for r in recs)
    return (
        f"; in {starved} of {batches} batches the host took longer to enqueue the batch than the GPU sleep "
        "lasted, so some of their samples may include a launch gap (this run counted per batch, which "
        "over-counts: a call that blocks the host, as torch.compile's wrappers and the caching allocator's "
        "first allocations can, marks its whole batch)." + rule
    )


def _method_section(data: dict[str, Any]) -> dict[str, Any]:
    specs = data["specs"]
    groups = records.recorded_settings(data)
    t = records.timing_settings(data)  # resolved: every key is there (kernelscope.cases.specs, the records)
    modes = rundata.enqueue_modes(data)
    enqueue = []
    if any(m.startswith("batched") for m in modes):
        recs = [
            rec
            for case in data["cases"]
            if case["timing"]
            for rec in case["timing"]["implementations"]
            if str(rec.get("enqueue", "")).startswith("batched")
        ]
        enqueue.append(
            f"Samples enqueued {t['batch']} at a time behind a GPU sleep and read after one "
            "synchronisation, so the events bracket the kernel and not the host's launch latency"
            + _starvation_note(recs)
        )
    if "per-sample-sync" in modes:
        enqueue.append(
            "Some or all timings here were taken with a synchronisation after every sample (the method "
            "before batched enqueue): for kernels shorter than their launch latency the event median then "
            "includes host launch time. Such records are marked launch-bound (event median > "
            f"{claims.LAUNCH_BOUND_RATIO}x the CUDA-graph replay time) and compared by graph replay."
        )
    items = [
        f"Cases: {len(specs['cases'])} (kernel × shape × dtype) from shape set '{specs['shape_set']}'; config hash "
        f"{specs['config_hash']}.",
        f"Correctness: every implementation against a float64 reference, seeds {specs['seeds']}; outputs poisoned "
        "with NaN before each run, a second run with another poison must be bit-identical (unwritten elements, "
        "races), inputs must be unchanged, NaN/Inf never pass; element-wise |out − ref| ≤ atol + rtol·|ref| with "
        "per-dtype tolerances (listed per kernel below); deliberately broken negative controls must be rejected.",
        "Sweep: every declared launch config of every Triton variant compiled and timed on its own from an empty "
        "cache directory; pruned, failed and wrong configs are recorded; the fastest correct config is timed.",
        f"Timing: first call (JIT / torch.compile from a cold cache) recorded apart; {t['warmup']} warm-up "
        f"calls; clocks settled by running the baseline back to back; then samples until ≥ {t['min_samples']} "
        f"samples and ≥ {t['min_time_s']} s, stopping when the 95 % CI of the median is within "
        f"±{t['target_rel_ci']:.1%} or at {t['max_time_s']} s. "
        + (
            (
                "Each sample bracketed by CUDA events, L2 flushed before each sample (a 2×L2 write outside the "
                "events). "
                if t["flush_l2"]
                else "Each sample bracketed by CUDA events. WARM CACHE: L2 was not flushed between samples (flush_l2: "
                "false), so inputs that fit in L2 are read from it; these times are not cold-cache times. "
            )
            if not specs["interpreter"]
            else "Host wall clock (interpreter run). "
        )
        + " ".join(enqueue)
        + " All samples are kept (tables/samples.csv.gz).",
        "A/A floor: the primary baseline is timed first and again last in every timing job; their relative median "
        "difference is the noise floor below which no difference is claimed.",
        f"Claims: 'A faster than B' needs both correct, ≥ 20 samples each, Mann–Whitney p < {claims.ALPHA}, and a "
        f"median difference above max(A/A floor, {claims.MIN_EFFECT:.0%}).",
        "Clocks: NVML SM/memory clock, temperature, power and throttle reasons read after every batch of samples "
        "(each sample carries its batch's reading); samples taken while throttled or below 95 % of the steady "
        "clock are flagged and disclosed, not dropped.",
        f"Short cases (median under {t['graph_below_us']} µs) and launch-bound records also get CUDA-graph "
        "replay timing and host wall time per call. Graph replay is device time per call without launch gaps: "
        "where the record's column graph_l2 says 'flushed', each captured call is preceded by the same L2 flush "
        "as the event samples and a second graph of the flushes alone is subtracted, so both bases see a cold "
        "L2; 'warm' (older records, or flush_l2: false) means calls replayed back to back with L2 warm. Host wall "
        "time per call (how fast eager Python issues calls) is reported as its own finding, never as device speed.",
        "GPU use: jobs run side by side; each is bound to one card for its life (recorded per case) and holds that "
        "card exclusively only while it samples (sweep timing, timing, calibration, Nsight Compute), through a "
        "per-GPU file lock that the OS drops when a job dies. Correctness runs, first calls and profiles share the "
        "card (never with a sampler); imports and Triton compiles hold nothing. The Run cost section gives the "
        "exclusive time and how many jobs were alive while timing jobs sampled.",
        "Compile cost: torch.compile compiles in-process (TORCHINDUCTOR_COMPILE_THREADS=1 unless set), so its "
        "first call includes Inductor's whole compile. Triton variants are compiled before their first call "
        "without launching (compile_ms, where recorded; older records have none and their first call includes "
        "the JIT), so their first_call_ms is the first launch. Both were measured while other jobs ran. "
        "Building the callable is timed apart (prepare_ms, where recorded): for torch.compile it holds the "
        "process's first import of Dynamo and Inductor, a cold-process cost its first call does not include.",
        "Profile: torch.profiler lists every CUDA kernel each implementation launches (after warm-up), kept apart "
        "from timing.",
    ]
    if len(groups) > 1:
        items.append(
            "The timing settings differ between records; each set with its cases: "
            + "; ".join(f"{n} cases: {claims.config_text(g)}" for g, n in groups)
        )
    settings = pd.DataFrame([{"setting": k, "value": v} for k, v in t.items()])
    source = (
        f"Timing settings as recorded in the timing records ({sum(n for _, n in groups)} cases"
        + (", one set" if len(groups) == 1 else f", {len(groups)} sets: the first is shown")
        + ")"
        if groups
        else "Timing settings of the plan (the records of this run do not store them)"
    )
    return {"title": "Method", "blocks": [bullets(items), text(source + ":"), table(settings, ["setting", "value"])]}


def _calibration_section(data: dict[str, Any]) -> dict[str, Any]:
    cal = data["calibration"]
    if not cal:
        return {"title": "Measured ceilings", "blocks": [text("No calibration data.")]}
    pairs = [
        ("measured on", cal.get("measured_on")),
        ("copy bandwidth, read + write (GB/s)", (cal.get("copy") or {}).get("gbps")),
    ]
    for name, entry in (cal.get("matmul") or {}).items():
        pairs.append(
            (
                f"matmul {name} {entry.get('size', '')}³ ({entry.get('precision', 'library default')}) TFLOP/s",
                entry.get("tflops", entry.get("error")),
            )
        )
    return {
        "title": "Measured ceilings",
        "blocks": [
            text(
                f"Measured on card {(data['environment'].get('gpu') or {}).get('uuid') or 'of the environment job'} in "
                "this run; % of ceiling in the timing tables refers to these. Each is "
                "the median at one size (the copy of a multi-GiB buffer, the library's 8192³ product), not the "
                "hardware's peak: other sizes can exceed it, so above 100 % means faster than the library at the "
                "calibration size."
            ),
            kv(pairs),
        ],
    }


def _verdict_counts(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts()
    parts = [
        f"{int(counts[v])} {w}"
        for v, w in (
            (claims.FASTER, "faster"),
            (claims.SLOWER, "slower"),
            (claims.UNRESOLVED, "unresolved"),
            (claims.NOT_COMPARABLE, "not comparable"),
        )
        if v in counts
    ]
    return ", ".join(parts) or "–"


def _ratio_text(row: pd.Series) -> str:
    if pd.isna(row["speedup"]):
        return "–"
    ci = f" [{row['ci_low']:.2f}–{row['ci_high']:.2f}]" if pd.notna(row["ci_low"]) and pd.notna(row["ci_high"]) else ""
    return f"{row['speedup']:.2f}×{ci}" + ("ᵍ" if row["basis"] == "graph replay" else "")


def _comparisons(out: Path | None) -> list[tuple[Path, str]]:
    """This report's comparisons (``compare/<other>/report.html``), by name (file times differ between
    checkouts, and a re-render must not depend on them)."""
    if out is None or not (out / COMPARE_DIR).is_dir():
        return []
    found = sorted((out / COMPARE_DIR).glob("*/report.html"), key=lambda p: p.parent.name)
    return [(p.relative_to(out), p.parent.name) for p in found]


def _answer_section(
    data: dict[str, Any],
    tbl: dict[str, pd.DataFrame],
    ratios: pd.DataFrame,
    target_df: pd.DataFrame,
    refusals: list[str],
    out: Path | None,
) -> dict[str, Any]:
    """At most about 40 lines: one row per kernel and baseline, and the main refusals."""
    rows = []
    for kernel in sorted({c["kernel"] for c in data["cases"]}):
        kr = ratios[ratios["kernel"] == kernel] if not ratios.empty else ratios
        tk = target_df[target_df["kernel"] == kernel] if not target_df.empty else target_df
        timing = tbl["timing"]
        ok = timing[(timing["kernel"] == kernel) & (timing["status"] == "ok")] if not timing.empty else timing
        flagged = ok["flagged"].fillna(0).sum() if "flagged" in ok else 0
        samples = ok["n"].fillna(0).sum() if "n" in ok else 0
        first = True
        for baseline, grp in kr.groupby("baseline", sort=False) if not kr.empty else []:
            rows.append(
                {
                    "kernel": kernel if first else "",
                    "baseline": f"{baseline} ({grp['baseline_kind'].iloc[0]})",
                    "verdicts (best Triton vs it)": _verdict_counts(grp["verdict"]),
                    "speedup: median over cases [range]": (
                        f"{grp['speedup'].median():.2f}× [{grp['speedup'].min():.2f}–{grp['speedup'].max():.2f}]"
                        if grp["speedup"].notna().any()
                        else "–"
                    ),
                    "best Triton": ", ".join(sorted(set(grp["best_triton"]))),
                    "targets met": (
                        f"{int((tk['verdict'] == scores.MET).sum())}/{len(tk)}"
                        if first and len(tk)
                        else ("–" if first else "")
                    ),
                    "throttled samples": (f"{flagged / samples:.0%}" if first and samples else ("–" if first else "")),
                }
            )
            first = False
        if first:
            why = _no_ratio(data, ok, kernel)
            rows.append({"kernel": kernel, "baseline": "–", "verdicts (best Triton vs it)": why})
    df = pd.DataFrame(rows)
    basis_note = (
        "device time, under sustained load from 1 ms"
        if bases.has_device_time(data)
        else "event median; ᵍ graph replay for launch-bound pairs"
    )
    notes = [
        "Speedup = baseline time / best Triton variant's time (above 1: Triton faster), per case on the claim "
        f"rules' basis ({basis_note}); per-case ratios with 95 % CIs are in the figure above and on each "
        "kernel's page. Verdicts: Mann–Whitney and A/A-floor rules (Method). Throttled: "
        "share of the kernel's timed samples taken while throttled or below the steady clock. Whether a run "
        "reproduced another is in their comparison, and per kernel in the index of published runs."
    ]
    blocks = [
        table(
            df,
            [
                "kernel",
                "baseline",
                "verdicts (best Triton vs it)",
                "speedup: median over cases [range]",
                "best Triton",
                "targets met",
                "throttled samples",
            ],
            notes=notes,
        )
    ]
    blocks.append(text("Main limits (every limit: the next section and the details page):"))
    blocks.append(bullets(refusals[:MAIN_REFUSALS]))
    links = _comparisons(out)
    if links:
        blocks.append(
            table(
                pd.DataFrame([{"comparison": str(rel), "against run": name} for rel, name in links]),
                ["comparison", "against run"],
                links=("comparison",),
            )
        )
    return {"title": "The answer", "id": "answer", "blocks": blocks}


def _no_ratio(data: dict[str, Any], ok: pd.DataFrame, kernel: str) -> str:
    """Why a kernel has no Triton-vs-baseline row in the answer table."""
    planned = sum(1 for c in data["cases"] if c["kernel"] == kernel)
    timed = ok[["shape", "dtype"]].drop_duplicates().shape[0] if not ok.empty else 0
    faulted = len(rundata.reference_faults(data).get(kernel, []))
    if not timed:
        reference = f" (the reference failed on {faulted} of {planned} cases)" if faulted else ""
        return f"no timing result{reference}"
    if data["specs"]["interpreter"]:
        return f"{timed} of {planned} cases timed, under the interpreter: no comparison"
    return f"{timed} of {planned} cases timed; no Triton variant that passed the gate was timed beside a baseline"


def _reference_refusals(data: dict[str, Any]) -> list[Statement]:
    """The cases whose fp64 reference raised: the kernel declaration's fault, so no implementation of them
    was checked or timed (each implementation's record says ``reference_error``)."""
    return [
        Statement(
            f"Anything about {len(faulted)} {kernel} case(s) "
            f"({', '.join(c['shape'] + ' ' + c['dtype'] for c in faulted)}):"
            f" {faulted[0]['correctness']['reference_error']}, so no implementation or negative control was checked "
            f"there and none was timed; the fault is in the reference() of kernels/{kernel}.py, not in its "
            "implementations.",
            Topic.MISSING,
        )
        for kernel, faulted in rundata.reference_faults(data).items()
    ]


def _targets_section(target_df: pd.DataFrame) -> dict[str, Any] | None:
    if target_df.empty:
        return None
    df = target_df.assign(
        measured=[
            "–"
            if pd.isna(r["value"])
            else f"{r['value']:.3g}" + (f" [{r['ci_low']:.3g}–{r['ci_high']:.3g}]" if pd.notna(r["ci_low"]) else "")
            for _, r in target_df.iterrows()
        ]
    )
    reasons = [f"{t}: {r}" for t, r in dict(zip(target_df["target"], target_df["reason"])).items()]
    return {
        "title": "Targets",
        "blocks": [
            text(
                "Each target a kernel declares, on every case of this run it covers. Met: the whole 95 % interval is "
                "at or above the goal; missed: the whole interval is below it; not resolved: the interval straddles "
                "the goal, or a side has no valid time. A ratio's interval holds both of the baseline's blocks, timed "
                "before (A1) and after (A2) the variants: the note names them where they differ."
            ),
            table(df, ["verdict", "target", "case", "measured", "note"]),
            text("Why each target:"),
            bullets(reasons),
        ],
    }


def sweep_line(sw: dict[str, Any]) -> str:
    """One variant's sweep in one line: what was timed, pruned, failed or wrong, and which config was timed."""
    c = sw.get("counts", {})
    line = (
        f"{sw['implementation']}: {len(sw.get('configs', []))} configs — {c.get('ok', 0)} timed, "
        f"{c.get('pruned', 0)} pruned, {c.get('failed', 0)} failed, {c.get('wrong', 0)} wrong"
    )
    if c.get("failed"):
        line += f" (failed: {wording.fault_counts(sw.get('configs', []))})"
    retried = sum(1 for r in sw.get("configs", []) if r.get("oom_retries"))
    if retried:
        line += f"; {retried} ran again after running out of GPU memory"
    if sw.get("fastest"):  # the default was kept: within the sweep's tie margin of the fastest
        line += (
            f"; timed the default {sw['best']['key']} at {sw['best']['median_us']:.3f} µs, within "
            f"{sw['keep_default_within']:.0%} of the fastest {sw['fastest']['key']} at "
            f"{sw['fastest']['median_us']:.3f} µs"
        )
        line += f", worst/fastest {sw['worst_over_best']:.2f}×"
    elif sw.get("best"):
        line += f"; best {sw['best']['key']} at {sw['best']['median_us']:.3f} µs"
        line += f", worst/best {sw['worst_over_best']:.2f}×"
        d = sw.get("default") or {}
        if d.get("over_best"):
            line += f"; default config ranks {d['rank']}/{d['of']} at {d['over_best']:.2f}× best"
        elif d:
            line += f"; default config: {d.get('status')}"
    else:
        line += f" — {sw.get('reason') or 'no valid config'}"
    return line


def _case_blocks(case: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    def sel(df: pd.DataFrame) -> pd.DataFrame:
        if df.empty:
            return df
        return df[(df["kernel"] == case["kernel"]) & (df["shape"] == case["shape"]) & (df["dtype"] == case["dtype"])]

    invariants = [inv["name"] for inv in records.declaration(case).get("invariants", [])]
    blocks = [text(f"Shape {json.dumps(case['params'])}: {case['reason']}.")]
    gate = case["correctness"] or {}
    if gate.get("reference_error"):
        blocks.append(
            text(
                f"The reference failed: {gate['reference_error']}. No implementation or negative control of this "
                "case was checked against it, and none was timed."
            )
        )
    if gate.get("tolerance"):
        tol = gate["tolerance"]
        blocks.append(text(f"Tolerance: atol {tol['atol']:g}, rtol {tol['rtol']:g} — {tol['reason']}."))
    blocks.append(
        table(
            sel(tbl["correctness"]),
            ["outcome", "implementation", "role", "max_abs_err", "rel_l2_err", *invariants],
        )
    )
    claim_df = sel(tbl["claims"])
    if not claim_df.empty:
        graph = claim_df["basis_key"] == Basis.GRAPH
        claim_df = claim_df.assign(basis=claim_df["basis"].where(~graph, "graph replay¹"))
        blocks.append(
            table(
                claim_df,
                ["verdict", "speedup", "a", "b", "basis", "note"],
                notes=["¹ a launch-bound pair, judged by CUDA-graph replay; why: the appendix's footnote."]
                if graph.any()
                else None,
            )
        )
    timing = sel(tbl["timing"])
    if not timing.empty:
        timing = timing.assign(
            ci95_us=[
                f"{lo:.3f}–{hi:.3f}" if pd.notna(lo) else "–"
                for lo, hi in zip(
                    timing.get("ci95_low_us", pd.Series(dtype=float)),
                    timing.get("ci95_high_us", pd.Series(dtype=float)),
                )
            ]
            if "ci95_low_us" in timing
            else "–",
            config=[claims.config_text(json.loads(c)) for c in timing["config"]],
        )
    blocks.append(
        table(
            timing,
            [
                "implementation",
                "block",
                "status",
                "median_us",
                "ci95_us",
                "n",
                "device_us",
                "sustained_us",
                "graph_us",
                "launch_bound",
                "gbps",
                "pct_copy_bw",
                "tflops",
                "pct_matmul_peak",
                "flagged",
                "first_call_ms",
                "config",
                "reason",
            ],
            notes=[
                "Each record's settings, samples, p20/p80, prepare and compile times are in "
                "tables/timing.csv and tables/samples.csv.gz."
            ],
        )
    )
    doc = case["timing"] or {}
    aa = doc.get("aa_floor")
    if aa:
        blocks.append(
            text(
                f"A/A floor ({doc.get('primary_baseline')} timed twice): {aa['rel_diff']:.2%} "
                f"(Mann–Whitney p = {aa['mannwhitney_p']:.2g})."
            )
        )
    costs = claims.host_costs(doc) if doc else []
    if costs:
        blocks.append(
            table(
                pd.DataFrame(costs),
                ["implementation", "host_wall_us", "device_us", "event_median_us", "launch_bound", "host_bound"],
                notes=[
                    "Host-side cost per call, its own finding and never a device-speed claim: wall "
                    "time of back-to-back eager calls beside the device time per call (graph replay). "
                    "host_bound: the host time is the larger, so eager use is limited by the host."
                ],
            )
        )
    prof = case["profile"] or {}
    if prof.get("captured"):
        blocks.append(
            table(
                sel(tbl["profile"]),
                ["implementation", "cuda_kernel", "launches_per_call", "device_us_per_call"],
                code=("cuda_kernel",),
                notes=["Kernel names shortened; whole in tables/profile.csv."],
            )
        )
    elif prof:
        blocks.append(text(f"Kernel names: not captured — {prof.get('reason')}."))
    blocks.append(_ncu_block(case))
    stalls = _ncu_stall_block(case)
    if stalls is not None:
        blocks.append(stalls)
    sweep_lines = [sweep_line(sw) for sw in case["sweeps"]]
    if sweep_lines:
        blocks.append(bullets(sweep_lines))
    return blocks


def _ncu_block(case: dict[str, Any]) -> dict[str, Any]:
    doc = case.get("ncu")
    if doc is None:
        return text(
            "Nsight Compute: stage not run for this case (enable with the config key `ncu: true`, or list "
            "the case under `ncu`)."
        )
    if not doc.get("ran"):
        return text(f"Nsight Compute: did not run — {doc.get('reason')}.")
    df = pd.DataFrame(doc["kernels"])
    return table(
        df,
        [
            "implementation",
            "kernel",
            "duration_ns",
            "dram_throughput_pct",
            "achieved_occupancy_pct",
            "registers_per_thread",
            "local_load_bytes",
            "local_store_bytes",
            "shared_mem_per_block_bytes",
        ],
        code=("kernel",),
    )


def _ncu_stall_block(case: dict[str, Any]) -> dict[str, Any] | None:
    """SM and issue-slot utilisation and the warp stall reasons, where the record has them (records made
    before they were collected have not)."""
    doc = case.get("ncu") or {}
    if not doc.get("ran"):
        return None
    df = pd.DataFrame(doc["kernels"])
    # the record's own columns (kernelscope.ncu.METRICS names them; the reading side does not import it)
    extra = [
        "sm_throughput_pct",
        "l2_throughput_pct",
        "l2_bytes",
        "global_load_bytes",
        "issue_active_pct",
        "dram_bytes",
        "inst_executed",
        "sm_clock_hz",
        *(c for c in df.columns if c.startswith("stall_")),
    ]
    present = [c for c in extra if c in df.columns and df[c].notna().any()]
    if not present:
        return None
    return table(df, ["implementation", "kernel", *present], code=("kernel",))


def _references_section(data: dict[str, Any]) -> dict[str, Any] | None:
    refs = data["specs"].get("external_references", [])
    if not refs:
        return None
    fp = fingerprint(data["environment"])
    blocks = []
    for ref in refs:
        blocks.append(text(f"{ref['label']} — {ref.get('source', '')}"))
        blocks.append(kv([(k, v) for k, v in ref.items() if k not in ("label", "source")]))
        blocks.append(bullets(["Not rankable against this run: " + "; ".join(claims.reference_comparability(fp, ref))]))
    return {"title": "Reference numbers from elsewhere (not comparable)", "blocks": blocks}


def _kernel_blocks(
    data: dict[str, Any], tbl: dict[str, pd.DataFrame], ratios: pd.DataFrame, name: str, out: Path
) -> list[dict[str, Any]]:
    """A kernel's declaration as recorded, its ratios per case and baseline and its figures (written under
    ``out/plots``, linked from the kernel's page one folder down)."""
    # the declaration the kernel's first recorded case was measured under, narrowed to what this run recorded
    declared = next((records.declaration(c) for c in data["cases"] if c["kernel"] == name and c["declaration"]), {})
    recorded = {
        r["implementation"]
        for c in data["cases"]
        if c["kernel"] == name and c["correctness"]
        for r in c["correctness"].get("implementations", []) + c["correctness"].get("negative_controls", [])
    }
    impls = [
        f"{i['name']} ({i['kind']}): {i['description']}"
        for i in declared.get("implementations", [])
        if not recorded or i["name"] in recorded
    ]
    controls = [
        f"negative control {i['name']}: {i['description']}"
        for i in declared.get("negative_controls", [])
        if not recorded or i["name"] in recorded
    ]
    about = declared.get("description", f"No record of {name} has its declaration: every stage failed to write.")
    figures = {}
    for plot, written, alt in (
        (
            "speedup",
            plots.speedup(ratios, name, out / "plots" / f"speedup-{name}.svg"),
            "speedup of the best Triton variant per case, with 95 % CIs",
        ),
        (
            "sweep",
            plots.sweep_spread(tbl["sweep"], name, out / "plots" / f"sweep-{name}.svg"),
            "launch-config sweep spread per variant and case",
        ),
    ):
        if written:
            path = out / "plots" / f"{plot}-{name}.svg"
            figures[plot] = figure(path, f"../plots/{plot}-{name}.svg", f"{name}: {alt}")
    # the picture first, then its numbers
    blocks = [text(about), bullets(impls + controls)]
    if "speedup" in figures:
        blocks.append(figures["speedup"])
    kr = ratios[ratios["kernel"] == name] if not ratios.empty else ratios
    if not kr.empty:
        blocks.append(
            table(
                kr.assign(ratio=[_ratio_text(r) for _, r in kr.iterrows()]),
                [
                    "verdict",
                    "ratio",
                    "case",
                    "baseline",
                    "best_triton",
                    "pct_copy_bw",
                    "pct_matmul_peak",
                    "flagged_share",
                ],
                notes=["ratio: baseline time / best Triton time [95 % CI]; ᵍ by graph replay (no CI)."],
            )
        )
    if "sweep" in figures:
        blocks.append(figures["sweep"])
    return blocks


def _page_nav(kernels: list[str], here: str | None) -> list[dict[str, str]]:
    """The links at the top of a page: the first page, each kernel's page but this one, the details page."""
    up = "../" if here not in (None, firstpage.DETAILS) else ""
    nav = [{"label": "← first page", "href": f"{up}report.html"}]
    nav += [{"label": k, "href": f"{up}{firstpage.kernel_page(k)}"} for k in kernels if k != here]
    if here != firstpage.DETAILS:
        nav.append({"label": "details", "href": f"{up}{firstpage.DETAILS}.html"})
    return nav


def kernel_document(
    data: dict[str, Any],
    tbl: dict[str, pd.DataFrame],
    ratios: pd.DataFrame,
    target_df: pd.DataFrame,
    name: str,
    out: Path,
    head: dict[str, Any],
) -> dict[str, Any]:
    """One kernel's page: its declaration, ratios and figures, its targets on every case, and each case's
    correctness, claims, timing, profile and sweep (collapsed in HTML)."""
    sections = [{"title": f"Kernel: {name}", "id": "kernel", "blocks": _kernel_blocks(data, tbl, ratios, name, out)}]
    targets = _targets_section(target_df[target_df["kernel"] == name] if not target_df.empty else target_df)
    if targets:
        sections.append(targets)
    for case in [c for c in data["cases"] if c["kernel"] == name]:
        sections.append(
            {
                "title": f"{name} · {case['shape']} · {case['dtype']}",
                "level": 3,
                "collapsed": True,
                "blocks": _case_blocks(case, tbl),
            }
        )
    kernels = sorted({c["kernel"] for c in data["cases"]})
    return {**head, "title": f"{name} — {head['title']}", "nav": _page_nav(kernels, name), "sections": sections}


def _statements_section(verdict: dict[str, list[str]], refusals: list[str], claim_df: pd.DataFrame) -> dict[str, Any]:
    graph_note = bool(len(claim_df)) and (claim_df["basis_key"] == Basis.GRAPH).any()
    return {
        "title": "Appendix: what this report supports / does not support",
        "id": "appendix",
        "blocks": [
            text("Supports:"),
            bullets(verdict["supports"] or ["No performance statement."]),
            text("Does not support:"),
            bullets(refusals),
        ]
        + ([text(f"¹ {claims.GRAPH_BASIS_REASON}.")] if graph_note else []),
    }


def _roofline_section(data: dict[str, Any], tbl: dict[str, pd.DataFrame], out: Path) -> dict[str, Any] | None:
    fp = fingerprint(data["environment"])
    title = f"{fp['gpu'] or 'CPU interpreter'} — torch {fp['torch']}, triton {fp['triton']}"
    if not plots.roofline(tbl["timing"], data["calibration"], title, out / "plots" / "roofline.svg"):
        return None
    return {
        "title": "Roofline",
        "blocks": [
            figure(
                out / "plots" / "roofline.svg",
                "plots/roofline.svg",
                "roofline: arithmetic intensity vs achieved TFLOP/s per kernel and implementation",
            ),
            text(
                "Ceilings are the measured copy bandwidth and library matmul peaks (Measured ceilings); intensity "
                "uses each kernel's minimal-traffic model. Each case's fastest point is labelled where its label "
                "collides with no other; every point names itself when hovered (HTML)."
            ),
        ],
    }


def details_document(
    data: dict[str, Any],
    tbl: dict[str, pd.DataFrame],
    verdict: dict[str, list[str]],
    refusals: list[str],
    out: Path,
    head: dict[str, Any],
) -> dict[str, Any]:
    """Everything a reader checks after the first page: the roofline, how time was measured, the whole
    environment, the ceilings, the method, the run's cost, every statement and the data files."""
    sections = [
        s
        for s in (
            _roofline_section(data, tbl, out),
            bases.seed_section(data),
            bases.bases_section(data),
            bases.regime_section(data, tbl["claims"]),
            _environment_section(data),
            _calibration_section(data),
            _method_section(data),
            _references_section(data),
            _job_cost_section(data),
            _statements_section(verdict, refusals, tbl["claims"]),
        )
        if s
    ]
    sections.append(
        {
            "title": "Data",
            "blocks": [
                bullets(
                    [
                        "tables/timing.csv — one row per implementation and case (medians, spread, CI, throughput, "
                        "% of ceilings, commit and card)",
                        "tables/samples.csv.gz — every timed sample with its SM clock and flag",
                        "tables/correctness.csv, tables/sweep.csv, tables/profile.csv (whole kernel names), "
                        "tables/claims.csv, tables/ratios.csv, tables/targets.csv",
                        "plots/*.svg — the figures; run.json — the run's summary (cases, commits, cards, cost)",
                        f"raw per-case JSON: results/{data['specs']['device']}/ (path grammar in kernelscope/cases.py)",
                    ]
                )
            ],
        }
    )
    kernels = sorted({c["kernel"] for c in data["cases"]})
    return {
        **head,
        "title": f"Details — {head['title']}",
        "nav": _page_nav(kernels, firstpage.DETAILS),
        "sections": sections,
    }


def documents(data: dict[str, Any], tbl: dict[str, pd.DataFrame], out: Path) -> dict[str, dict[str, Any]]:
    """The report's pages, by path relative to ``out`` without the suffix: the first page (``report``), the
    details page and one page per kernel (``kernels/<kernel>``); figures are written under ``out/plots``.
    ``tbl`` holds every table of ``TABLES``, the ratios and targets included (``build``)."""
    specs, env = data["specs"], data["environment"]
    fp = fingerprint(env)
    commits, cards = rundata.case_commits(data), rundata.case_cards(data)
    timed = sum(1 for c in data["cases"] if c["timing"])
    banner = (
        f"Device {specs['device']}: {fp['gpu'] or 'no GPU'}; torch {fp['torch']}, triton {fp['triton']}; "
        f"{timed} of {len(specs['cases'])} cases timed"
        + (
            f", at {len(commits)} commits"
            if len(commits) > 1
            else f" at commit {next(iter(commits))[:12]}"
            if commits
            else ""
        )
        + (f" on {len(cards)} cards" if len(cards) > 1 else "")
        + "."
    )
    warn = (
        (
            "INTERPRETER RUN: Triton ran in interpreter mode on the CPU. The timings below are interpreter timings "
            "and support no performance comparison; correctness results are real."
        )
        if specs["interpreter"]
        else None
    )
    head = {"title": f"kernelscope report — {specs['device']}", "banner": banner, "warning": warn}
    verdict = claims.statements(data, tbl)
    # those that change how the whole report is read first (verdicts.Topic's order), then the rest
    refusals = topic_order(_reference_refusals(data) + verdict["does_not_support"])
    # the ratio and target tables ``build`` computed (and wrote); an interpreter run shows neither
    ratios = tbl["ratios"] if not specs["interpreter"] else tbl["ratios"].iloc[0:0]
    target_df = tbl["targets"] if not specs["interpreter"] else pd.DataFrame()
    kernels = sorted({c["kernel"] for c in data["cases"]})
    basis = (
        "device time, under sustained load from 1 ms"
        if bases.has_device_time(data)
        else "event median; graph replay for launch-bound pairs"
    )
    # the answer opens with the headline figure: both in a reader's first screen
    answer = _answer_section(data, tbl, ratios, target_df, refusals, out)
    answer["blocks"][:0] = firstpage.headline_blocks(ratios, out, basis)
    sections = [
        s
        for s in (
            answer,
            firstpage.targets_summary(target_df),
            firstpage.supports_section(verdict["supports"], refusals, tbl["claims"]),
            firstpage.environment_brief(_environment_pairs(data), tuple(IMAGE_KEYS.values())),
            firstpage.kernels_section({k: sum(1 for c in data["cases"] if c["kernel"] == k) for k in kernels}),
        )
        if s
    ]
    pages = {
        "report": {**head, "nav": _page_nav(kernels, None)[1:], "toc": False, "sections": sections},
        firstpage.DETAILS: details_document(data, tbl, verdict, refusals, out, head),
    }
    for name in kernels:
        pages[f"{firstpage.KERNEL_DIR}/{name}"] = kernel_document(data, tbl, ratios, target_df, name, out, head)
    return pages


def run_facts(data: dict[str, Any], tbl: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """What the index of runs lists, from the records: when the cases were timed, at which commits and on
    which cards (per case, which run.json's run-level lists do not say), and the gate's outcome counts."""
    created = sorted(c["timing"]["created"] for c in data["cases"] if c["timing"] and c["timing"].get("created"))
    corr = tbl["correctness"]
    impls = corr[corr["role"] != "negative control"] if not corr.empty else corr
    return {
        "first_timed": created[0] if created else None,
        "last_timed": created[-1] if created else None,
        "gpu": fingerprint(data["environment"]).get("gpu"),
        "case_commits": rundata.case_commits(data),
        "case_cards": rundata.case_cards(data),
        "gate": {str(k): int(v) for k, v in impls["status"].value_counts().items()} if not impls.empty else {},
        "declined": int(impls["declined"].eq(True).sum()) if "declined" in impls else 0,
    }


def build(results_dir: str | Path, out_dir: str | Path) -> None:
    source, out = Path(results_dir), Path(out_dir)
    for sub in ("tables", "plots"):  # both are declared outputs of the report rule, even when empty
        (out / sub).mkdir(parents=True, exist_ok=True)
    data = rundata.collect(source)
    tbl = rundata.tables(data)
    tbl["ratios"] = scores.best_ratios(data, tbl)
    tbl["targets"] = scores.targets(data, tbl)
    assert set(tbl) == set(TABLES), "workflow/rules/common.smk REPORT_TABLES must list every table"
    for name, df in tbl.items():
        with results.atomic(out / "tables" / table_file(name)) as tmp:
            if name in COMPRESSED:  # gzip.compress writes neither a time stamp nor the (temporary) file name
                tmp.write_bytes(gzip.compress(df.to_csv(index=False).encode(), mtime=0))
            else:
                df.to_csv(tmp, index=False)
    results.write_text(
        out / "run.json", json.dumps({**data["run"], "report": run_facts(data, tbl)}, indent=1, sort_keys=True) + "\n"
    )
    for page, doc in documents(data, tbl, out).items():
        render(doc, (out / page).parent, Path(page).name)
