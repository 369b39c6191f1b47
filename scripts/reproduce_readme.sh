#!/usr/bin/env bash
# Reproduce every table of the README on the default CPU config (after `pebench run`).
set -euo pipefail
R=${RESULTS:-results}
# RoPE long-context fine-tuning at 4x (context 512), as Position Interpolation and YaRN did.
for s in linear yarn; do
  pebench train --pe rope --init-from rope-tiny-s0 --context 4x --rope-scaling "$s" --steps 125 --resume --results "$R"
  pebench eval --run "rope-tiny-s0-ft-$s-512" --lengths 128,256,512,1024,2048 --results "$R"
done
# The three evaluation protocols side by side (first 16384 validation tokens for sliding / fixed).
for pe in sinusoidal rope alibi; do
  pebench eval --run "$pe-tiny-s0" --protocol sliding --stride 64 --max-tokens 16384 --results "$R"
  pebench eval --run "$pe-tiny-s0" --protocol fixed --targets 256 --max-tokens 16384 --results "$R"
done
for p in nonoverlap sliding-s64 fixed-k256; do
  pebench report --protocol "$p" --pe sinusoidal,rope,alibi --format md --results "$R"
done
pebench report --format md --results "$R"
echo "protocol tables: $R/report-sinusoidal+rope+alibi.md, $R/report-sliding-s64-sinusoidal+rope+alibi.md, $R/report-fixed-k256-sinusoidal+rope+alibi.md"
