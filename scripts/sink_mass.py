"""The sink mass of trained models, measured per draw so that a prediction can be decided on it: for every finished
run of one label, config and the seeds given, the attention weight on the first token of each validation window
(over the queries after it), averaged over every layer and head, and its ratio to uniform attention's
(``pebench.analysis.attention.uniform_sink``) (``pebench.analysis.attention``, the statistic
``pebench analyze`` reports per layer and head), at the training context and at a longer length, and the share of
the first kept at the second (``kept``: long over 1x).

Writes a JSON file ({"draws": {SEED: {run, precision, git_commit, sink_1x, sink_long, kept}}, ...}) that a claim
reads with ``per_draw: true`` (each draw with the commit its model was trained at, as scripts/learned_tables.py
writes), and prints a markdown table.

Usage: python scripts/sink_mass.py WORK_RESULTS... --label rope-id --config tiny --seeds 27,28,29,30,31 \\
    --long 16 --out FILE.json"""

import argparse
import json
from pathlib import Path

import torch

from pebench.analysis.attention import attention_stats, head_means, uniform_sink, windows_of
from pebench.data import prepare_corpus
from pebench.model.checkpoint import load_run_model
from pebench.results import ResultsDir, finished_by_seed
from pebench.util.errors import UsageError
from pebench.util.fsutil import atomic_write_text
from pebench.util.parsing import parse_list


def sink_at(model, stream, length: int, context: int, tokens: int, batch_tokens: int) -> float:
    """Mean over layers and heads of the weight on each window's first token, ``tokens`` validation tokens of
    windows of ``length``."""
    win = windows_of(stream, length, tokens)
    stats = attention_stats(model, win, far=context, batch=max(1, batch_tokens // length))
    return head_means(stats, "sink")


def measure(rd: ResultsDir, run: str, long: int, tokens: int) -> dict:
    cfg, _, model = load_run_model(rd, run, torch.device("cpu"))
    T = cfg.model.context
    stream = prepare_corpus(cfg.train.data, rd.cache, cfg.train.text_field).tokens("validation")
    s1 = sink_at(model, stream, T, T, tokens, cfg.eval.batch_tokens)
    sl = sink_at(model, stream, long * T, T, tokens, cfg.eval.batch_tokens)
    return {
        "run": run,
        "precision": rd.run_precision(run),
        "git_commit": rd.status(run).get("env", {}).get("git_commit"),
        "sink_1x": s1,
        "sink_long": sl,
        "kept": sl / s1 if s1 > 0 else None,
        "over_uniform_1x": s1 / uniform_sink(T),
        "over_uniform_long": sl / uniform_sink(long * T),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", nargs="+", type=Path)
    ap.add_argument("--label", required=True, help="the runs' label, as in their names (rope-id, none-asentmax)")
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--long", type=int, default=16, help="the longer length, a multiple of the training context")
    ap.add_argument("--tokens", type=int, default=8192, help="validation tokens per length (pebench analyze's)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    try:
        seeds = parse_list(args.seeds, "--seeds", int, lo=0)
    except UsageError as e:  # one line, no traceback
        raise SystemExit(f"error: {e}") from None
    runs = finished_by_seed(args.work, f"{args.label}-{args.config}", seeds)
    if not runs:
        raise SystemExit(f"no finished {args.label}-{args.config}-sSEED run for seeds {args.seeds} in {args.work}")
    draws = {str(seed): measure(rd, run, args.long, args.tokens) for seed, (rd, run) in sorted(runs.items())}
    out = {"label": args.label, "config": args.config, "long": f"{args.long}x", "tokens": args.tokens, "draws": draws}
    atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")
    print(f"| seed | sink mass 1x | sink mass {args.long}x | kept | over uniform 1x | over uniform {args.long}x |")
    print("|---|---|---|---|---|---|")
    for seed, d in draws.items():
        kept = "-" if d["kept"] is None else f"{d['kept']:.3f}"
        u1, ul = d["over_uniform_1x"], d["over_uniform_long"]
        print(f"| {seed} | {d['sink_1x']:.4f} | {d['sink_long']:.4f} | {kept} | {u1:.2f} | {ul:.2f} |")


if __name__ == "__main__":
    main()
