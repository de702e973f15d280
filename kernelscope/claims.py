"""What the data supports: the rules that turn timing results into statements, and refusals.

A performance statement "A is faster than B" is made only when all of these hold:

1. the run timed a real device (never interpreter timings);
2. both A and B passed the correctness gate (a fast wrong kernel is not a result);
3. both sides have at least ``stats.MIN_SAMPLES_FOR_TEST`` samples and the two-sided Mann-Whitney U
   test gives p < ``ALPHA``;
4. the relative median difference exceeds the job's A/A noise floor (the primary baseline measured
   twice) and ``MIN_EFFECT``.

Otherwise the verdict is "no difference resolved" (or "not comparable" with the reason). Every verdict
carries the disclosure of flagged (throttled / slow-clock) samples on either side. ``statements`` applies
these rules and the run-level refusals (interpreter runs, gate failures, capped measurements, runs spread
over several commits or cards) to a whole run.

A verdict is recorded as codes (:mod:`kernelscope.verdicts`: verdict, basis, reason and the fields the reason
names, e.g. ``effect_rel`` against ``threshold_rel``), a refusal with its topic; the words (``why``,
``basis``, the sentences) are rendered from the codes by :mod:`kernelscope.wording`, and nothing here or
downstream decides by them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kernelscope import records, reruns, stats, wording
from kernelscope.fingerprint import fingerprint
from kernelscope.verdicts import RESOLVED, Basis, Gate, Reason, Statement, Topic, Verdict

# the sentences are wording's; claims.sentence and claims.config_text stay the names callers use
from kernelscope.wording import config_text, sentence  # noqa: F401

ALPHA = 0.01
MIN_EFFECT = 0.01  # a 1 % difference is the smallest we state even with a tighter A/A floor
#: an event median this many times the CUDA-graph replay time per call is dominated by launch latency
LAUNCH_BOUND_RATIO = 1.5

FASTER = Verdict.FASTER
SLOWER = Verdict.SLOWER
UNRESOLVED = Verdict.UNRESOLVED
NOT_COMPARABLE = Verdict.NOT_COMPARABLE
REGIME_DEPENDENT = Verdict.REGIME_DEPENDENT


def flagged_fraction(rec: Mapping[str, Any]) -> tuple[int, int]:
    clocks = rec.get("clocks") or {}
    return int(clocks.get("n_flagged", 0)), int(rec.get("n", len(rec.get("samples_us", []))))


#: largest share of possibly gap-holding samples (``starved``) that cannot move a batched median much:
#: at most this fraction of samples sits high, so the median moves by at most a few percentiles
STARVED_LIMIT = 0.05
#: why a launch-bound pair is compared by graph replay; said once per document (a footnote), not per claim
GRAPH_BASIS_REASON = wording.graph_basis_reason(STARVED_LIMIT)


def starved_fraction(rec: Mapping[str, Any]) -> float:
    """Share of a batched record's samples that may hold a launch gap: counted per sample where recorded,
    else (records of the first batched run) per batch, which over-counts."""
    if rec.get("starved_samples") is not None and rec.get("n"):
        return rec["starved_samples"] / rec["n"]
    if rec.get("batches"):
        return (rec.get("starved_batches") or 0) / rec["batches"]
    return 0.0


def has_device_time(rec: Mapping[str, Any], key: str = "device") -> bool:
    """Whether a timed record carries device time on basis ``key`` ("device" or "sustained")."""
    return rec.get("status") == "ok" and (rec.get(key) or {}).get("status") == "ok"


def launch_bound(rec: Mapping[str, Any]) -> bool:
    """Whether a record's event median may measure host launch latency rather than the kernel.

    Samples enqueued in batches behind a GPU sleep bracket device time, unless more than
    ``STARVED_LIMIT`` of them were launched after the GPU could have reached them: then the median can
    hold launch gaps, whatever its size. Samples synchronised one by one (the older method) are judged
    launch-bound when their median exceeds ``LAUNCH_BOUND_RATIO`` times the graph replay time, where one
    was recorded. A launch-bound record is compared by CUDA-graph replay, or not by device time at all."""
    if str(rec.get("enqueue", "")).startswith("batched"):
        if starved_fraction(rec) <= STARVED_LIMIT:
            return False
        # a late launch holds a gap only where the device outruns the host: a kernel whose device time is
        # far above its host launch cost cannot wait for its own launch, whatever the late-launch count
        device_us = (rec.get("device") or {}).get("median_us") if has_device_time(rec) else None
        host_us = rec.get("host_wall_us")
        return not (device_us and host_us and device_us > LAUNCH_BOUND_RATIO * host_us)
    graph = rec.get("graph") or {}
    return graph.get("status") == "ok" and rec.get("median_us", 0) > LAUNCH_BOUND_RATIO * graph["median_us"]


def _graph_view(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The record as its CUDA-graph replay samples: device time per call, with no launch gaps to count."""
    launch_fields = ("graph", "enqueue", "batches", "starved_batches", "starved_samples")
    view = {k: v for k, v in rec.items() if k not in launch_fields}
    return {
        **view,
        "samples_us": rec["graph"]["samples_us"],
        "median_us": rec["graph"]["median_us"],
        "n": len(rec["graph"]["samples_us"]),
        "clocks": None,
    }


