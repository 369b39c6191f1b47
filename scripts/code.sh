#!/usr/bin/env bash
# Reproduce results/code: the headline re-decided on source code (the corpus `pystdlib`, the Python standard library
# of the interpreter that runs it; results/code/claims.yaml registered the predictions before any run on it). The
# classic seven at the tiny config with the reference's per-scheme learning rates, five fresh draws (seeds 0-4) in
# bf16, evaluated on the test split (the headline's predictions); then the layer patterns and the 2025 schemes with
# RoPE and ALiBi on validation as trained (the patterns' predictions); then the classic seven on validation; then
# every record packed and the claims decided. Resumable: rerun it and each command skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-results/code-work}   # the working results folder (runs, checkpoints, loose records; not committed)
OUT=${OUT:-results/code}     # the committed set
common=(--data pystdlib --seeds 0,1,2,3,4 --precision bf16 --workers cpu:2 --results "$W")
classic=none,sinusoidal,learned,shaw,t5,rope,alibi
pebench run --pe "$classic" --final "${common[@]}"   # the headline's draws: every length and scaling, test split
# the patterns' draws, and RoPE's and ALiBi's beside them, as the patterns' predictions read them: validation, 1x and
# 16x, as trained (PaTH's evaluation past 128 keys runs in its naive form: the other lengths would double the cost)
pebench run --pe irope,local-global,swan,nope-rope-alt,pope,stick-breaking,path,rope,alibi --rope-scaling '' \
  --lengths 1x,16x "${common[@]}"
pebench run --pe "$classic" "${common[@]}"   # the classic seven on validation too, every length and scaling
cp "$W/profile.md" "$OUT/profile.md"
pebench pack "$OUT" --results "$W" --overwrite --update-set   # the script rebuilds the whole set (the change shown)
pebench docs
pebench check "$OUT"
