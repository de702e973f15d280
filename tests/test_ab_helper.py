"""The A/B helper of ``docs/experiments`` (``rows_ab.per_launch_us`` and ``interleaved``), with CUDA events replaced by
a recorder: what session 31 found its samples must not count (docs/timing-basis.md, "What the bias was")."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "experiments"))

import rows_ab  # noqa: E402


class RecordingEvent:
    """A stand-in for ``torch.cuda.Event`` that writes what happens to a shared log."""

    log: list[str] = []
    made = 0

    def __init__(self, enable_timing: bool = False):
        RecordingEvent.made += 1
        self.name = "start" if RecordingEvent.made % 2 else "end"

    def record(self):
        self.log.append(f"{self.name}.record")

    def synchronize(self):
        self.log.append(f"{self.name}.synchronize")

    def elapsed_time(self, other) -> float:
        return 1.0


@pytest.fixture
def events(monkeypatch):
    RecordingEvent.log, RecordingEvent.made = [], 0
    monkeypatch.setattr(rows_ab.torch.cuda, "Event", RecordingEvent)
    return RecordingEvent.log


def test_a_sample_starts_its_clock_behind_an_untimed_launch(events):
    """The start event is recorded only after one launch is queued, so the first timed launch waits behind a running
    kernel instead of counting the host's launch latency; then ``REPS`` timed launches, the end event, one wait."""
    rows_ab.per_launch_us(lambda: events.append("launch"))
    assert events == ["launch", "start.record"] + ["launch"] * rows_ab.REPS + ["end.record", "end.synchronize"]


def test_arms_follow_different_arms_across_rounds(monkeypatch):
    """Every arm is timed once a round, and no arm always follows the same arm (a rotated order does that: the bias
    session 31 measured came with the predecessor)."""
    timed: list[str] = []
    monkeypatch.setattr(rows_ab, "per_launch_us", lambda fn: timed.append(fn()) or 1.0)
    names = ["torch", "a", "b", "c"]
    times = rows_ab.interleaved({name: (lambda n=name: n) for name in names})
    assert {name: len(samples) for name, samples in times.items()} == {name: rows_ab.ROUNDS for name in names}
    rounds = [timed[i : i + len(names)] for i in range(0, len(timed), len(names))]
    assert all(sorted(r) == sorted(names) for r in rounds)
    for name in names:
        before = {r[i - 1] for r in rounds for i in range(1, len(r)) if r[i] == name}
        assert len(before) > 1, f"inside a round, {name} always follows {before}"
    first = list(timed)
    timed.clear()
    rows_ab.interleaved({name: (lambda n=name: n) for name in names})
    assert timed == first, "the order is seeded: a rerun of the script times the arms in the same order"
