#!/usr/bin/env bash
# Reproduce results/reference: the main job's config over seeds 0, 1, 2 on validation and test (every RoPE scaling),
# RoPE's long-context fine-tuning at 4x (seed 0, as PI and YaRN did), the three evaluation protocols (seed 0), then
# the evidence packed, the plots and profile copied, and the docs regenerated. Time: docs/speed.md (budgets).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-results/reference-work}   # the working results folder (runs, checkpoints, loose records; not committed)
OUT=${OUT:-results/reference}     # the committed set
pebench run --seeds 0,1,2 --precision fp32 --results "$W"   # the reference trains in fp32 on every machine
cp "$W/profile.md" "$W/profile.csv" "$OUT/"   # the main job's own profile
pebench run --seeds 0,1,2 --final --precision fp32 --results "$W"
# RoPE long-context fine-tuning at 4x (context 512), each with its scaling baked in
for s in linear yarn; do
  pebench train --pe rope --init-from rope-tiny-s0 --context 4x --rope-scaling "$s" --steps 125 --resume --results "$W"
  pebench eval --run "rope-tiny-s0-ft-$s-512" --lengths 128,256,512,1024,2048 --results "$W"
done
# the three evaluation protocols on the same seed-0 runs (first 16,384 validation tokens for sliding and fixed)
for pe in sinusoidal rope alibi; do
  pebench eval --run "$pe-tiny-s0" --protocol sliding --stride 64 --max-tokens 16384 --results "$W"
  pebench eval --run "$pe-tiny-s0" --protocol fixed --targets 256 --max-tokens 16384 --results "$W"
done
pebench pack "$OUT" --results "$W"
pebench report --split test --format md --results "$OUT" > /dev/null   # the 3-seed headline's plots
mv "$OUT/plot_length-test.png" "$OUT/plot_length.png"; mv "$OUT/plot_position-test.png" "$OUT/plot_position.png"
rm -f "$OUT"/report*   # the tables live in the docs, generated
pebench docs
pebench check results/reference
