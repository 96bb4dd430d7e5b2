#!/usr/bin/env bash
# Record real NVML facts on a GPU machine for firstlight's tests: once idle, once with a process
# holding about 40 GiB on GPU 0 (the "stale process" of a failed earlier launch).
# Usage (from the repository root, on the GPU machine): validation/gpu/record_facts.sh OUTDIR
# Needs python3 with torch (for the holder process); wheels in .whl/ are installed first if present.
set -euo pipefail
OUT=${1:?usage: record_facts.sh OUTDIR}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v python3)
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,memory.used,driver_version --format=csv | tee "$OUT/nvidia-smi.csv"
nvidia-smi topo -m | tee "$OUT/topo.txt" || true

start=$(date +%s.%N)
python3 -m firstlight facts --python "$PY" --port 8000 --save "$OUT/idle.json"
echo "facts took $(echo "$(date +%s.%N) - $start" | bc) s"

# The stale process: allocate 40 GiB on GPU 0 and wait.
python3 - <<'PY' &
import os, time, torch
x = torch.empty(40 * 1024**3, dtype=torch.uint8, device="cuda:0")
open("/tmp/holder.ready", "w").write(str(os.getpid()))
time.sleep(600)
PY
HOLDER=$!
for _ in $(seq 1 600); do [ -f /tmp/holder.ready ] && break; sleep 0.1; done
echo "holder pid $HOLDER ready"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee "$OUT/compute-apps.csv"
python3 -m firstlight facts --python "$PY" --port 8000 --save "$OUT/gpu0-40g.json"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null || true
sleep 1
nvidia-smi --query-gpu=index,memory.used --format=csv | tee "$OUT/after-kill.csv"
