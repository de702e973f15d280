#!/usr/bin/env bash
# Where a timing job's time goes, on a GPU host: one timing job (softmax fp16 8192 x 8192) re-run from a
# carried results archive, printing each implementation's prepare_ms / first_call_ms / sampling / job wall
# time, then the cost of importing Dynamo and Inductor in a fresh process. Needs no Snakemake.
#
#   usage: scripts/probe-timing-job.sh OUT_DIR   (with carry/results.tar.gz holding results/nvidia-h200/)
set -u
out=${1:?out dir}
tar xzf carry/results.tar.gz results
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
r=results/nvidia-h200; c="--kernel softmax --shape M8192_N8192 --dtype float16"
python3 -m kernelscope timing --specs $r/specs.json $c --correctness $r/correctness/softmax/float16/M8192_N8192.json \
  --sweep $r/sweep/softmax/float16/M8192_N8192.json --out "$out/timing-M8192_N8192.json"
OUT_JSON="$out/timing-M8192_N8192.json" python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT_JSON"]))
print("job_s", d["job_s"], "setup_s", round(d["setup_s"], 2))
for r in d["implementations"]:
    print(f"{r['implementation']:18s} {str(r.get('block')):4s} prepare_ms {r.get('prepare_ms', 0):8.1f} "
          f"first_call_ms {r.get('first_call_ms', 0):8.1f} sampling_s {r.get('wall_s', 0):5.2f} "
          f"job_wall_s {r.get('job_wall_s', 0):6.2f}")
PY
python3 - <<'PY'
import time, torch
t = time.perf_counter(); import torch._dynamo; a = time.perf_counter() - t
t = time.perf_counter(); import torch._inductor.compile_fx; b = time.perf_counter() - t
print(f"import torch._dynamo {a:.2f} s, then torch._inductor.compile_fx {b:.2f} s")
PY
