#!/usr/bin/env bash
# firstlight end to end on a GPU machine with no network (docs/validation.md has the results).
#
# Usage, from the repository root on the GPU machine: validation/gpu/run.sh OUTDIR
# Needs python3 with torch, transformers (and accelerate) and nvidia-ml-py; packages it lacks can be
# carried as wheels in .whl/ (fastapi, starlette, uvicorn, pydantic, openai, ... for `transformers serve`,
# and httptools for the benchmark client), which are installed into /tmp/site first.
#
# It builds a randomly initialised Llama-3-8B-shaped model in bf16 on the GPU with a locally trained
# tokenizer; records facts and runs `check` idle and with a process holding 40 GiB on GPU 0; brings up
# `transformers serve --continuous-batching` on cuda:0 through `firstlight up`; benches it at
# concurrency 1, 8, 32, 64 with 128 output tokens; reports; downs it and confirms the GPU memory is
# released; and diagnoses one failing launch.
set -uo pipefail
OUT=${1:?usage: run.sh OUTDIR}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/fl-validation}
rm -rf "$WORK" && mkdir -p "$WORK"
if [ -z "${SKIP_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export FIRSTLIGHT_STORE="$WORK/firstlight.db" HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0
PY=$(command -v python3)
FL="python3 -m firstlight"
SHAPE=${SHAPE:-llama3-8b} DEVICE=${DEVICE:-cuda:0}  # SHAPE=tiny DEVICE=cpu rehearses the script without a GPU
MODEL="$WORK/llama3-8b-random"
step() { echo; echo "=== $(date +%T) $*"; }
elapsed() { python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.1f} s')" "$1"; }

step "machine"
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,memory.used,driver_version --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| transformers', transformers.__version__)"

step "build the model (Llama-3-8B shape, bf16, on the GPU)"
t0=$(date +%s.%N)
python3 tools/make_tiny_model.py "$MODEL" --shape "$SHAPE" --dtype bfloat16 --device "${DEVICE%%:*}" 2>&1 | grep -v "Writing model shards"
echo "built in $(elapsed "$t0"); $(du -sh "$MODEL" | cut -f1)"

cat > "$WORK/spec.yaml" <<EOF
name: llama3-8b-random
engine: transformers
python: $PY
model: $MODEL
port: 8000
args: {continuous-batching: true, device: "$DEVICE", dtype: bfloat16}
env: {HF_HUB_OFFLINE: "1"}
stall: {process_start: 300, weights_loading: 600}
log_dir: $WORK/logs
EOF

step "facts and check, idle"
t0=$(date +%s.%N)
$FL facts --python "$PY" --model "$MODEL" --port 8000 --save "$OUT/h200x2-idle.json"
echo "facts in $(elapsed "$t0")"
t0=$(date +%s.%N)
$FL check "$WORK/spec.yaml"; echo "check exit $? in $(elapsed "$t0")"

step "a stale process holding ${HOLD_GIB:-40} GiB on GPU 0"
python3 - <<'PY' &
import os, time, torch
x = torch.empty(int(os.environ.get("HOLD_GIB", "40")) * 1024**3, dtype=torch.uint8, device="cuda:0" if torch.cuda.is_available() else "cpu")
open("/tmp/holder.ready", "w").write(str(os.getpid()))
time.sleep(900)
PY
HOLDER=$!
for _ in $(seq 1 600); do [ -f /tmp/holder.ready ] && break; sleep 0.1; done
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
$FL facts --python "$PY" --model "$MODEL" --port 8000 --save "$OUT/h200x2-gpu0-40g.json"
$FL check "$WORK/spec.yaml" --json > "$WORK/check-stale.json"; echo "check exit $? (2 = a failure)"
python3 -c "import json; [print(f['severity'], f['id'], f['message'], '|', f['remedy']) for f in json.load(open('$WORK/check-stale.json')) if f['severity'] != 'ok']"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null
rm -f /tmp/holder.ready
sleep 1

step "up: transformers serve --continuous-batching on cuda:0"
t0=$(date +%s.%N)
$FL up "$WORK/spec.yaml"; UP=$?
echo "up exit $UP after $(elapsed "$t0")"
$FL status

if [ "$UP" = 0 ]; then
  step "bench at concurrency 1, 8, 32, 64 (128 output tokens)"
  $FL bench --url http://127.0.0.1:8000 --model "$MODEL" --tokenizer "$MODEL" --concurrency 1,8,32,64 \
      --duration "${BENCH_DURATION:-20}" --input-len 128 --output-len 128 --warmup 2 --label transformers-cb --json "$WORK/bench.json"
  step "report"
  $FL report --md "$WORK/report/report.md" --html "$WORK/report/report.html"
fi

step "down, and the GPU memory released"
nvidia-smi --query-gpu=index,memory.used --format=csv
$FL down; echo "down exit $?"
nvidia-smi --query-gpu=index,memory.used --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv

step "a failing launch: a model path that does not exist"
sed "s#model: .*#model: $WORK/no-such-model#; s#port: 8000#port: 8001#" "$WORK/spec.yaml" > "$WORK/bad.yaml"
$FL up "$WORK/bad.yaml"; echo "up exit $? (2: the preflight refused)"
$FL up "$WORK/bad.yaml" --force; echo "up --force exit $?"
$FL diagnose "$(ls -t "$WORK"/logs/*-[0-9]*.log | grep -v watcher | head -1)" --json > "$WORK/diagnosis.json"; cat "$WORK/diagnosis.json"
$FL status

step "pack"
cp "$WORK/bench.json" "$OUT/" 2>/dev/null
tar czf "$OUT/validation.tgz" -C "$WORK" --exclude llama3-8b-random . 2>/dev/null
ls -la "$OUT"
