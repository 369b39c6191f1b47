"""Attention fading, measured per trained model so that results/fading's predictions can be decided on it (their
analysis plan: this file as committed with them). Two measurements, each written as a JSON file that a claim reads
with ``per_draw: true`` ({"draws": {SEED: {run, precision, git_commit, ...}}}):

``aggregation``: for every finished PE-CONFIG-sSEED run (the context recipe with aggregation documents), the share
of its 1x skill above chance that a task keeps at 2x, ``clip((s_2x - c) / (s_1x - c), 0, 1)``, for retrieval
(``pairs_t1``: the passkey ranked above two one-digit variants) and aggregation (``common_t1``: the most marked of
three words), both ranked among three (chance c = 1/3), both over filler. A share is null where the 1x score is
less than 0.1 above chance (no skill to keep; the draw then decides nothing). Keys ``retrieval_2x``,
``aggregation_2x`` and the scores themselves.

``entropy``: for every finished none-CONFIG-sSEED run (NoPE), the mean attention entropy (nats; every layer and head,
``pebench analyze``'s statistic) at 16x the context under ``--logit-scale logn:gamma=G`` for G = 0, 0.5, 1, 2, and
its fall per unit of gamma over each step of the sweep: ``fall_0_05`` = (H(0) - H(0.5)) / 0.5, ``fall_05_1`` =
(H(0.5) - H(1)) / 0.5, ``fall_1_2`` = H(1) - H(2).

Usage: python scripts/fading.py aggregation WORK... --pe rope --config context-agg --seeds 63,... --out FILE.json
       python scripts/fading.py entropy WORK... --config tiny --seeds 68,... --out FILE.json [--tokens 8192]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pebench.results import finished_by_seed, training_provenance
from pebench.util.errors import UsageError
from pebench.util.fsutil import atomic_write_text
from pebench.util.parsing import parse_list

CHANCE, SKILL = 1 / 3, 0.1  # the ranked tasks' chance; the least 1x skill above it that a share is taken of
TASKS = {"retrieval": ("pairs", "pairs_t1"), "aggregation": ("common", "common_t1")}
GAMMAS = (0.0, 0.5, 1.0, 2.0)


def share(s1: float, s2: float) -> float | None:
    """The share of the 1x skill above chance kept at 2x, in [0, 1]; None without skill to keep."""
    if s1 - CHANCE < SKILL:
        return None
    return min(1.0, max(0.0, (s2 - CHANCE) / (s1 - CHANCE)))


def _scores(rd, run: str, task: str, metric: str) -> dict[int, float]:
    """length -> the metric, from the run's records of the task (no RoPE scaling)."""
    out = {}
    for rec in rd.iter_records([]):
        if rec["run"] == run and rec["task"] == task and rec["variant"] == "none" and rec["status"] == "ok":
            out[int(rec["length"])] = float(rec["metrics"][metric])
    return out


def _draw(rd, run: str) -> dict:
    """A draw's provenance: the commit its model trained at (its training log's, as records name it)."""
    return {
        "run": run,
        "precision": rd.run_precision(run),
        "git_commit": training_provenance(rd.run_dir(run))["train_commit"],
    }


def aggregation(runs: dict) -> dict:
    draws = {}
    for seed, (rd, run) in sorted(runs.items()):
        cfg, _ = rd.run_config(run)
        T = cfg.model.context
        d = _draw(rd, run)
        for kind, (task, metric) in TASKS.items():
            s = _scores(rd, run, task, metric)
            if T not in s or 2 * T not in s:
                raise SystemExit(f"error: {run} has no {task} record at {T} and {2 * T} tokens")
            d[f"{kind}_1x"], d[f"{kind}_2x_score"] = s[T], s[2 * T]
            d[f"{kind}_2x"] = share(s[T], s[2 * T])
        draws[str(seed)] = d
    return draws


def entropy(runs: dict, tokens: int) -> dict:
    import numpy as np

    from pebench.analysis.options import AnalyzeOptions
    from pebench.analysis.run import analyze_run

    draws = {}
    for seed, (rd, run) in sorted(runs.items()):
        cfg, _ = rd.run_config(run)
        L = 16 * cfg.model.context
        d, H = _draw(rd, run), {}
        for g in GAMMAS:
            opts = AnalyzeOptions(lengths=[L], tokens=tokens, device="cpu", logit_scale=f"logn:gamma={g:g}")
            H[g] = float(np.mean(analyze_run(rd, run, opts)["stats"][str(L)]["entropy"]))
            d[f"entropy_{g:g}"] = H[g]
        d["fall_0_05"] = (H[0.0] - H[0.5]) / 0.5
        d["fall_05_1"] = (H[0.5] - H[1.0]) / 0.5
        d["fall_1_2"] = H[1.0] - H[2.0]
        draws[str(seed)] = d
    return draws


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("aggregation", "entropy"))
    ap.add_argument("work", nargs="+", type=Path)
    ap.add_argument("--pe", default="none")
    ap.add_argument("--config", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    try:
        seeds = parse_list(a.seeds, "--seeds", int, lo=0)
    except UsageError as e:  # one line, no traceback
        raise SystemExit(f"error: {e}") from None
    pe = "none" if a.what == "entropy" else a.pe
    runs = finished_by_seed(a.work, f"{pe}-{a.config}", seeds)
    if not runs:
        raise SystemExit(f"error: no finished {pe}-{a.config}-sSEED run for seeds {a.seeds} in {a.work}")
    draws = aggregation(runs) if a.what == "aggregation" else entropy(runs, a.tokens)
    out = {"what": a.what, "pe": pe, "config": a.config, "draws": draws}
    atomic_write_text(a.out, json.dumps(out, indent=1) + "\n")
    for seed, d in draws.items():
        print(seed, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items() if k != "git_commit"})


if __name__ == "__main__":
    main()
