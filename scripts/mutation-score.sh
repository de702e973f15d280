#!/usr/bin/env bash
# Opt-in mutation testing (not in CI) of the modules that decide what a report may say: the correctness gate,
# the claim rules, the statistics and the run-vs-run comparison. mutmut (PyPI; `.venv/bin/pip install mutmut`,
# not a project dependency) plants one small change at a time in those modules and runs the tests that cover
# the changed function; a change that no test notices ("survived") is a bug the suite would let through.
#
#   scripts/mutation-score.sh                       # every mutant of the four modules (see docs/mutation-testing.md)
#   scripts/mutation-score.sh 'kernelscope.stats*'  # only some (mutmut's mutant-name globs)
#
# It works on a scratch copy of the working tree (MUTATION_DIR, default /tmp/kernelscope-mutation), never on the
# checkout, runs under nice with JOBS workers (default 1), and ends with the survivors and the counts.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(cd "$(dirname "${PYTHON:-.venv/bin/python}")" && pwd)/$(basename "${PYTHON:-.venv/bin/python}")
WORK=${MUTATION_DIR:-${TMPDIR:-/tmp}/kernelscope-mutation}
"$PY" -c "import mutmut" 2>/dev/null || { echo "mutmut is not installed: $PY -m pip install mutmut" >&2; exit 2; }
rm -rf "$WORK" && mkdir -p "$WORK"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$WORK"
# the tests that guard these modules; the kernel tests (minutes each run) and workflow tests are left out
cat > "$WORK/setup.cfg" <<'CFG'
[mutmut]
source_paths=kernelscope/
only_mutate=
    kernelscope/correctness.py
    kernelscope/claims.py
    kernelscope/stats.py
    kernelscope/compare.py
also_copy=
    kernels/
    reports/
    config/
pytest_add_cli_args_test_selection=
    tests/test_gate.py
    tests/test_claim_rules.py
    tests/test_stats_claims.py
    tests/test_compare_rules.py
    tests/test_compare.py
    tests/test_published_report.py
pytest_add_cli_args=
    -p
    no:cacheprovider
    -x
    -q
process_isolation=forkserver
CFG
cd "$WORK"
export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
nice -n 10 "$PY" -m mutmut run --max-children "${JOBS:-1}" "$@" || true
"$PY" -m mutmut results --all true > results.txt 2>&1 || "$PY" -m mutmut results > results.txt 2>&1 || true
echo "== survivors (full list: $WORK/results.txt; show one with: cd $WORK && $PY -m mutmut show NAME)"
grep -E ": (survived|no tests)" results.txt || true
echo "== counts"
sed -E 's/.*: //' results.txt | sort | uniq -c
