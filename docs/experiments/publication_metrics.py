"""Issue 21's target figures for one published comparison, read from its comparison.csv alone.

Pairs reproduced (verdict "no difference resolved") among the pairs timed in both runs, overall, at 20 µs or
less and per size class (by the larger of the two medians), the median B/A ratio per class, and the seed
case (softmax 4096 x 1000) per implementation and dtype. Used in docs/timing-basis.md, sections "The
publication" and "The publication at f2fb297".

    python docs/experiments/publication_metrics.py reports/nvidia-h200/compare/nvidia-h200-machine2/comparison.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

EDGES_US = [0, 5, 20, 100, 1000, float("inf")]
LABELS = ["0-5", "5-20", "20-100", "100-1000", ">=1000"]
SEED = ("softmax", "M4096_N1000")


def metrics(df: pd.DataFrame) -> dict[str, object]:
    timed = df[df["a_us"].notna() & df["b_us"].notna()].copy()
    timed["larger_us"] = timed[["a_us", "b_us"]].max(axis=1)
    timed["reproduced"] = timed["verdict"] == "no difference resolved"
    timed["size_class"] = pd.cut(timed["larger_us"], EDGES_US, labels=LABELS, right=True)
    small = timed[timed["larger_us"] <= 20]
    by_class = timed.groupby("size_class", observed=True).agg(
        reproduced=("reproduced", "sum"), pairs=("reproduced", "size"), median_b_over_a=("b_time_over_a", "median")
    )
    seed = timed[(timed["kernel"] == SEED[0]) & (timed["shape"] == SEED[1])]
    return {
        "reproduced": (int(timed["reproduced"].sum()), len(timed)),
        "reproduced_20us_or_less": (int(small["reproduced"].sum()), len(small)),
        "by_class": by_class,
        "median_b_over_a": float(timed["b_time_over_a"].median()),
        "seed": seed[["dtype", "implementation", "a_us", "b_us", "b_time_over_a", "config_a", "config_b"]],
        "not_reproduced": timed[~timed["reproduced"]][["kernel", "shape", "dtype", "implementation", "a_us", "b_us"]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("comparison", type=Path, help="a comparison's comparison.csv (python -m kernelscope compare)")
    m = metrics(pd.read_csv(ap.parse_args().comparison))
    pd.set_option("display.width", 200)
    (ok, n), (ok20, n20) = m["reproduced"], m["reproduced_20us_or_less"]
    print(f"pairs reproduced: {ok} of {n} ({ok / n:.1%}); of 20 us or less: {ok20} of {n20} ({ok20 / max(n20, 1):.1%})")
    print(f"median B/A over all pairs: {m['median_b_over_a']:.3f}")
    print(m["by_class"].to_string())
    print("\nthe seed case, B over A:")
    print(m["seed"].to_string(index=False))
    print("\nnot reproduced:")
    print(m["not_reproduced"].to_string(index=False))


if __name__ == "__main__":
    main()