def _basis_view(rec: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The record as its device-time samples on basis ``key`` (no launch gaps in them to count)."""
    sub = rec[key]
    dropped = (
        "graph",
        "enqueue",
        "batches",
        "starved_batches",
        "starved_samples",
        "device",
        "sustained",
        "seed_method",
    )
    view = {k: v for k, v in rec.items() if k not in dropped}
    return {
        **view,
        "samples_us": sub["samples_us"],
        "median_us": sub["median_us"],
        "n": len(sub["samples_us"]),
        "clocks": sub.get("clocks"),
    }


def rerun_floor(
    calibration: Mapping[str, Any] | None, basis: str, a: Mapping[str, Any], b: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The calibrated rerun floor for a pair of basis views: that of the smaller time's size class (where
    relative noise is the larger), for both sides' implementation kinds."""
    return reruns.floor(calibration, basis, min(a["median_us"], b["median_us"]), [a.get("kind"), b.get("kind")])


def _device_compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    key: str,
    aa_rel: float | None,
    calibration: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The claim rules on device time: the floor is the largest of the job's A/A floor on this basis, the
    rerun floor calibrated for this basis and size class, and ``MIN_EFFECT``. Without a calibrated floor no
    ordering is claimed: the in-job A/A floor cannot see what another process or machine does."""
    va, vb = _basis_view(a, key), _basis_view(b, key)
    floor = rerun_floor(calibration, key, va, vb)
    claim = _event_rules(va, vb, max(aa_rel or 0.0, floor["rel"] if floor else 0.0))
    claim["basis_key"] = Basis(key)
    claim["rerun_floor"] = floor
    if floor is None and claim["verdict"] in RESOLVED:
        claim.update(
            verdict=UNRESOLVED,
            reason=Reason.NO_RERUN_CALIBRATION,
            size_class=reruns.size_class(min(va["median_us"], vb["median_us"])),
        )
        if reruns.counts_cases(calibration):
            claim["min_cases"] = reruns.MIN_CASES
    return claim


def _rendered(claim: dict[str, Any]) -> dict[str, Any]:
    """The claim with its views: ``why`` and ``basis`` in words (``wording``), beside the codes."""
    views = {"why": wording.why(claim)}
    if claim.get("basis_key"):
        views["basis"] = wording.BASIS_NAMES[claim["basis_key"]]
    return {**claim, **views}


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    aa_rel: float | None,
    interpreter: bool,
    aa_graph_rel: float | None = None,
    calibration: Mapping[str, Any] | None = None,
    aa_device: Mapping[str, float | None] | None = None,
) -> dict[str, Any]:
    """Verdict for implementation record ``a`` against ``b`` (timing records of one job): the codes
    (``verdict``, ``basis_key``, ``reason`` and the fields the reason names, ``kernelscope.verdicts``) and their
    views in words (``why``, ``basis``).

    Where both records carry device time (CUPTI kernel timestamps), that is the basis: under sustained load
    where both sides were measured so (long, power-bound kernels), else in the sampling's own regime. An
    ordering that burst and sustained load resolve oppositely is ``REGIME_DEPENDENT``, never a plain claim.
    ``calibration`` is the rerun calibration record (``kernelscope.reruns``), ``aa_device`` the job's A/A
    floors per device basis.

    Records without device time (older runs) follow the event rules:

    When either event median is dominated by launch latency (``launch_bound``), the plain medians rank
    host overheads, not kernels: the comparison then uses both sides' CUDA-graph replay samples (device
    time per call) and says so, or refuses when one side has none."""
    return _rendered(_judge(a, b, aa_rel, interpreter, aa_graph_rel, calibration, aa_device))


def _judge(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    aa_rel: float | None,
    interpreter: bool,
    aa_graph_rel: float | None,
    calibration: Mapping[str, Any] | None,
    aa_device: Mapping[str, float | None] | None,
) -> dict[str, Any]:
    """``compare``'s codes, without the views."""
    if not interpreter and has_device_time(a) and has_device_time(b):
        aa_device = aa_device or {}
        burst = _device_compare(a, b, "device", aa_device.get("device"), calibration)
        if not (has_device_time(a, "sustained") and has_device_time(b, "sustained")):
            return burst
        sustained = _device_compare(a, b, "sustained", aa_device.get("sustained"), calibration)
        sustained["burst"] = {k: burst.get(k) for k in ("verdict", "median_a_us", "median_b_us")}
        sustained["burst"]["why"] = wording.why(burst)
        if {burst["verdict"], sustained["verdict"]} == set(RESOLVED):
            return {
                **sustained,
                "verdict": REGIME_DEPENDENT,
                "reason": Reason.REGIME_OPPOSITE,
                "sustained_verdict": sustained["verdict"],
            }
        return sustained
    if not interpreter and a.get("status") == b.get("status") == "ok" and (launch_bound(a) or launch_bound(b)):
        with_graph = sum((r.get("graph") or {}).get("status") == "ok" for r in (a, b))
        if with_graph == 2:
            claim = _event_rules(_graph_view(a), _graph_view(b), aa_graph_rel)
            return {**claim, "basis_key": Basis.GRAPH, "starved_limit": STARVED_LIMIT}
        return {
            "a": a["implementation"],
            "b": b["implementation"],
            "verdict": NOT_COMPARABLE,
            "reason": Reason.LAUNCH_BOUND_NO_GRAPH,
            "launch_bound": [r["implementation"] for r in (a, b) if launch_bound(r)],
            "graph_sides": with_graph,
        }
    if interpreter:
        return {
            "a": a["implementation"],
            "b": b["implementation"],
            "basis_key": Basis.EVENT,
            "verdict": NOT_COMPARABLE,
            "reason": Reason.INTERPRETER,
        }
    return _event_rules(a, b, aa_rel)


