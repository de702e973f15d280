"""Every sentence a verdict is read in, rendered from its codes and fields (:mod:`kernelscope.verdicts`): a
claim's reason and sentence (``claims.csv``), a comparison row's reason (``comparison.csv``), a gate outcome.
The sentences are views: nothing sorts, filters or decides by them, so rewording one here changes what the
report says and nothing it does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kernelscope.reruns import MIN_OBSERVATIONS
from kernelscope.verdicts import RESOLVED, Basis, Gate, Reason, Verdict

#: each basis by what it measures (docs/timing-basis.md says why)
BASIS_NAMES = {
    Basis.DEVICE: "device time (CUPTI kernel timestamps, cold L2)",
    Basis.SUSTAINED: "device time under sustained load (CUPTI kernel timestamps, cold L2)",
    Basis.GRAPH: "CUDA-graph replay (device time per call)",
    Basis.EVENT: "event median",
}


def graph_basis_reason(starved_limit: float) -> str:
    """Why a launch-bound pair is compared by graph replay; said once per document (a footnote), not per claim."""
    return (
        f"compared by CUDA-graph replay because an event median may hold launch gaps (per-sample "
        f"synchronisation, or over {starved_limit:.0%} of its samples launched late)"
    )


def config_text(config: Mapping[str, Any] | None) -> str:
    """A launch config as ``BLOCK_M=128, num_warps=4`` (sorted), or "default" when empty."""
    return ", ".join(f"{k}={v}" for k, v in sorted((config or {}).items())) or "default"


def gate_text(gate: Mapping[str, Any]) -> str:
    """Why an implementation has no gate pass (``claims.gate_record``)."""
    name, outcome, detail = gate["implementation"], gate["gate"], gate.get("detail")
    return {
        Gate.NO_RECORD: f"{name} has no correctness record",
        Gate.DECLINED: f"{name} declined this case by its own budget ({detail})",
        Gate.UNSUPPORTED: f"{name} does not support this case by design ({detail})",
        Gate.REFERENCE_ERROR: f"{name} was not checked: the case's fp64 reference raised ({detail})",
        Gate.CRASHED: f"{name} crashed in the correctness gate ({gate.get('status')}: {detail})",
        Gate.FAILED: f"{name} failed the correctness gate ({detail})",
    }[outcome]


def _reason(c: Mapping[str, Any]) -> str:
    """The sentence of a claim's own reason code."""
    reason = c["reason"]
    if reason == Reason.INTERPRETER:
        return "interpreter timings: Triton ran on the CPU, these numbers say nothing about GPU speed"
    if reason == Reason.UNTIMED:
        u = c["untimed"]
        return f"{u['implementation']} has no valid timing ({u['status']}: {u['reason']})"
    if reason == Reason.FAILED_GATE:
        return "; ".join(gate_text(g) for g in c["gate"])
    if reason == Reason.LAUNCH_BOUND_NO_GRAPH:
        return (
            f"not comparable by device time: the event samples of {' and '.join(c['launch_bound'])} may hold host "
            f"launch latency, and {'neither side has' if not c['graph_sides'] else 'one side has no'} CUDA-graph "
            "replay timing"
        )
    if reason == Reason.TOO_FEW_SAMPLES:
        return f"too few samples for the test ({c['n_a']} and {c['n_b']}; need {c['min_samples']})"
    if reason == Reason.NOT_SIGNIFICANT:
        return f"Mann-Whitney p = {c['mannwhitney_p']:.2g} >= {c['alpha']}"
    if reason == Reason.BELOW_FLOOR:
        return (
            f"difference {c['effect_rel']:.1%} is within the A/A noise floor / minimum effect {c['threshold_rel']:.1%}"
        )
    if reason == Reason.ABOVE_FLOOR:
        return (
            f"median {c['effect_rel']:.1%} {'lower' if c['verdict'] == Verdict.FASTER else 'higher'}, "
            f"p = {c['mannwhitney_p']:.2g}, above the {c['threshold_rel']:.1%} threshold"
        )
    if reason == Reason.NO_RERUN_CALIBRATION:
        cases = f", from {c['min_cases']} or more implementation-cases," if c.get("min_cases") else ""
        return (
            f"no rerun calibration for this basis at {c['size_class']} with {MIN_OBSERVATIONS} or more rerun "
            f"differences{cases} of each side's kind (run the configuration in separate processes or on separate "
            "machines and record python -m kernelscope.reruns; the in-job A/A floor alone sees one process)"
        )
    if reason == Reason.REGIME_OPPOSITE:
        burst = c["burst"]
        return (
            f"{c['sustained_verdict']} under sustained load ({c['median_a_us']:.1f} vs {c['median_b_us']:.1f} µs) "
            f"but {burst['verdict']} under burst load ({burst['median_a_us']:.1f} vs {burst['median_b_us']:.1f} µs): "
            "the ordering depends on the power regime"
        )
    raise ValueError(f"no wording for claim reason {reason!r}")


