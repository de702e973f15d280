#!/usr/bin/env bash
# Opt-in mutation testing (not in CI) of the modules that decide what a report may say: the correctness gate,
# the claim rules, the statistics and the run-vs-run comparison. mutmut (PyPI; `.venv/bin/pip install mutmut`,
# not a project dependency) plants one small change at a time in those modules and runs the tests that cover
# the changed function; a change that no test notices ("survived") is a bug the suite would let through.
#
#   scripts/mutation-score.sh                       # every mutant of the four modules (see docs/mutation-testing.md)
#   scripts/mutation-score.sh 'kernelscope.stats*'  # only some (mutmut's mutant-name globs)
#
#   SAMPLE=150 SEED=1 scripts/mutation-score.sh     # a seeded random sample of 150 mutants per module
#
# A full run of the four modules (about 3,300 mutants) takes many hours on a 2-core machine; SAMPLE gives each
# module's score from a uniform random sample, with a 95 % Wilson interval, in a bounded time.
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
if [ -n "${SAMPLE:-}" ]; then
  # generate the mutants and the test map (no mutant matches the name), then draw the sample from them
  nice -n 10 "$PY" -m mutmut run --max-children "${JOBS:-1}" 'kernelscope.no_such_mutant' > /dev/null 2>&1 || true
  mapfile -t picked < <("$PY" - "$SAMPLE" "${SEED:-1}" "$@" <<'PY'
import fnmatch, json, random, sys
from pathlib import Path
n, seed, globs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for meta in sorted(Path("mutants/kernelscope").glob("*.py.meta")):
    names = sorted(json.loads(meta.read_text())["exit_code_by_key"])
    names = [m for m in names if not globs or any(fnmatch.fnmatch(m, g) for g in globs)]
    for name in random.Random(f"{seed}:{meta.name}").sample(names, min(n, len(names))):
        print(name)
PY
)
  printf '%s\n' "${picked[@]}" > sample.txt
  echo "== sampled ${#picked[@]} mutants (sample.txt)"
  nice -n 10 "$PY" -m mutmut run --max-children "${JOBS:-1}" "${picked[@]}" || true
else
  nice -n 10 "$PY" -m mutmut run --max-children "${JOBS:-1}" "$@" || true
fi
"$PY" -m mutmut results --all true > results.txt 2>&1 || "$PY" -m mutmut results > results.txt 2>&1 || true
echo "== survivors (full list: $WORK/results.txt; show one with: cd $WORK && $PY -m mutmut show NAME)"
grep -E ": (survived|no tests)" results.txt || true
echo "== counts"
sed -E 's/.*: //' results.txt | sort | uniq -c
# per module: killed / (killed + survived), with a 95 % Wilson interval (the whole module, or the sample)
"$PY" - <<'PY'
import collections, re
from pathlib import Path
from scipy.stats import binomtest
counts = collections.defaultdict(collections.Counter)
for line in Path("results.txt").read_text().splitlines():
    m = re.match(r"\s*(kernelscope\.\w+)\.\S+: (.+)", line)
    if m:
        counts[m[1]][m[2].strip()] += 1
print("module | killed | survived | other | score | 95% interval")
for module, c in sorted(counts.items()):
    k, s = c["killed"], c["survived"]
    other = sum(c.values()) - k - s - c["not checked"]
    if k + s:
        ci = binomtest(k, k + s).proportion_ci(method="wilson")
        print(f"{module} | {k} | {s} | {other} | {k / (k + s):.1%} | {ci.low:.1%}-{ci.high:.1%}")
PY