def _event_rules(a: Mapping[str, Any], b: Mapping[str, Any], aa_rel: float | None) -> dict[str, Any]:
    """The test and the floor on two records' samples (event medians, or a basis view of them)."""
    out: dict[str, Any] = {"a": a["implementation"], "b": b["implementation"], "basis_key": Basis.EVENT}
    for rec in (a, b):
        if rec.get("status") != "ok":
            untimed = {"implementation": rec["implementation"], "status": rec.get("status")}
            return {
                **out,
                "verdict": NOT_COMPARABLE,
                "reason": Reason.UNTIMED,
                "untimed": {**untimed, "reason": rec.get("reason", "")},
            }
    cmp = stats.compare_samples(a["samples_us"], b["samples_us"])
    floor = max(aa_rel if aa_rel is not None and math.isfinite(aa_rel) else 0.0, MIN_EFFECT)
    fa, na = flagged_fraction(a)
    fb, nb = flagged_fraction(b)
    out.update(cmp)
    out["aa_floor_rel"] = aa_rel
    out["threshold_rel"] = floor
    out["effect_rel"] = abs(cmp["rel_diff"])
    out["alpha"] = ALPHA
    out["min_samples"] = stats.MIN_SAMPLES_FOR_TEST
    out["flagged"] = {a["implementation"]: [fa, na], b["implementation"]: [fb, nb]}
    if not cmp["testable"]:
        return {**out, "verdict": UNRESOLVED, "reason": Reason.TOO_FEW_SAMPLES}
    if cmp["mannwhitney_p"] >= ALPHA:
        return {**out, "verdict": UNRESOLVED, "reason": Reason.NOT_SIGNIFICANT}
    if out["effect_rel"] <= floor:
        return {**out, "verdict": UNRESOLVED, "reason": Reason.BELOW_FLOOR}
    return {**out, "verdict": FASTER if cmp["rel_diff"] < 0 else SLOWER, "reason": Reason.ABOVE_FLOOR}


