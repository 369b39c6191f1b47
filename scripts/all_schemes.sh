#!/usr/bin/env bash
# The fourteen-scheme table: all fourteen schemes (and every RoPE-family scaling) on the default config, seed 0, on the
# 2-core CPU as two single-threaded workers. The classic seven are the main job's runs (results/runs), copied
# rather than retrained (same config, same seed: the same models); the modern seven are trained here.
# Output: results/all/report.md, plot_length.png; and their speed: results/bench-modern/bench.md.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:-results/all}
mkdir -p "$A/runs" "$A/records"
for s in none sinusoidal learned shaw t5 rope alibi; do
  [ -d "$A/runs/$s-tiny-s0" ] || cp -r "results/runs/$s-tiny-s0" "$A/runs/"
  [ -d "$A/records/$s-tiny-s0" ] || cp -r "results/records/$s-tiny-s0" "$A/records/"
done
start=$(date +%s)
pebench run --pe all --workers cpu:2 --results "$A" > "$A/run.log" 2>&1
echo "modern seven trained and evaluated in $(( $(date +%s) - start )) s" | tee -a "$A/run.log"
# options for any scheme, on RoPE: DroPE (62 steps without positions from the RoPE run, then its logit scale)
# and log-n scaling at evaluation only
export OMP_NUM_THREADS=2
pebench train --pe none --init-from rope-tiny-s0 --results "$A" >> "$A/run.log" 2>&1
pebench eval --run rope-tiny-s0-to-none --results "$A" >> "$A/run.log" 2>&1
pebench eval --run rope-tiny-s0-to-none --logit-scale drope --results "$A" >> "$A/run.log" 2>&1
pebench eval --run rope-tiny-s0 --logit-scale logn --rope-scaling "" --results "$A" >> "$A/run.log" 2>&1
pebench report --format md --results "$A" >> "$A/run.log" 2>&1
pebench bench --pe rope,kerple,fire,xpos,p-rope,sandwich,fox,cope --lengths 1x,64x --repeats 3 \
  --no-compile --no-reference --no-baseline --results results/bench-modern > "$A/bench.log" 2>&1
