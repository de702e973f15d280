"""Rerun calibration: how far one implementation's median moves between independent runs, per timing basis
and size class, measured from the runs themselves rather than assumed.

Every run is a ``results/<label>/`` folder of timing records (separate processes; separate cards or
machines where the runs were made so). For each implementation timed in two runs, on each basis both runs
recorded, the relative difference of the medians ``|b - a| / a`` is one observation of rerun variability.
Observations are grouped by basis and by the size class of the measured time, and each group's spread is
summarised (median, 95th percentile, maximum, count, and which run pairs it came from).

The record this writes (``python -m kernelscope.reruns RUN_DIR RUN_DIR ... --out FILE``) is a published
artefact: the claim rules read the floor of a basis and size class from it (``floor``), and a report names
the file and its trials. It needs no torch: it reads result files only.

Bases (``BASES``):

* ``device``: the sum of the call's kernel durations from CUPTI records, cold L2 (kernelscope.devicetime);
* ``device_span``: first kernel start to last kernel end of the call, same records;
* ``event``: CUDA events around each call, batched behind a GPU sleep (the time a caller's stream sees);
* ``graph``: CUDA-graph replay per call, the flush replayed alone and subtracted (back-to-back calls);
* ``sustained``: device time after a second of back-to-back load (the power regime of continuous use).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernelscope import records, results

BASES = ("device", "device_span", "event", "graph", "sustained")
#: upper edges (µs) of the size classes; the last class is open
SIZE_EDGES_US = (5.0, 20.0, 100.0, 1000.0)
#: the share of observations a floor must cover (the floor is this quantile of the observed differences)
FLOOR_QUANTILE = 0.95
#: the fewest observations a group needs to give a floor: 1 / (1 - FLOOR_QUANTILE), the least for which one
#: observed difference lies above the quantile (with fewer, the "95th percentile" is an interpolation between the
#: largest few, and one run's luck sets it)
MIN_OBSERVATIONS = math.ceil(1 / (1 - FLOOR_QUANTILE) - 1e-9)
#: the fewest distinct implementation-cases (kernel, shape, dtype, implementation) a group's differences must come
#: from to give a floor. Many runs of one case give many differences (nine runs, 36 pairs): counted alone, they
#: made one kernel's stability the floor of every kernel of its kind and size (docs/timing-basis.md, "The H100
#: record extended, and a floor from several kernels"). Records written before the count have no ``cases`` and are
#: read as before.
MIN_CASES = 3


def basis_median(rec: Mapping[str, Any], basis: str) -> float | None:
    """A timing record's median on ``basis``, or None where the record has none."""
    if rec.get("status") != "ok":
        return None
    if basis == "event":
        return rec.get("median_us")
    sub = rec.get({"device_span": "device"}.get(basis, basis)) or {}
    if sub.get("status") != "ok":
        return None
    return sub.get("span_median_us" if basis == "device_span" else "median_us")


def size_class(us: float) -> str:
    lo = 0.0
    for hi in SIZE_EDGES_US:
        if us < hi:
            return f"{lo:g}-{hi:g} us"
        lo = hi
    return f">={lo:g} us"


def _medians(run: Path) -> dict[tuple[str, ...], dict[str, float]]:
    """(kernel, dtype, shape, implementation) -> basis -> median, for the first block of each implementation."""
    out: dict[tuple[str, ...], dict[str, float]] = {}
    for path in sorted((run / "timing").glob("*/*/*.json")):
        doc = results.load(path, "timing")
        for rec in doc["implementations"]:
            if rec.get("block") == "A2":
                continue
            key = (doc["kernel"], doc["dtype"], doc["shape"], rec["implementation"])
            meds = {b: m for b in BASES if (m := basis_median(rec, b)) is not None and m > 0}
            if meds:
                out[key] = {
                    **meds,
                    "config": json.dumps(records.launch_config(rec), sort_keys=True),
                    "kind": rec.get("kind") or "unknown",
                    "code": {f: doc.get(f) for f in ("kernel_sources_sha256", "kernel_module_sha256")},
                    "software": (doc.get("torch"), doc.get("triton")),
                }
    return out


