"""The H100 rerun record rebuilt from the published raw results: from the 23 runs of sessions 22-25 it held until
session 31, and from those and the 29 runs of sessions 26-31 (the record committed since), with per device-time
group the number of distinct implementation-cases its differences come from (docs/timing-basis.md, "The H100 record
extended, and a floor from several kernels").

    python docs/experiments/h100_rerun_record.py /tmp/h100-record     (CPU; reads reports/*/raw-results.tar.gz)
"""

import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelscope import reruns  # noqa: E402

#: the record's 23 runs until session 31 (sessions 22-25)
COMMITTED = [
    "gluon",
    "gluon2",
    "gluon3",
    "gluon4",
    "gluon5",
    "gluonws23",
    "flash24",
    "flash24b",
    "flash24c",
    "rows1",
    "rowsteams1",
    "rowsteams2",
    "rowsteams3",
    "lnprefetch",
    "lnslots",
    "rowsfinal",
    "rowsh200b",
    "rows24",
    "rows24b",
    "rows24c",
    "rows25",
    "rows25b",
    "rows25c",
]
#: the published H100 runs of sessions 26-31
LATER = [
    "h100mm26",
    "h100odd26",
    "rows26",
    "rows26h3",
    "rows26n",
    "ln27",
    "mm27",
    "odd27",
    "mm28",
    "odd28",
    "rows28",
    "flash28",
    "mm29",
    "rows29",
    "flash29",
    "mm30",
    "mm30b",
    "mm30c",
    "odd30",
    "rows30",
    "rows30c",
    "flash30",
    "flash30c",
    "def31",
    "mm31",
    "rows31",
    "flash31",
    "odd31",
    "tb31",
]


def extract(out: Path) -> dict[str, Path]:
    """Every published H100 run's results folder, by label."""
    found = {}
    for archive in sorted((ROOT / "reports").glob("nvidia-h100-*/raw-results.tar.gz")):
        with tarfile.open(archive) as tar:
            labels = {m.name.split("/")[1] for m in tar.getmembers() if m.name.startswith("results/")}
            tar.extractall(out, members=[m for m in tar.getmembers() if m.name.startswith("results/")], filter="data")
        found |= {label: out / "results" / label for label in labels}
    return found


def device_groups(record: dict) -> dict[tuple[str, str], tuple[int, int, float]]:
    """(size class, kind) on device time -> (differences, distinct implementation-cases, p95), from the summary."""
    return {
        (r["size_class"], r["kind"]): (r["n"], r["cases"], r["p95_rel"])
        for r in record["summary"]
        if r["basis"] == "device"
    }


def main() -> None:
    out = Path(sys.argv[1])
    runs = extract(out)
    committed = json.loads((ROOT / "calibration" / "nvidia-h100-80gb-hbm3.json").read_text())
    before = reruns.calibrate({label: runs[label] for label in COMMITTED}, "sessions 22-25")
    after = reruns.calibrate({label: runs[label] for label in COMMITTED + LATER}, committed["how"])
    print("the 52 runs give the committed record:", after == committed)
    print(f"observations: 23 runs {len(before['observations'])}, 52 runs {len(after['observations'])}")
    old, new = device_groups(before), device_groups(after)
    for key in sorted(set(old) | set(new)):
        row = [
            f"n={n} cases={c} p95={p:.2%}" if p is not None else f"n={n} cases={c}"
            for n, c, p in (old.get(key, (0, 0, None)), new.get(key, (0, 0, None)))
        ]
        print(f"{key[0]:>12} {key[1]:<8} {row[0]:<32} -> {row[1]}")


if __name__ == "__main__":
    main()