def passed_gate(correctness_doc: Mapping[str, Any] | None) -> set[str]:
    """The implementations that passed a case's correctness gate."""
    return {r["implementation"] for r in (correctness_doc or {}).get("implementations", []) if r["status"] == "pass"}


def gate_record(correctness_doc: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """Why implementation ``name`` has no gate pass, as a code (``verdicts.Gate``) and its detail: it was not
    run for this case (declined by its own budget, e.g. a memory budget, or unsupported by design, with the
    implementation's reason), or it ran and failed (how), or it crashed, or the reference raised."""
    rec = next((r for r in (correctness_doc or {}).get("implementations", []) if r["implementation"] == name), None)
    out: dict[str, Any] = {"implementation": name}
    if rec is None:
        return {**out, "gate": Gate.NO_RECORD}
    if rec["status"] == "unsupported":
        return {**out, "gate": Gate.DECLINED if rec.get("declined") else Gate.UNSUPPORTED, "detail": rec.get("reason")}
    if rec["status"] == "reference_error":  # kernelscope.correctness: nothing was judged
        return {**out, "gate": Gate.REFERENCE_ERROR, "detail": rec.get("failure")}
    if rec["status"] in ("error", "timeout", "oom", "compile_error"):
        return {**out, "gate": Gate.CRASHED, "status": rec["status"], "detail": rec.get("failure")}
    return {**out, "gate": Gate.FAILED, "detail": rec.get("failure")}


def gate_status(correctness_doc: Mapping[str, Any] | None, name: str) -> str:
    """``gate_record`` in words."""
    return wording.gate_text(gate_record(correctness_doc, name))


def host_costs(timing_doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Host-side cost per call, its own finding and never a device-speed claim: for every timed record
    with host wall time, the wall time of back-to-back eager calls beside the device time per call (CUDA
    graph replay). Where the host time is the larger, a user calling it eagerly pays the host time."""
    rows = []
    for rec in timing_doc.get("implementations", []):
        if rec.get("status") != "ok" or rec.get("block") == "A2" or rec.get("host_wall_us") is None:
            continue
        graph = rec.get("graph") or {}
        device_us = graph.get("median_us") if graph.get("status") == "ok" else None
        rows.append(
            {
                "implementation": rec["implementation"],
                "kind": rec.get("kind"),
                "host_wall_us": rec["host_wall_us"],
                "device_us": device_us,
                "event_median_us": rec["median_us"],
                "launch_bound": launch_bound(rec),
                "host_bound": device_us is not None and rec["host_wall_us"] > device_us,
            }
        )
    return rows


def graph_aa_floor(timing_doc: Mapping[str, Any]) -> float | None:
    """The A/A floor of the CUDA-graph replay times (primary baseline's A1 vs A2), where both have one."""
    blocks = {r.get("block"): r for r in timing_doc["implementations"] if r.get("block") in ("A1", "A2")}
    graphs = [(blocks.get(k) or {}).get("graph") or {} for k in ("A1", "A2")]
    if not all(g.get("status") == "ok" for g in graphs):
        return None
    return abs(graphs[0]["median_us"] - graphs[1]["median_us"]) / graphs[1]["median_us"]


def device_aa_floors(timing_doc: Mapping[str, Any]) -> dict[str, float | None]:
    """The A/A floor per device basis (primary baseline's A1 vs A2 device medians), where both have one."""
    blocks = {r.get("block"): r for r in timing_doc["implementations"] if r.get("block") in ("A1", "A2")}
    out: dict[str, float | None] = {}
    for key in ("device", "sustained"):
        pair = [blocks.get(b) or {} for b in ("A1", "A2")]
        if all(has_device_time(r, key) for r in pair):
            m1, m2 = (r[key]["median_us"] for r in pair)
            out[key] = abs(m1 - m2) / m2
        else:
            out[key] = None
    return out


def case_claims(
    timing_doc: Mapping[str, Any],
    correctness_doc: Mapping[str, Any] | None,
    calibration: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each Triton variant against every baseline of the case (``calibration``: the rerun calibration)."""
    recs = {r["implementation"]: r for r in timing_doc["implementations"] if r.get("block") != "A2"}
    aa_graph = graph_aa_floor(timing_doc)
    aa_device = device_aa_floors(timing_doc)
    passed = passed_gate(correctness_doc)
    aa = (timing_doc.get("aa_floor") or {}).get("rel_diff")
    interpreter = bool(timing_doc.get("interpreter"))
    claims = []
    for a in recs.values():
        if a["kind"] != "triton":
            continue
        for b in recs.values():
            if b["kind"] == "triton":
                continue
            failed = [n for n in (a["implementation"], b["implementation"]) if n not in passed]
            if failed:
                claim = {
                    "a": a["implementation"],
                    "b": b["implementation"],
                    "verdict": NOT_COMPARABLE,
                    "reason": Reason.FAILED_GATE,
                    "gate": [gate_record(correctness_doc, n) for n in failed],
                }
                claims.append(_rendered(claim))
                continue
            claims.append(
                {**compare(a, b, aa, interpreter, aa_graph, calibration, aa_device), "a_config": a.get("config") or {}}
            )
    return claims


def reference_comparability(env_fp: Mapping[str, Any], ref: Mapping[str, Any]) -> list[str]:
    """Why an external reference row (another GPU, other versions) cannot be ranked against this run."""
    reasons = []
    if ref.get("gpu") != env_fp.get("gpu"):
        reasons.append(f"different GPU ({ref.get('gpu')} vs {env_fp.get('gpu') or 'none: interpreter'})")
    for key in ("torch", "triton"):
        if ref.get(key) and ref.get(key) != env_fp.get(key):
            reasons.append(f"different {key} ({ref[key]} vs {env_fp.get(key)})")
    if env_fp.get("backend") != "cuda":
        reasons.append("this run timed Triton's CPU interpreter, not a GPU")
    reasons.append("measured with another harness (seed script: 100 rounds, median only, no spread, no L2 flush)")
    return reasons


def disclosures(flag_counts: Sequence[tuple[int, int]]) -> str | None:
    flagged = sum(f for f, _ in flag_counts)
    total = sum(n for _, n in flag_counts)
    if not total:
        return None
    return (
        f"{flagged} of {total} timed samples ({flagged / total:.1%}) were taken while throttled or below the "
        "steady clock"
    )


def ncu_absent(specs: dict[str, Any]) -> str:
    """Why a case has no Nsight Compute result when the stage did not write one."""
    selected = specs.get("ncu")
    if isinstance(selected, list) and selected:
        return "not selected for the optional Nsight Compute stage; the config key ncu lists the cases it profiles"
    return "stage not enabled (config ncu: true)"


def two_mode_records(data: dict[str, Any]) -> list[str]:
    """Each timed implementation's device-time and sustained-load sample sets that fall in two modes
    (``stats.two_modes``), named with both modes' medians; the A/A repeat block is left out."""
    out = []
    for case in data["cases"]:
        for rec in (case.get("timing") or {}).get("implementations", []):
            if rec.get("status") != "ok" or rec.get("block") == "A2":
                continue
            for basis in ("device", "sustained"):
                samples = (rec.get(basis) or {}).get("samples_us") or []
                if modes := stats.two_modes(samples):
                    out.append(
                        f"{case['kernel']} {case['shape']} {case['dtype']} {rec['implementation']} "
                        f"({'device time' if basis == 'device' else 'sustained load'}: {modes['low_us']:.1f} and "
                        f"{modes['high_us']:.1f} µs, {modes['upper']} of {modes['n']} samples in the slower mode)"
                    )
    return out


#: how far a Triton variant's timing-stage device time may lie from the sweep's device time of the same config
#: before the sweep's choice of that config is refused: about the 97th percentile of the two stages' disagreement
#: over the published default runs' timed configs (docs/timing-basis.md, "The sweep and the timing stage on one
#: wide-row config").
STAGE_AGREEMENT = 0.05


def stage_disagreements(data: dict[str, Any], limit: float = STAGE_AGREEMENT) -> list[str]:
    """Each timed Triton variant whose timing-stage device time differs from its sweep's device time of the same
    config by more than ``limit`` (a fraction), or by more than the run's rerun calibration puts between two runs
    of one Triton kernel of that size where that is wider, named with both times: the sweep ranked the configs in
    a state the timing stage did not reproduce, so the config it chose need not be the fastest where the variant
    is timed."""
    calibration = data.get("reruns") if (data.get("reruns") or {}).get("status") == "ok" else None
    out = []
    for case in data["cases"]:
        timed = {
            r["implementation"]: r["device"]["median_us"]
            for r in (case.get("timing") or {}).get("implementations", [])
            if r.get("status") == "ok" and r.get("block") != "A2" and (r.get("device") or {}).get("status") == "ok"
        }
        for variant in case.get("sweeps") or []:
            best = variant.get("best") or {}
            chosen = next((c for c in variant.get("configs", []) if c.get("key") == best.get("key")), {})
            timing_us, sweep_us = timed.get(variant["implementation"]), chosen.get("median_us")
            if timing_us is None or not sweep_us or chosen.get("basis") != "device":
                continue
            floor = reruns.floor(calibration, "device", min(timing_us, sweep_us), ["triton"]) or {}
            if abs(timing_us / sweep_us - 1.0) > max(limit, floor.get("rel", 0.0)):
                local = max((k.get("local_bytes") or 0 for k in chosen.get("kernels", [])), default=0)
                out.append(
                    f"{case['kernel']} {case['shape']} {case['dtype']} {variant['implementation']} "
                    f"[{best['key']}]: {sweep_us:.1f} µs in the sweep, {timing_us:.1f} µs in the timing stage "
                    f"({timing_us / sweep_us - 1.0:+.1%})"
                    + (f", its kernel using {local} bytes of local memory a thread" if local else "")
                )
    return out


def sweeps_lost_to_memory(data: dict[str, Any]) -> list[str]:
    """Each variant whose sweep found no valid config with at least one of its configs out of GPU memory: on a card
    whose jobs run side by side that may be other jobs' memory, not the kernel's need, so its absence from the
    timings says nothing of the kernel."""
    out = []
    for case in data["cases"]:
        for variant in case.get("sweeps") or []:
            configs = variant.get("configs", [])
            if variant.get("best") or not any(c.get("fault") == "oom" for c in configs):
                continue
            out.append(
                f"{case['kernel']} {case['shape']} {case['dtype']} {variant['implementation']} "
                f"({len(configs)} configs: {wording.fault_counts(configs)})"
            )
    return out


def statements(data: dict[str, Any], tbl: dict[str, Any]) -> dict[str, list[str]]:
    """What a run's data supports and what it refuses, from its records (``rundata.collect``) and tables
    (``rundata.tables``): the claim list, and every refusal with its reason and topic (``verdicts.Topic``).
    The lists are decided from the tables' codes (verdicts, gate statuses, flags), never from their sentences."""
    env = data["environment"]
    fp = fingerprint(env)
    interpreter = data["specs"]["interpreter"]
    yes: list[str] = []  # per-ordering entries are Statements of Topic.ORDERING
    no: list[Statement] = []

    def refuse(text: str, topic: Topic = Topic.OTHER) -> None:
        no.append(Statement(text, topic))

    where = (
        f"on {fp['gpu']} with torch {fp['torch']}, triton {fp['triton']}, CUDA {fp['cuda_runtime']}, "
        f"driver {fp['driver']}"
    )
    claim_df = tbl["claims"]
    if interpreter:
        refuse(
            "Any performance comparison: this run used Triton's interpreter on the CPU; its timings measure "
            "the interpreter and support no statement about GPU speed.",
            Topic.INTERPRETER,
        )
    elif not claim_df.empty:
        resolved = claim_df[claim_df["verdict"].isin([FASTER, SLOWER])]
        if len(resolved):
            yes.append(
                f"The orderings below, {where}, config hash {data['specs']['config_hash']} (settings in "
                "the Method section), each for exactly the shape, dtype and layout named and each Triton "
                "variant at the launch config in brackets (the sweep's choice):"
            )
        for _, c in resolved.iterrows():
            text = f"{c['kernel']} {c['shape']} {c['dtype']}: {c.get('sentence_noted', c['sentence'])}."
            yes.append(Statement(text, Topic.ORDERING))
        for _, c in claim_df[claim_df["verdict"] == REGIME_DEPENDENT].iterrows():
            refuse(
                f"A plain ordering of {c['a']} and {c['b']} for {c['kernel']} {c['shape']} {c['dtype']}: {c['why']}."
            )
        unresolved = claim_df[claim_df["verdict"] == UNRESOLVED]
        for _, c in unresolved.iterrows():
            refuse(
                f"An ordering of {c['a']} and {c['b']} for {c['kernel']} {c['shape']} {c['dtype']}: {c['why_noted']}.",
                Topic.UNRESOLVED_ORDERING,
            )
    corr = tbl["correctness"]
    if not corr.empty:
        failed = ["fail", "error", "timeout", "oom", "compile_error"]  # the last three: kernelscope.faults
        bad = corr[(corr["role"] != "negative control") & corr["status"].isin(failed)]
        for _, r in bad.iterrows():
            refuse(
                f"Any timing of {r['implementation']} on {r['kernel']} {r['shape']} {r['dtype']}: it {r['outcome']}.",
                Topic.UNTIMED_IMPLEMENTATION,
            )
        skipped = corr[(corr["role"] != "negative control") & (corr["status"] == "unsupported")]
        for (kernel, name, declined), grp in skipped.groupby(["kernel", "implementation", "declined"], dropna=False):
            why = "declined by its own budget" if declined is True else "unsupported by design"
            refuse(
                f"Any timing of {name} on {len(grp)} {kernel} case(s) ({', '.join(grp['shape'] + ' ' + grp['dtype'])}):"
                f" {why} — {grp['failure'].iloc[0]}" + (" (first case's reason)." if len(grp) > 1 else "."),
                Topic.UNTIMED_IMPLEMENTATION,
            )
        # a control that sat out beside the implementation it guards (rejected None) tested nothing and guarded
        # nothing here: neither live nor accepted
        live = corr[(corr["role"] == "negative control") & corr["rejected"].notna()]
        accepted = live[live["rejected"] == False]  # noqa: E712 - pandas element-wise comparison
        for _, r in accepted.iterrows():
            crashed = r.get("control_error")
            why = (
                f"crashed ({crashed}), so it did not test the tolerance there"
                if isinstance(crashed, str) and crashed
                else "was accepted, so the gate is too loose there"
            )
            refuse(
                f"The correctness verdicts for {r['kernel']} {r['shape']} {r['dtype']}: the negative control "
                f"{r['implementation']} {why}.",
                Topic.DEAD_CONTROL,
            )
        if not live.empty and accepted.empty:
            yes.append(
                f"Correctness of every passing implementation against an fp64 reference at the declared "
                f"tolerances, for the listed shapes and dtypes and {len(data['specs']['seeds'])} seeds; every "
                f"negative control ({live['implementation'].nunique()} kinds, {len(live)} runs) was rejected."
            )
    timing = tbl["timing"]
    if not timing.empty and "target_reached" in timing:
        missed = records.capped_measurements(data)
        if missed:
            refuse(
                f"Precision beyond the measured spread for {missed} measurements that stopped at the time "
                f"cap before the median's CI reached ±{records.timing_settings(data)['target_rel_ci']:.1%} "
                f"with at least min_samples samples; their CIs are in the tables."
            )
    flagged = timing.get("flagged") if not timing.empty else None
    if flagged is not None and flagged.notna().any():
        disclosure = disclosures(list(zip(timing["flagged"].fillna(0).astype(int), timing["n"].fillna(0).astype(int))))
        if disclosure:
            refuse(
                f"Clock-clean timings: {disclosure}; they are included in the medians and listed per sample in "
                f"tables/samples.csv.gz.",
                Topic.CLOCKS,
            )
    split = [] if interpreter else two_mode_records(data)
    if split:
        refuse(
            f"A single time for {len(split)} sample set{'s' if len(split) > 1 else ''} whose samples fall in two "
            f"modes; the median describes the mode that held more samples, and a rerun can land in the other: "
            f"{'; '.join(split)}.",
            Topic.CLOCKS,
        )
    apart = [] if interpreter else stage_disagreements(data)
    if apart:
        refuse(
            f"The sweep's choice of launch config for {len(apart)} timed Triton variant"
            f"{'s' if len(apart) > 1 else ''} whose timing-stage device time lies more than {STAGE_AGREEMENT:.0%} "
            "from the sweep's device time of the same config: the sweep ranked the configs in a state the timing "
            f"stage did not reproduce, so another config may be the faster one where the variant was timed: "
            f"{'; '.join(apart)}."
        )
    short = [] if interpreter else sweeps_lost_to_memory(data)
    if short:
        refuse(
            f"Any time of {len(short)} variant{'s' if len(short) > 1 else ''} whose sweep found no valid config, "
            "some or all of them out of GPU memory. The jobs of a card run side by side, so the memory may have "
            "been other jobs': rerun the case with fewer jobs at once (--cores) before reading the absence as the "
            f"kernel's: {'; '.join(short)}.",
            Topic.UNTIMED_IMPLEMENTATION,
        )
    counters = [c for c in data["cases"] if (c.get("ncu") or {}).get("ran")]
    if len(counters) < len(data["cases"]):
        reasons = sorted(
            {
                (c.get("ncu") or {}).get("reason", ncu_absent(data["specs"]))
                for c in data["cases"]
                if not (c.get("ncu") or {}).get("ran")
            }
        )
        refuse(
            f"Hardware-counter explanations (DRAM throughput, occupancy, registers, spills) for "
            f"{len(data['cases']) - len(counters)} of {len(data['cases'])} cases: Nsight Compute did not run "
            f"there ({'; '.join(reasons)})."
        )
    warm = [
        c
        for c in data["cases"]
        if c["timing"]
        and not data["specs"]["interpreter"]
        and any(r.get("l2_flushed") is False for r in c["timing"]["implementations"] if r.get("status") == "ok")
    ]
    if warm:
        refuse(
            f"Cold-cache times for {len(warm)} cases timed with a warm L2 (flush_l2: false): their inputs "
            "may be read from L2, as in a loop over the same tensors, not as in a model's step."
        )
    commits = records.case_commits(data)
    if len(commits) > 1:
        refuse(
            "Reading every case as one commit's code: the timings come from "
            + ", ".join(f"{n} cases at {commit}" for commit, n in commits.items())
            + " (a run resumed across commits; each "
            "case's kernel-module hash is in its record), so cases of different commits may differ in their kernel "
            "or in the measuring code.",
            Topic.MIXED_RUN,
        )
    cards = records.case_cards(data)
    if len(cards) > 1:
        run_card = (data["environment"].get("gpu") or {}).get("uuid")
        refuse(
            "Reading every case as measured on one card: the timings come from "
            + ", ".join(f"{n} cases on {card}" for card, n in cards.items())
            + f" (one GPU model; a run resumed on another "
            f"machine). The environment section and the measured ceilings were measured on {run_card} only: a case "
            f"timed on another card is put against {run_card}'s ceilings, not its own card's, and a difference "
            "between cases of different cards can be the cards'.",
            Topic.MIXED_RUN,
        )
    missing = [f"{c['kernel']} {c['shape']} {c['dtype']}" for c in data["cases"] if c["timing"] is None]
    if missing:
        refuse(
            f"Anything about {len(missing)} of {len(data['cases'])} planned cases that have no timing result "
            f"in this run (not run, or their job failed): {', '.join(missing)}.",
            Topic.MISSING,
        )
    for ref in data["specs"].get("external_references", []):
        reasons = reference_comparability(fp, ref)
        refuse(f"Ranking this run against the reference row '{ref['label']}': {'; '.join(reasons)}.")
    no += [
        Statement(text)
        for text in (
            "Other shapes, dtypes, strides or memory layouts than those listed: rankings between kernels change with "
            "shape (seed 000 shows one where the teaching kernel is slower than torch).",
            "Other GPUs, drivers, or torch/triton/CUDA versions than those recorded in the environment section.",
            "Cold-start cost beyond the single first-call measurement per job (compile times are one sample each, "
            "from an empty cache directory, and depend on the host CPU).",
            "End-to-end model speed: these are isolated kernels with cold L2 (unless stated), not a model's step.",
        )
    ]
    return {"supports": yes, "does_not_support": no}