def _not_a_rerun(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why two runs' medians of one implementation are not one kernel measured twice, or None: the sweeps chose
    different launch configs; torch or Triton differ; or a Triton variant's code changed between the runs (its
    module or a repository module it imports; a baseline calls the same library code whatever the module holds,
    as in ``kernelscope.compare``). Each difference is a change, not the machines' variability."""
    if a["config"] != b["config"]:
        return "launch config"
    if a["software"] != b["software"]:
        return "software"
    sha_a, sha_b = records.code_hashes(a["code"], b["code"])
    if a["kind"] == "triton" and sha_a != sha_b:
        return "kernel code"
    return None


def observations(runs: Mapping[str, Path]) -> list[dict[str, Any]]:
    """One row per implementation, basis and pair of runs that both timed the same kernel: the two medians and
    their relative difference; its size class is that of the device-time median (the same class on every
    basis). Left out (``_not_a_rerun``): a Triton variant whose sweeps chose different configs in the two runs
    (that difference is the sweep's, and comparisons name it as such), a torch.compile baseline whose processes
    ran Inductor's kernels at different configs (``records.launch_config``), a Triton variant whose code changed
    between the runs, and any pair of runs with different torch or Triton."""
    medians = {label: _medians(path) for label, path in runs.items()}
    rows = []
    for (la, ma), (lb, mb) in itertools.combinations(medians.items(), 2):
        for key in sorted(set(ma) & set(mb)):
            if _not_a_rerun(ma[key], mb[key]):
                continue  # two kernels (or two stacks), not one measured twice
            ref = ma[key].get("device") or ma[key].get("event")
            for basis in BASES:
                a, b = ma[key].get(basis), mb[key].get(basis)
                if a is None or b is None:
                    continue
                rows.append(
                    {
                        "kernel": key[0],
                        "dtype": key[1],
                        "shape": key[2],
                        "implementation": key[3],
                        "kind": ma[key]["kind"],
                        "basis": basis,
                        "size_class": size_class(ref),
                        "runs": f"{la} vs {lb}",
                        "a_us": a,
                        "b_us": b,
                        "rel_diff": abs(b - a) / a,
                    }
                )
    return rows


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per basis, size class and implementation kind (eager, compile, triton: torch.compile's choices vary
    from process to process, a hand-written kernel's do not): the count, the distinct implementation-cases they
    come from, and the median, 95th percentile and maximum of the relative differences."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    cases: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
    for r in rows:
        key = (r["basis"], r["size_class"], r["kind"])
        groups.setdefault(key, []).append(r["rel_diff"])
        cases.setdefault(key, set()).add((r["kernel"], r["shape"], r["dtype"], r["implementation"]))
    order = {b: i for i, b in enumerate(BASES)}
    out = []
    for (basis, cls, kind), diffs in sorted(
        groups.items(), key=lambda kv: (order[kv[0][0]], _class_order(kv[0][1]), kv[0][2])
    ):
        x = np.asarray(diffs)
        out.append(
            {
                "basis": basis,
                "size_class": cls,
                "kind": kind,
                "n": len(x),
                "cases": len(cases[(basis, cls, kind)]),
                "median_rel": float(np.median(x)),
                "p95_rel": float(np.quantile(x, FLOOR_QUANTILE)),
                "max_rel": float(np.max(x)),
            }
        )
    return out


def _class_order(cls: str) -> float:
    return float(cls.lstrip(">=").split("-")[0].split(" ")[0])


def calibrate(runs: Mapping[str, Path], how: str = "") -> dict[str, Any]:
    """The calibration record of a set of runs: where each came from, every observation, the summary."""
    provenance = {}
    for label, path in runs.items():
        env = results.load(path / "environment.json", "environment") if (path / "environment.json").exists() else {}
        gpu = env.get("gpu") or {}
        provenance[label] = {
            "gpu": gpu.get("name"),
            "uuid": gpu.get("uuid"),
            "host": (env.get("host") or {}).get("hostname"),
            "torch": (env.get("software") or {}).get("torch") or env.get("torch"),
            "triton": (env.get("software") or {}).get("triton") or env.get("triton"),
            "commit": (env.get("git") or {}).get("commit") or env.get("commit"),
        }
    rows = observations(runs)
    return {
        "kind": "rerun calibration",
        "how": how,
        "floor_quantile": FLOOR_QUANTILE,
        "size_edges_us": list(SIZE_EDGES_US),
        "runs": provenance,
        "summary": summarise(rows),
        "observations": rows,
    }


def floor(calibration: Mapping[str, Any] | None, basis: str, us: float, kinds: Sequence[str]) -> dict[str, Any] | None:
    """The rerun floor of a pair on ``basis`` at a time of ``us``: each side's kind has the calibrated quantile
    of the relative differences between independent runs in that size class; the two sides move
    independently, so the pair's floor is their quadrature sum. None where the calibration has no such
    group (no calibration, or that basis, size class or kind was not measured), a group of fewer than
    ``MIN_OBSERVATIONS``, or one whose differences come from fewer than ``MIN_CASES`` implementation-cases."""
    if not calibration:
        return None
    cls = size_class(us)
    rows = {(r["basis"], r["size_class"], r.get("kind")): r for r in calibration.get("summary", [])}
    found = [rows.get((basis, cls, kind)) for kind in kinds]
    if not all(found) or min(r["n"] for r in found) < MIN_OBSERVATIONS:
        return None
    if any(r.get("cases", MIN_CASES) < MIN_CASES for r in found):
        return None
    return {
        "rel": math.sqrt(sum(r["p95_rel"] ** 2 for r in found)),
        "n": min(r["n"] for r in found),
        "size_class": cls,
        "trials": len(calibration.get("runs", {})),
    }


def counts_cases(calibration: Mapping[str, Any] | None) -> bool:
    """Whether a calibration record counts the implementation-cases of its groups (records written before
    ``MIN_CASES`` do not), so that wording can name the condition only where it applied."""
    return any("cases" in r for r in (calibration or {}).get("summary", []))


def load_record(path: str | Path) -> dict[str, Any]:
    """A calibration record written by :func:`main`, checked for the fields the claim rules read."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable rerun calibration record ({exc})") from exc
    bad = [r for r in record.get("summary", []) if not {"basis", "size_class", "kind", "n", "p95_rel"} <= set(r)]
    if record.get("kind") != "rerun calibration" or not record.get("summary") or bad:
        raise ValueError(f"{path}: not a rerun calibration record (python -m kernelscope.reruns writes one)")
    return record


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="results/<label>/ folders of independent runs")
    ap.add_argument("--out", type=Path, required=True, help="the calibration record to write (JSON)")
    ap.add_argument("--how", default="", help="how the runs were made (processes, cards, machines)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    missing = [str(p) for p in args.runs if not (p / "timing").is_dir()]
    if missing:
        print(f"not a run's results folder (no timing/ inside): {', '.join(missing)}", file=sys.stderr)
        return 2
    labels = [p.name for p in args.runs]
    if len(set(labels)) != len(labels):
        print("two runs share a folder name; name each run's folder by its label", file=sys.stderr)
        return 2
    record = calibrate(dict(zip(labels, args.runs, strict=True)), args.how)
    results.write_text(args.out, json.dumps(record, indent=1, default=_finite) + "\n")
    width = max(len(r["size_class"]) for r in record["summary"]) if record["summary"] else 10
    for r in record["summary"]:
        print(
            f"{r['basis']:<12} {r['size_class']:<{width}} {r['kind']:<8} n={r['n']:<4} cases={r['cases']:<3} "
            f"median {r['median_rel']:.2%} "
            f"p95 {r['p95_rel']:.2%} max {r['max_rel']:.2%}"
        )
    return 0


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


if __name__ == "__main__":
    sys.exit(main())
