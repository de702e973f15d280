#!/usr/bin/env bash
# Run the workflow on an offline GPU host whose Python already has torch, triton, pandas, jinja2, pyyaml,
# matplotlib, scipy and nvidia-ml-py, with Snakemake and its needs carried as wheels in .whl/
# (../shared/tools/device-wheels.sh fetches them). Results, reports and logs are packed into one tarball.
#
#   usage: scripts/offline-gpu-run.sh OUT_DIR TIME_LIMIT_S [snakemake args...]
#
# A carried results.tar.gz (from an earlier, interrupted run) is unpacked first, so a long run can be
# split over several sessions; Snakemake skips the jobs whose outputs already exist.
set -uo pipefail
out=${1:?out dir}; limit=${2:?time limit in seconds}; shift 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
[ -f carry/results.tar.gz ] && tar xzf carry/results.tar.gz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/nvidia-smi-before.csv"
start=$(date +%s)
timeout --signal=INT "$limit" python3 -m snakemake --cores "$(nproc)" "$@" 2>&1 | tee "$out/snakemake.log" | grep -E "^(Finished|Error|\[|Complete|total|Nothing)" | tail -40
echo "snakemake exit: ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
tar czf "$out/results.tar.gz" results reports logs 2>/dev/null
ls -la "$out"
