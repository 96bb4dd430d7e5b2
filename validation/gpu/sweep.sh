#!/usr/bin/env bash
# One real sweep on a GPU machine with no network (docs/validation.md has the results).
#
# Usage, from the repository root on the GPU machine: validation/gpu/sweep.sh OUTDIR
# Needs what run.sh needs (python3 with torch and transformers; missing packages carried as wheels in
# .whl/: fastapi, starlette, uvicorn, openai, jiter, distro, sniffio, pydantic, httptools).
#
# It builds a randomly initialised Llama-3-8B-shaped model in bf16 with a locally trained tokenizer and
# sweeps `transformers serve --continuous-batching` on cuda:0 in two variants that really differ, the
# attention implementation (sdpa, the default, against eager; and flash_attention_2, which is not installed
# there: a launch that really fails, diagnosed in the report), at C = 1..64 with two repeats, through
# perf/sweep_overhead.py (which prints what the campaign adds to its launches and benchmarks, and how fast
# the GPU memory is released after each `down`); then the sweep's report as Markdown, HTML and JSON.
set -uo pipefail
OUT=${1:?usage: sweep.sh OUTDIR}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/fl-sweep}
rm -rf "$WORK" && mkdir -p "$WORK"
if [ -z "${SKIP_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0
PY=$(command -v python3)
SHAPE=${SHAPE:-llama3-8b} DEVICE=${DEVICE:-cuda:0}  # SHAPE=tiny DEVICE=cpu rehearses the script without a GPU
LEVELS=${LEVELS:-"[1, 2, 4, 8, 16, 32, 64]"} DURATION=${DURATION:-6}
MODEL="$WORK/model"
step() { echo; echo "=== $(date +%T) $*"; }

step "machine"
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,memory.used,driver_version --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"

step "build the model ($SHAPE, bf16)"
python3 tools/make_tiny_model.py "$MODEL" --shape "$SHAPE" --dtype bfloat16 --device "${DEVICE%%:*}" 2>&1 | grep -v "Writing model shards"

cat > "$WORK/base.yaml" <<EOF
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
cat > "$WORK/attention.yaml" <<EOF
base: base.yaml
variants:
  sdpa: {}
  eager: {args: {attn-implementation: eager}}
  fa2: {args: {attn-implementation: flash_attention_2}}   # flash-attn is not installed: a real failed launch
load: {concurrency: $LEVELS, duration: $DURATION, input-len: 128, output-len: 128, warmup: 2}
repeats: 2
slo: {ttft_ms: 1000, tpot_ms: 50}
EOF

step "dry run"
python3 -m firstlight sweep "$WORK/attention.yaml" --dry-run

step "the sweep (through perf/sweep_overhead.py)"
python3 perf/sweep_overhead.py --plan "$WORK/attention.yaml" --store "$WORK/firstlight.db" 2>&1 | tee "$OUT/overhead.txt"

step "report"
python3 -m firstlight report sweep --store "$WORK/firstlight.db" --md "$WORK/report/sweep.md" --html "$OUT/sweep.html"
python3 -m firstlight report sweep --store "$WORK/firstlight.db" --json > "$OUT/sweep.json"
cp "$WORK/report/sweep.md" "$OUT/"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
tar czf "$OUT/sweep-work.tgz" -C "$WORK" --exclude model . 2>/dev/null
ls -la "$OUT"