def _why(c: Mapping[str, Any], graph: str) -> str:
    text = _reason(c)
    if c["reason"] == Reason.REGIME_OPPOSITE:
        return text
    floor = c.get("rerun_floor")
    if floor:
        text += (
            f"; rerun floor {floor['rel']:.1%} ({floor['size_class']}, p95 of at least {floor['n']} rerun "
            f"differences per kind over {floor['trials']} runs)"
        )
    if c.get("basis_key") == Basis.GRAPH:
        text += graph
    burst = c.get("burst")
    if burst and burst["verdict"] != c["verdict"]:
        text += f"; under burst load: {burst['verdict']}"
    return text


def why(c: Mapping[str, Any], graph_footnote: str = "") -> str:
    """A claim's reason in words, its calibrated floor and the regimes included. ``graph_footnote``: a marker
    that stands for the graph-replay reason (given once in a footnote) on that basis; empty keeps the reason."""
    if c.get("basis_key") != Basis.GRAPH:
        return _why(c, "")
    return _why(
        c, f"; by graph replay{graph_footnote}" if graph_footnote else f"; {graph_basis_reason(c['starved_limit'])}"
    )


def note(c: Mapping[str, Any]) -> str:
    """A claim's reason without the graph-replay reason (a table's basis column marks that basis)."""
    return _why(c, "")


def sentence(claim: Mapping[str, Any], graph_footnote: str = "") -> str:
    """A claim in words (``graph_footnote`` as for ``why``)."""
    a, b, verdict = claim["a"], claim["b"], claim["verdict"]
    reason = why(claim, graph_footnote)
    if claim.get("a_config"):  # the launch config the sweep tuned the Triton variant to
        a = f"{a} [{config_text(claim['a_config'])}]"
    if verdict in RESOLVED:
        ratio = claim["median_b_us"] / claim["median_a_us"]
        return (
            f"{a} is {verdict} than {b}: {claim['median_a_us']:.3f} µs vs {claim['median_b_us']:.3f} µs "
            f"({ratio:.2f}× {b}'s speed; {reason})"
        )
    return f"{a} vs {b}: {verdict} ({reason})"


def comparison_why(row: Mapping[str, Any], claim: Mapping[str, Any] | None) -> str:
    """A comparison row's reason (``compare.compare_cases``): its own reason code, or the claim rules' reason
    (``claim``) for a pair compared; then the kernel-code change and the tuned configs where they differ."""
    reason = row["reason"]
    if reason == Reason.NO_TIMING_IN_RUN:
        text = "no timing in " + "; ".join(
            f"{run}: {status} ({detail})".replace(" ()", "") for run, status, detail in row["untimed"]
        )
    elif reason == Reason.SAME_MEASUREMENT:
        text = (
            f"the same measurement in both runs (timed {row['created']}; a resumed run carried it over), not a "
            "second one"
        )
    elif reason == Reason.GATE_NOT_BOTH:
        text = "did not pass the correctness gate in both runs"
    elif reason == Reason.CODE_CONFOUNDED:
        text = (
            f"the kernel module differs between the runs ({row['sha_a'][:12]} vs {row['sha_b'][:12]}): GPU and "
            "code would be confounded"
        )
    else:
        text = why(claim or {})
    if row.get("code_change"):
        old, sha_old, new, sha_new = row["code_change"]
        text = f"kernel module changed between the runs ({old} {sha_old[:12]} → {new} {sha_new[:12]}); {text}"
    if row["config_a"] != row["config_b"]:
        la, lb = row["labels"]
        text = f"{text}; tuned configs differ: {la} {config_text(row['config_a'])}, {lb} {config_text(row['config_b'])}"
    return text


#: how a config's fault reads (kernelscope.faults' statuses)
FAULT_WORDS = {
    "oom": "out of GPU memory",
    "timeout": "past the time limit",
    "compile_error": "did not compile",
    "error": "raised",
}


def fault_counts(configs: list[Mapping[str, Any]]) -> str:
    """The faults of a sweep's failed configs in words, most frequent first: ``3 out of GPU memory, 1 raised``."""
    words = Counter(
        FAULT_WORDS.get(c.get("fault"), c.get("fault") or "raised") for c in configs if c.get("status") == "failed"
    )
    return ", ".join(f"{n} {word}" for word, n in words.most_common())
