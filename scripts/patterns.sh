#!/usr/bin/env bash
# Reproduce results/patterns: the layer patterns long-context models ship (irope, local-global, swan,
# nope-rope-alt), with and without a learned attention sink per head (perplexity as trained), and PoPE, stick-breaking and PaTH, beside RoPE (with
# YaRN at evaluation) and ALiBi, at the tiny config and budget, seeds 0-2 (bf16 where the CPU multiplies bf16
# natively); perplexity, passkey and copying from 1x to 16x; the patterns with NoPE layers evaluated again (perplexity)
# with Llama 4's temperature on those layers; one attention-distance picture per pattern; the learning-rate grid of the
# patterns; then every record packed, the claims written from the draws and the docs regenerated.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-results/patterns-work}   # the working results folder (runs, checkpoints, loose records; not committed)
OUT=${OUT:-results/patterns}     # the committed set
pebench tune --pe nope-rope-alt,irope,local-global,swan --lr 1e-3,3e-3,1e-2,2e-2 --results "$W"
pebench tune --pe path --lr 3e-3,1e-2,2e-2 --results "$W-path"
pebench run --suite patterns --pe irope,local-global,swan,nope-rope-alt,pope,stick-breaking,rope,alibi --seeds 0,1,2 \
  --rope-scaling none,yarn --workers cpu:2 --results "$W"
pebench run --suite patterns --pe path --task ppl --seeds 0,1,2 --workers cpu:2 --results "$W"   # perplexity alone:
# past 128 keys PaTH evaluates in its naive form, and the retrieval prompts at 16x would take hours
pebench run --suite patterns --pe irope,local-global,swan,nope-rope-alt --sinks --seeds 0,1,2 --task ppl --rope-scaling '' \
  --workers cpu:2 --results "$W"
runs=()
for p in irope swan nope-rope-alt; do for s in 0 1 2; do runs+=(--run "$p-tiny-s$s"); done; done
pebench eval "${runs[@]}" --logit-scale llama4@none --rope-scaling '' --task ppl --results "$W"
seed0=irope-tiny-s0,local-global-tiny-s0,swan-tiny-s0,nope-rope-alt-tiny-s0,pope-tiny-s0,stick-breaking-tiny-s0
pebench analyze --run "$seed0" --tokens 4096 --lengths 1x,16x --results "$W"
mkdir -p "$OUT"
for r in ${seed0//,/ }; do cp "$W/analysis/attention_$r.png" "$OUT/"; done
{ cat "$W/tune/tune.md"; echo; cat "$W-path/tune/tune.md"; } > "$OUT/tune.md"
pebench pack "$OUT" --results "$W" --overwrite --update-set   # the script rebuilds the whole set
# the length plot of the schemes and patterns as trained (no scaling, temperature or sink: the tables show those)
TMP=$(mktemp -d)
python - "$OUT" "$TMP" <<'PY'
import gzip, json, sys
lines = gzip.open(f"{sys.argv[1]}/records.jsonl.gz", "rt").readlines()
with gzip.open(f"{sys.argv[2]}/records.jsonl.gz", "wt") as f:
    f.writelines(x for x in lines if "+" not in json.loads(x)["label"] and " " not in json.loads(x)["label"])
PY
pebench report --split validation --format md --results "$TMP" --out "$TMP/plots" > /dev/null
cp "$TMP/plots/plot_length.png" "$OUT/plot_length.png"
rm -rf "$TMP"
pebench docs
pebench check "$OUT"
