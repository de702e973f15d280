"""Report sections on how time was measured: each timing basis named for what it measures, the rerun
calibration the claims were judged by, the power regime of long kernels, and the seed document's own
method beside device time. Reads the run's records only (``rundata.collect``); none of these sections
appears for a run whose records carry no device time (interpreter runs, runs before the basis existed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kernelscope import claims, rundata, wording
from kernelscope.document import bullets, table, text
from kernelscope.verdicts import Basis

#: every basis a timing record can carry: (record key, name, what it measures, what the report uses it for)
BASES = [
    (
        "device",
        wording.BASIS_NAMES[Basis.DEVICE],
        "per call, the sum of the durations of the kernels, memsets and copies the call ran, from CUPTI's "
        "activity records (the GPU's own timestamps), with the L2 flushed before each call; the flush is a "
        "kernel of kernelscope's own and is left out. The span (first start to last end) is kept beside it",
        "device-speed claims and the Targets section (kernels under 1 ms)",
    ),
    (
        "sustained",
        wording.BASIS_NAMES[Basis.SUSTAINED],
        "the same, after half a second of back-to-back calls and with no idle between samples: the clock "
        "a power-bound kernel settles at under continuous use",
        "device-speed claims for kernels of 1 ms and more; burst and sustained disagreeing is reported as such",
    ),
    (
        "event",
        "CUDA events (time a caller's stream sees)",
        "an event pair around each call, batched behind a GPU sleep: device time plus the event bookkeeping "
        "and any launch gap; on some hosts a constant of one to three µs (docs/timing-basis.md)",
        "the timing tables' median_us and the time a caller sees; no claim",
    ),
    (
        "graph",
        "CUDA-graph replay (back to back)",
        "calls captured in one graph and replayed, the L2 flushes replayed alone and subtracted",
        "short kernels' back-to-back time and host cost per call; claims only for records without device time",
    ),
    (
        "seed_method",
        "seed 000's method (per-sample synchronisation, warm L2)",
        "an event pair around one call followed by a synchronisation, no flush: the host's launch path and a "
        "warm L2 are inside every sample",
        "shown beside device time for the cases the seed measured; never ranked",
    ),
]


def _ok_records(data: dict[str, Any]):
    for case in data["cases"]:
        for rec in (case.get("timing") or {}).get("implementations", []):
            if rec.get("status") == "ok" and rec.get("block") != "A2":
                yield case, rec


def has_device_time(data: dict[str, Any]) -> bool:
    return any(claims.has_device_time(rec) for _, rec in _ok_records(data))


def _clock(sub: dict[str, Any], field: str) -> float | None:
    values = [v for v in ((sub.get("clocks") or {}).get(field) or []) if v is not None]
    return float(np.median(values)) if values else None


def bases_section(data: dict[str, Any]) -> dict[str, Any] | None:
    """What each basis measures, which one the claims use, and the rerun floors they were judged by."""
    if not has_device_time(data):
        return None
    counts = {
        key: sum(1 for _, rec in _ok_records(data) if (rec.get(key) or {}).get("status") == "ok") for key, *_ in BASES
    }
    counts["event"] = sum(1 for _ in _ok_records(data))
    rows = [
        {"basis": name, "measures": what, "used for": use, "records": counts[key]} for key, name, what, use in BASES
    ]
    record = rundata.rerun_record(data)
    blocks = [
        text(
            "Which basis device-speed claims use was chosen by how well each reproduced between independent runs "
            "on separately started machines (docs/timing-basis.md has the experiment and its numbers)."
        ),
        table(pd.DataFrame(rows), ["basis", "measures", "used for", "records"]),
    ]
    if record is None:
        reason = (data.get("reruns") or {}).get("reason", "no rerun calibration")
        blocks.append(bullets([f"No rerun calibration ({reason}): no device-time ordering is claimed in this report."]))
        return {"title": "Timing bases", "blocks": blocks}
    floors = [
        {
            "basis": r["basis"],
            "size class": r["size_class"],
            "kind": r.get("kind"),
            "observations": r["n"],
            "median": f"{r['median_rel']:.2%}",
            "p95 (the floor)": f"{r['p95_rel']:.2%}",
            "max": f"{r['max_rel']:.2%}",
        }
        for r in record["summary"]
        if r["basis"] in ("device", "sustained")
    ]
    runs = record.get("runs") or {}
    blocks += [
        text(
            f"Rerun calibration: {record.get('source', 'results/reruns.json')}, from {len(runs)} runs on "
            f"{len({v.get('uuid') for v in runs.values()})} cards ({record.get('how', '')}). A pair's floor is "
            "the quadrature sum of its two sides' p95 rerun differences (their size class and implementation kind), "
            f"at least the job's A/A floor and {claims.MIN_EFFECT:.0%}."
        ),
        table(
            pd.DataFrame(floors), ["basis", "size class", "kind", "observations", "median", "p95 (the floor)", "max"]
        ),
    ]
    return {"title": "Timing bases", "blocks": blocks}


def regime_section(data: dict[str, Any], claim_df: pd.DataFrame) -> dict[str, Any] | None:
    """Long kernels under burst and sustained load, with the clocks and power of each."""
    rows = []
    for case, rec in _ok_records(data):
        burst, sus = rec.get("device") or {}, rec.get("sustained") or {}
        if sus.get("status") != "ok" or burst.get("status") != "ok":
            continue
        rows.append(
            {
                "case": rundata.case_label(case),
                "implementation": rec["implementation"],
                "burst µs": burst["median_us"],
                "burst SM MHz": _clock(burst, "sm_mhz"),
                "burst W": _clock(burst, "power_w"),
                "sustained µs": sus["median_us"],
                "sustained SM MHz": _clock(sus, "sm_mhz"),
                "sustained W": _clock(sus, "power_w"),
                "sustained / burst": sus["median_us"] / burst["median_us"],
            }
        )
    if not rows:
        return None
    flagged = claim_df[claim_df["verdict"] == claims.REGIME_DEPENDENT] if len(claim_df) else claim_df
    regime = [
        f"{c['kernel']} {c['shape']} {c['dtype']}: {c['a']} vs {c['b']}: {c['why']}." for _, c in flagged.iterrows()
    ]
    return {
        "title": "Power regime of long kernels",
        "blocks": [
            text(
                "Kernels of 1 ms and more are power-bound on this card: the clock falls as the card reaches its "
                "power limit. Burst: the sampling's own regime (batches behind a GPU sleep, the host synchronising "
                "between batches). Sustained: after half a second of back-to-back calls, no idle between samples. "
                "Claims on these kernels use the sustained samples; an ordering that the two regimes resolve "
                "oppositely is not claimed."
            ),
            table(pd.DataFrame(rows), list(rows[0])),
            bullets(regime or ["No ordering changes between burst and sustained load in this run."]),
        ],
    }


def seed_section(data: dict[str, Any]) -> dict[str, Any] | None:
    """The seed's own method beside device time for the cases the seed measured, its published numbers shown
    and not ranked."""
    refs = data["specs"].get("external_references", [])
    blocks = []
    for ref in refs:
        case = next(
            (
                c
                for c in data["cases"]
                if (c["kernel"], c["shape"], c["dtype"]) == (ref["kernel"], ref["shape"], ref["dtype"])
            ),
            None,
        )
        recs = [r for r in ((case or {}).get("timing") or {}).get("implementations", []) if r.get("block") != "A2"]
        rows = [
            {
                "implementation": r["implementation"],
                "seed method µs": (r.get("seed_method") or {}).get("median_us"),
                "event µs": r.get("median_us"),
                "device µs": (r.get("device") or {}).get("median_us"),
                "graph µs": (r.get("graph") or {}).get("median_us"),
            }
            for r in recs
            if r.get("status") == "ok" and (r.get("seed_method") or {}).get("status") == "ok"
        ]
        if not rows:
            continue
        blocks += [
            text(f"{ref['kernel']} {ref['shape']} {ref['dtype']} (the case of {ref['label']}):"),
            table(pd.DataFrame(rows), ["implementation", "seed method µs", "event µs", "device µs", "graph µs"]),
            bullets(
                [
                    "seed method: what the seed's script measures (warm-up, then an event pair around each call "
                    "and a synchronisation after it, warm L2): the kernel plus the host's launch path, which for "
                    "a kernel of a few µs is most of the sample, so it ranks launch paths, not kernels",
                    "device: the kernel's own execution on the GPU, cold L2 (the basis of this report's claims)",
                    f"the seed's own numbers ({ref.get('gpu')}, torch {ref.get('torch')}, triton "
                    f"{ref.get('triton')}): torch {ref.get('torch_median_us')} µs, Triton "
                    f"{ref.get('triton_median_us')} µs — another GPU, other versions and the seed method: shown, "
                    "never ranked against this run",
                ]
            ),
        ]
    if not blocks:
        return None
    return {"title": "The seed's question: its method beside device time", "blocks": blocks}
