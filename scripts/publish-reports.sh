#!/usr/bin/env bash
# Re-render every published report and comparison under reports/ from the raw results committed beside it,
# with the code of this checkout, then the index of runs. A report directory reports/<name>/ holds
# raw-results.tar.gz (results/<key>/ and logs/<key>/ of one run); a comparison reports/<a>/compare/<b>/ is
# rendered from the raw results of reports/<a>/ and reports/<b>/, named <a> and <b>.
#
#   usage: scripts/publish-reports.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-${PYTHON:-python3}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results_of() {  # name -> the unpacked results/<key> directory of reports/<name>/raw-results.tar.gz
  local name=$1
  if [ ! -d "$tmp/$name" ]; then
    mkdir -p "$tmp/$name"
    tar xzf "reports/$name/raw-results.tar.gz" -C "$tmp/$name" results
  fi
  find "$tmp/$name/results" -mindepth 1 -maxdepth 1 -type d | head -n 1
}
calibration_for() {  # results dir -> --calibration calibration/<hardware>.json where the run recorded none and one exists
  "$python" - "$1" <<'PY'
import json, pathlib, sys
run = pathlib.Path(sys.argv[1])
recorded = json.loads((run / "reruns.json").read_text()).get("status") if (run / "reruns.json").exists() else None
record = pathlib.Path("calibration") / f"{json.loads((run / 'specs.json').read_text()).get('hardware')}.json"
if recorded != "ok" and record.is_file():
    print(f"--calibration {record}")
PY
}
# comparisons first: a report links (and takes its 'reproduced' column from) the comparisons beside it. A pair
# whose run A was made before its card had a rerun calibration is judged by the one published since.
for dir in reports/*/compare/*/; do
  a=$(basename "$(dirname "$(dirname "$dir")")"); b=$(basename "$dir")
  echo "compare $a vs $b"
  run_a=$(results_of "$a")
  # shellcheck disable=SC2046  # the option and its path, or nothing
  "$python" -m kernelscope compare --a "$run_a" --b "$(results_of "$b")" --out "$dir" \
    --label-a "$a" --label-b "$b" $(calibration_for "$run_a") > /dev/null
done
for archive in reports/*/raw-results.tar.gz; do
  name=$(basename "$(dirname "$archive")")
  echo "report  $name"
  "$python" -m kernelscope report --results "$(results_of "$name")" --out "reports/$name"
done
"$python" -m kernelscope index --reports reports
