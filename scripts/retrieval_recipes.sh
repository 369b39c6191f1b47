#!/usr/bin/env bash
# The retrieval recipes of docs/findings/context.md: RoPE (seed 0, the tiny config) trained with
# retrieval documents in several ways, each scored at 1x and 2x for perplexity, passkey and copy; and Shaw and T5
# (which did not cross the context suite's 4,000-step warm-up) with a longer one.
# Two single-threaded workers; about two and a half hours on 2 CPU cores (the warm-up rows take 7-17 minutes each). Needs the
# default run's rope-tiny-s0 (pebench run) for the two recipes that continue it. induct-4layers-copy is the context
# suite's recipe (configs/context.yaml). Writes results/recipes/recipes.md.
set -euo pipefail
R=${R:-results/recipes}
D=scripts/recipes
export OMP_NUM_THREADS=1
mkdir -p "$R/runs"
if [ ! -d "$R/runs/rope-tiny-s0" ]; then cp -r results/runs/rope-tiny-s0 "$R/runs/"; fi
t() { pebench train --pe "${PE:-rope}" --results "$R" --resume "$@" > /dev/null; }
queue_a() {
  t --overlay $D/n25.yaml --name mix25
  t --overlay $D/n50-long.yaml --name mix50-long
  t --overlay $D/only.yaml --steps 300 --name only-300
  t --overlay $D/repeat64.yaml --steps 200 --name repeat64-200
  t --overlay $D/periodic.yaml --steps 1200 --name periodic-1200
  t --init-from rope-tiny-s0 --steps 500 --needles 1 --overlay $D/dense.yaml --name lm+repeat-500
  t --config $D/context-2layers.yaml --overlay $D/induct-short.yaml --name induct-short
  t --config $D/context-2layers.yaml --overlay $D/induct-4layers.yaml --name induct-4layers
  t --config $D/context-2layers.yaml --overlay $D/induct-4layers-copy.yaml --name induct-4layers-copy
  t --config $D/context-2layers.yaml --name induct-2layers
  PE=shaw t --config configs/context.yaml --overlay $D/induct-6000.yaml --name shaw-induct-6000
}
queue_b() {
  t --overlay $D/n50.yaml --name mix50
  t --init-from rope-tiny-s0 --steps 200 --needles 0.5 --overlay $D/n50-long.yaml --name lm+mix50-long-200
  t --overlay $D/repeat.yaml --steps 300 --name repeat-300
  t --overlay $D/periodic.yaml --steps 400 --name periodic-400
  t --overlay $D/repeat.yaml --steps 1200 --name repeat-1200
  t --overlay $D/only-passkey.yaml --name passkey-only
  t --config $D/context-2layers.yaml --overlay $D/induct-3600.yaml --name induct-3600
  t --config $D/context-2layers.yaml --overlay $D/induct-alternate.yaml --name induct-alternate
  t --config $D/context-2layers.yaml --overlay $D/induct-4layers-pairs.yaml --name induct-4layers-pairs
  t --config $D/context-2layers.yaml --overlay $D/induct-4layers-copy75.yaml --name induct-4layers-copy75
  PE=t5 t --config configs/context.yaml --overlay $D/induct-6000.yaml --name t5-induct-6000
  t --config configs/context.yaml --seed 1 --name induct-4layers-copy-s1
}
queue_a & queue_b & wait
OMP_NUM_THREADS=2 pebench eval --task ppl,passkey,copy --lengths 128,256 --trials 20 --rope-scaling "" --results "$R" > /dev/null
python3 scripts/recipes_table.py "$R" > "$R/recipes.md"
cat "$R/recipes.md"
