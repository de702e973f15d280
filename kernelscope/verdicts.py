"""The claim rules' results as values: verdicts, the basis a pair was judged on, the reason a verdict was
reached, a correctness gate's outcome for one implementation, and the topic of a supports / does-not-support
statement. ``claims.csv`` and ``comparison.csv`` carry these codes as columns; sorting, filtering and compare
read them, and :mod:`kernelscope.wording` renders every sentence from them (nothing reads a sentence back).
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """A claim's verdict for "A against B" (the values are what the tables show)."""

    FASTER = "faster"
    SLOWER = "slower"
    UNRESOLVED = "no difference resolved"
    NOT_COMPARABLE = "not comparable"
    #: opposite orderings under burst and sustained load: a property of the power regime, not a plain claim
    REGIME_DEPENDENT = "regime-dependent"


RESOLVED = (Verdict.FASTER, Verdict.SLOWER)


class Basis(StrEnum):
    """What a verdict compared: device time (burst or sustained load), CUDA-graph replay, event medians."""

    DEVICE = "device"
    SUSTAINED = "sustained"
    GRAPH = "graph"
    EVENT = "event"


class Reason(StrEnum):
    """Why a verdict is what it is. The fields each reason is rendered from are named beside it."""

    INTERPRETER = "interpreter"  # the run timed Triton's CPU interpreter
    UNTIMED = "untimed"  # untimed: {implementation, status, reason} of the side without a valid timing
    FAILED_GATE = "failed_gate"  # gate: the gate records (``claims.gate_record``) of the sides without a pass
    LAUNCH_BOUND_NO_GRAPH = "launch_bound_no_graph"  # launch_bound: names; graph_sides: sides with graph replay
    TOO_FEW_SAMPLES = "too_few_samples"  # n_a, n_b
    NOT_SIGNIFICANT = "not_significant"  # mannwhitney_p
    BELOW_FLOOR = "below_floor"  # effect_rel at or below floor_rel (``threshold_rel``)
    ABOVE_FLOOR = "above_floor"  # effect_rel above floor_rel, mannwhitney_p below claims.ALPHA
    NO_RERUN_CALIBRATION = "no_rerun_calibration"  # size_class: no calibrated floor there, so no device ordering
    REGIME_OPPOSITE = "regime_opposite"  # sustained_verdict against burst: {verdict, median_a_us, median_b_us}
    # the comparison of two runs (kernelscope.compare) adds these; otherwise its rows carry the claim's reason
    NO_TIMING_IN_RUN = "no_timing_in_run"  # untimed: [(run, status, reason)]
    SAME_MEASUREMENT = "same_measurement"  # created: both runs hold this one record (a resumed run)
    GATE_NOT_BOTH = "gate_not_both"  # did not pass the correctness gate in both runs
    CODE_CONFOUNDED = "code_confounded"  # sha_a, sha_b: cross-GPU and the kernel code changed


#: the reasons of an unresolved comparison that are evidence of a reproduction: the difference was tested and fell
#: inside the floor or was not significant. Any other unresolved reason (no calibrated floor for a difference that
#: passed both tests, too few samples, ...) means the pair could not be judged, which is not a reproduction.
REPRODUCED_REASONS = frozenset({"below_floor", "not_significant"})


def reproduced(verdict: str, reason: str) -> bool:
    """Whether a comparison row (verdict, reason) says the two runs agreed, by the test rather than by default."""
    return verdict == Verdict.UNRESOLVED and reason in REPRODUCED_REASONS


class Gate(StrEnum):
    """Why an implementation has no gate pass for a case."""

    NO_RECORD = "no_record"
    DECLINED = "declined"  # by its own budget (reason)
    UNSUPPORTED = "unsupported"  # by design (reason)
    REFERENCE_ERROR = "reference_error"  # the fp64 reference raised; nothing was judged
    CRASHED = "crashed"  # status: error, timeout, oom, compile_error
    FAILED = "failed"


class Topic(StrEnum):
    """What a refusal is about, in the order the report lists refusals: those that change how the whole
    report is read first (interpreter, several commits or cards, missing cases, gate failures), then the rest."""

    INTERPRETER = "interpreter"
    MIXED_RUN = "mixed_run"  # several commits or cards
    MISSING = "missing"  # cases without a result (not run, failed jobs, a faulty reference)
    UNTIMED_IMPLEMENTATION = "untimed_implementation"  # failed, crashed, declined or unsupported
    DEAD_CONTROL = "dead_control"  # a negative control accepted or crashed
    CLOCKS = "clocks"
    OTHER = "other"
    UNRESOLVED_ORDERING = "unresolved_ordering"  # one pair the claim rules did not order (listed last)
    ORDERING = "ordering"  # a supports entry: one resolved ordering


class Statement(str):
    """One sentence of a supports / does-not-support list, and its ``topic`` (what the report sorts by)."""

    topic: Topic

    def __new__(cls, text: str, topic: Topic = Topic.OTHER) -> Statement:
        self = super().__new__(cls, text)
        self.topic = Topic(topic)
        return self


def topic_order(statements: list[str]) -> list[str]:
    """``statements`` by topic (``Topic``'s order; a plain string is ``Topic.OTHER``), keeping the order within
    a topic."""
    order = list(Topic)
    return sorted(statements, key=lambda s: order.index(getattr(s, "topic", Topic.OTHER)))
