"""Statistics over timing samples: summaries, median confidence intervals, significance tests.

Timing samples are skewed and occasionally bimodal (clock changes, interference), so everything here is
rank- or resampling-based: medians with order-statistic and bootstrap confidence intervals, and the
Mann-Whitney U test for "is A's distribution shifted from B's".
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

#: below this many samples per side, a Mann-Whitney p-value is not used to claim a difference
MIN_SAMPLES_FOR_TEST = 20


def median_ci_order(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial ranks): the interval
    ``scipy.stats.quantile_test(x, p=0.5).confidence_interval(confidence)`` returns (a test checks they agree
    at n = 10, 100, 1000). Kept because the timing loop calls it after every batch of samples, inside the
    GPU lock, and quantile_test (which also computes a p-value) takes about ten times as long."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n < 6:
        return float(x[0]), float(x[-1])
    lo_rank, hi_rank = sps.binom.interval(confidence, n, 0.5)
    lo = max(int(lo_rank) - 1, 0)
    hi = min(int(hi_rank), n - 1)
    return float(x[lo]), float(x[hi])


_BOOTSTRAP_RNG = "rng" if "rng" in inspect.signature(sps.bootstrap).parameters else "random_state"


def bootstrap_median_ci(
    samples: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    x = np.asarray(samples, dtype=float)
    if len(x) < 3 or np.all(x == x[0]):
        return float(np.min(x)), float(np.max(x))
    kwargs = {"confidence_level": confidence, "n_resamples": resamples, "method": "percentile"}
    # seeded, so that a re-render gives the same interval; scipy >= 1.15 names the generator ``rng``, older
    # releases ``random_state`` (detected by the signature: a TypeError from the call itself must surface)
    kwargs[_BOOTSTRAP_RNG] = np.random.default_rng(seed)
    res = sps.bootstrap((x,), np.median, **kwargs)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    x = np.asarray(samples, dtype=float)
    lo, hi = bootstrap_median_ci(x)
    med = float(np.median(x))
    return {
        "n": int(len(x)),
        "median_us": med,
        "p20_us": float(np.percentile(x, 20)),
        "p80_us": float(np.percentile(x, 80)),
        "min_us": float(np.min(x)),
        "max_us": float(np.max(x)),
        "mean_us": float(np.mean(x)),
        "std_us": float(np.std(x, ddof=1)) if len(x) > 1 else 0.0,
        "ci95_low_us": lo,
        "ci95_high_us": hi,
        "rel_ci95_halfwidth": (hi - lo) / 2 / med if med > 0 else math.inf,
    }


#: two_modes: the least share of the samples on each side of the split
TWO_MODES_MIN_SHARE = 0.1
#: two_modes: the least gap between the modes, as a fraction of the median
TWO_MODES_MIN_GAP = 0.05
#: two_modes: the least gap between the modes, in interquartile ranges of the wider mode
TWO_MODES_SEPARATION = 3.0


def two_modes(
    samples: Sequence[float],
    min_share: float = TWO_MODES_MIN_SHARE,
    min_gap: float = TWO_MODES_MIN_GAP,
    separation: float = TWO_MODES_SEPARATION,
) -> dict[str, Any] | None:
    """Whether the samples fall in two separate modes, so that their median describes whichever mode held
    more of them (a card whose power-capped clock moved during the samples, for one). The sorted samples are
    split at their largest gap that leaves at least ``min_share`` of them on each side; that is two modes where
    the gap is at least ``min_gap`` of the median and ``separation`` times the larger interquartile range of
    the two sides. Returns the two modes' medians and the upper mode's size, or
    None (fewer than 10 samples, one mode, or a tail). The thresholds and what they find in the published H200
    runs: docs/timing-basis.md, "Samples in two modes"."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    lo = max(1, math.ceil(min_share * n))
    if n < 10 or n - lo < lo:
        return None
    i = int(np.argmax(np.diff(x)[lo - 1 : n - lo])) + lo
    gap = float(x[i] - x[i - 1])
    iqr = max(float(np.subtract(*np.percentile(part, [75, 25]))) for part in (x[:i], x[i:]))
    if gap < min_gap * float(np.median(x)) or gap < separation * iqr:
        return None
    return {"low_us": float(np.median(x[:i])), "high_us": float(np.median(x[i:])), "upper": n - i, "n": n}


def compare_samples(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Is ``a`` faster or slower than ``b``? Relative median difference (a - b) / b and a two-sided
    Mann-Whitney U test. ``testable`` is False when either side has too few samples for the p-value
    to mean anything."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    med_a, med_b = float(np.median(a)), float(np.median(b))
    testable = min(len(a), len(b)) >= MIN_SAMPLES_FOR_TEST
    p = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue) if min(len(a), len(b)) >= 2 else 1.0
    return {
        "median_a_us": med_a,
        "median_b_us": med_b,
        "rel_diff": (med_a - med_b) / med_b if med_b > 0 else math.nan,
        "mannwhitney_p": p,
        "n_a": int(len(a)),
        "n_b": int(len(b)),
        "testable": testable,
    }


def aa_floor(first: Sequence[float], second: Sequence[float]) -> dict[str, Any]:
    """The A/A noise floor: the same implementation measured twice in separate blocks. Any A-vs-B
    difference smaller than this is indistinguishable from re-measuring A."""
    cmp = compare_samples(first, second)
    return {
        "rel_diff": abs(cmp["rel_diff"]),
        "mannwhitney_p": cmp["mannwhitney_p"],
        "median_first_us": cmp["median_a_us"],
        "median_second_us": cmp["median_b_us"],
    }
