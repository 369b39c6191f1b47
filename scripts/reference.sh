#!/usr/bin/env bash
# Reproduce results/reference: the main job's config over seeds 0-4 trained in fp32 and seeds 0-4 trained in bf16
# autocast (ten draws), on validation and test with every RoPE scaling; the predictions' fresh draws (seeds 5-11 in
# bf16, test split); RoPE's long-context fine-tuning at 4x (seed 0
# in fp32, as PI and YaRN did); the three evaluation protocols (seed 0 in fp32); then every draw packed into one set,
# the plots and profile copied and the docs regenerated. Time: docs/manual/speed.md (budgets).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-results/reference-work}   # the working results folders (runs, checkpoints, loose records; not committed)
OUT=${OUT:-results/reference}     # the committed set
for p in fp32 bf16; do
  pebench run --seeds 0,1,2,3,4 --precision "$p" --results "$W-$p"
  pebench run --seeds 0,1,2,3,4 --final --precision "$p" --results "$W-$p"
done
cp "$W-fp32/profile.md" "$W-fp32/profile.csv" "$OUT/"   # the fp32 main job's own profile
# RoPE long-context fine-tuning at 4x (context 512), each with its scaling baked in
for s in linear yarn; do
  pebench train --pe rope --init-from rope-tiny-s0 --context 4x --rope-scaling "$s" --steps 125 --resume --results "$W-fp32"
  pebench eval --run "rope-tiny-s0-ft-$s-512" --lengths 128,256,512,1024,2048 --results "$W-fp32"
done
# the three evaluation protocols on the same seed-0 runs (first 16,384 validation tokens for sliding and fixed;
# written now as sliding-m16384-s64 and fixed-m16384-k256: the committed records predate the cap's key)
for pe in sinusoidal rope alibi; do
  pebench eval --run "$pe-tiny-s0" --protocol sliding --stride 64 --max-tokens 16384 --rope-scaling "" --results "$W-fp32"
  pebench eval --run "$pe-tiny-s0" --protocol fixed --targets 256 --max-tokens 16384 --rope-scaling "" --results "$W-fp32"
done
# the predictions' fresh draws (README): seeds 5-11 in bf16, trained after the commit that registered them
pebench run --seeds 5,6,7,8,9,10,11 --final --precision bf16 --results "$W-fresh"
mkdir -p results/speed/reference-fresh && cp "$W-fresh/profile.md" "$W-fresh/profile.csv" "$W-fresh/profile.json" results/speed/reference-fresh/
pebench pack "$OUT" --results "$W-fp32" --results "$W-bf16" --results "$W-fresh" --overwrite --update-set   # the whole set again
TMP=$(mktemp -d)
pebench report --split test --format md --results "$OUT" --out "$TMP" > /dev/null   # the headline's plots (the tables live in the docs)
mv "$TMP/plot_length-test.png" "$OUT/plot_length.png"; mv "$TMP/plot_position-test.png" "$OUT/plot_position.png"
rm -rf "$TMP"
pebench docs
pebench check results/reference
