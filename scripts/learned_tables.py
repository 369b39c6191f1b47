"""The survey's "a learned table develops sinusoid-like, multi-scale structure", measured per trained model so that a
prediction can be decided on it: for every finished ``learned`` run of one config and the seeds given, the share of
the table's dimensions that are sinusoid-like against a null that keeps the table's rank (each dimension's spectral
concentration above the 95th percentile of the same dimension in 200 copies with the positions shuffled; 5% pass by
chance) and the spread of those dimensions' frequencies in octaves (``pebench.analysis.encodings.sinusoid_like``),
beside a sinusoidal table's and a smooth one-scale table's numbers. A run that did not train (its 1x validation
perplexity above the mean of NoPE's runs of the same config and seeds in the same folders) keeps null values and
says why: the survey's statement is about tables that trained.

Writes a JSON file ({"draws": {SEED: {run, precision, git_commit, ppl_1x, fraction, octaves, untrained}}, ...}) that
a claim reads with ``per_draw: true``, and prints a markdown table.

Usage: python scripts/learned_tables.py WORK_RESULTS... --config tiny --seeds 17,18,19,20,21 --out FILE.json"""

import argparse
import json
import math
from pathlib import Path

import torch

from pebench.analysis.encodings import sinusoid_like
from pebench.analysis.run import ppl_by_length
from pebench.model.checkpoint import load_run_model
from pebench.model.pe.sinusoidal import sinusoidal_table
from pebench.results import finished_by_seed
from pebench.util.errors import UsageError
from pebench.util.fsutil import atomic_write_text
from pebench.util.parsing import parse_list


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", nargs="+", type=Path)
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    try:
        seeds = parse_list(args.seeds, "--seeds", int, lo=0)
    except UsageError as e:  # one line, no traceback
        raise SystemExit(f"error: {e}") from None
    runs = finished_by_seed(args.work, f"learned-{args.config}", seeds)
    nope = list(finished_by_seed(args.work, f"none-{args.config}", seeds).values())
    if not runs:
        raise SystemExit(f"no finished learned-{args.config}-sSEED run for seeds {args.seeds} in {args.work}")
    draws, context = {}, None
    for seed, (rd, run) in sorted(runs.items()):
        cfg, _, model = load_run_model(rd, run, torch.device("cpu"))
        context = cfg.model.context
        nope_ppl = [p for r, n in nope if (p := ppl_by_length(r, n).get(str(context))) is not None]
        bar = sum(nope_ppl) / len(nope_ppl) if nope_ppl else math.inf
        ppl = ppl_by_length(rd, run).get(str(context))
        stalled = ppl is None or ppl >= bar
        s = sinusoid_like(model.pe.position_table(context).detach())
        draws[str(seed)] = {
            "run": run,
            "precision": rd.run_precision(run),
            "git_commit": rd.status(run).get("env", {}).get("git_commit"),
            "ppl_1x": ppl,
            "nope_ppl_1x": bar if nope_ppl else None,
            "fraction": None if stalled else s["fraction"],
            "octaves": None if stalled else s["octaves"],
            "untrained": f"1x perplexity {ppl} not below NoPE's {bar:.3f}" if stalled else None,
        }
    d = cfg.model.d_model
    pos = torch.linspace(0, 1, context, dtype=torch.float64)[:, None]
    smooth = torch.cat([pos, pos**2, torch.exp(-3 * pos)], 1) @ torch.randn(
        3, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    refs = {
        "sinusoidal": sinusoid_like(sinusoidal_table(torch.arange(context), d)),
        "smooth, one scale (3 curves mixed)": sinusoid_like(smooth),
        "noise": sinusoid_like(torch.randn(context, d, generator=torch.Generator().manual_seed(0))),
    }
    out = {"config": args.config, "context": context, "d_model": d, "draws": draws, "references": refs}
    atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")
    lines = [
        "| table | seed | 1x perplexity | sinusoid-like share of dimensions | their spread, octaves |",
        "|---|---|---|---|---|",
    ]
    for seed, r in draws.items():
        frac = "untrained" if r["fraction"] is None else f"{r['fraction']:.3f}"
        octv = "" if r["octaves"] is None else f"{r['octaves']:.2f}"
        ppl = "no record" if r["ppl_1x"] is None else f"{r['ppl_1x']:.3f}"
        lines.append(f"| learned | {seed} | {ppl} | {frac} | {octv} |")
    for name, r in refs.items():
        lines.append(f"| {name} | | | {r['fraction']:.3f} | {r['octaves']:.2f} |")
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
