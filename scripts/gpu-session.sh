#!/usr/bin/env bash
# The default configuration on an offline GPU host, with Snakemake carried as wheels in .whl/
# (../shared/tools/device-wheels.sh fetches them). Two modes:
#
#   scripts/gpu-session.sh OUT LIMIT_S per-card LABEL [LABEL ...]
#       one independent single-card run per label, all at once, run i on the host's card i with
#       --cores (nproc / number of labels): e.g. two single-card runs of one commit on two cards
#   scripts/gpu-session.sh OUT LIMIT_S all-cards LABEL
#       one run over every card of the host (--cores nproc)
#   scripts/gpu-session.sh OUT LIMIT_S same-card LABEL [LABEL ...]
#       one independent run per label, all at once on the host's first card (they share its lock, so
#       their samples never overlap), --cores (nproc / number of labels): reruns in separate processes
#
# Extra Snakemake arguments go in SNAKEMAKE_ARGS, extra config entries (key=value ...) in SNAKEMAKE_CONFIG: a
# second --config would replace the label (Snakemake keeps the last one). Runs stop at LIMIT_S (SIGINT) and resume when the script
# is started again on the same machine (results/ stays; Snakemake reruns incomplete jobs). Each run's
# results, reports and logs are packed into OUT/<label>.tar.gz.
set -uo pipefail
out=${1:?out dir}; limit=${2:?time limit in seconds}; mode=${3:?per-card or all-cards}; shift 3
labels=("$@")
case " ${SNAKEMAKE_ARGS:-} " in
  *" --config "*|*" -C "*) echo "put config entries in SNAKEMAKE_CONFIG, not --config in SNAKEMAKE_ARGS" >&2; exit 2 ;;
esac
[ ${#labels[@]} -gt 0 ] || { echo "name at least one run label" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,uuid,name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv \
  | tee "$out/nvidia-smi-before.csv"
mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
root=$PWD
run() {  # label cores [card]
  local label=$1 cores=$2 card=${3:-} dir=$root
  if [ -n "$card" ] && [ "$label" != "${labels[0]}" ]; then  # one working directory per concurrent run
    dir=/tmp/run-$label
    [ -d "$dir" ] || { mkdir -p "$dir" && cp -a "$root"/. "$dir"/; }
  fi
  # a label whose report is committed but whose results are not here starts afresh (else the committed
  # report satisfies the target and nothing runs)
  [ -d "$dir/results/$label" ] || rm -rf "$dir/reports/$label"
  (cd "$dir" && ${card:+env CUDA_VISIBLE_DEVICES=$card} timeout --signal=INT "$limit" \
     python3 -m snakemake --cores "$cores" ${SNAKEMAKE_ARGS:-} --config label="$label" ${SNAKEMAKE_CONFIG:-} \
     > "$out/snakemake-$label.log" 2>&1
   echo "$label: snakemake exit $? after $SECONDS s (card ${card:-all})"
   [ -d "results/$label" ] || echo "$label: no results/$label: the run wrote its results elsewhere" >&2
   tar czf "$out/$label.tar.gz" "results/$label" "reports/$label" "logs/$label" 2>/dev/null)
}
SECONDS=0
if [ "$mode" = per-card ] || [ "$mode" = same-card ]; then
  [ "$mode" = same-card ] || [ ${#labels[@]} -le ${#uuids[@]} ] || { echo "more labels than cards" >&2; exit 2; }
  cores=$(( $(nproc) / ${#labels[@]} ))
  for i in "${!labels[@]}"; do
    card=${uuids[$i]:-}; [ "$mode" = same-card ] && card=${uuids[0]}
    run "${labels[$i]}" "$cores" "$card" &
  done
  wait
else
  run "${labels[0]}" "$(nproc)"
fi
for label in "${labels[@]}"; do
  grep -E "steps \(|Error in rule|Exiting because" "$out/snakemake-$label.log" | tail -5 | sed "s/^/$label: /"
done
ls -la "$out"
