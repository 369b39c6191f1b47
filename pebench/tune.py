"""`pebench tune`: each scheme's learning rate, chosen by 1x validation loss over a grid, written as a config
overlay (``train.lr_by_scheme``) that `train --overlay` and `run --overlay` read.

The grid's runs and records live in ``RESULTS/tune/`` (a results folder of their own), so they never mix
with the benchmark's runs in a report. Tuning reads the validation split only; final numbers come from the
test split (`pebench run --final`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import yaml

from .config import Config
from .errors import TrainingDiverged
from .fsutil import atomic_write_text
from .results import ResultsDir

OVERLAY = "tuned.yaml"


@dataclass
class TuneResult:
    losses: dict  # (scheme, lr) -> 1x validation loss, None where training diverged
    best: dict  # scheme -> lr
    overlay: Path
    table: Path


def pick_best(losses: dict) -> dict:
    """Per scheme, the learning rate with the lowest loss; diverged runs (None, NaN) never win; a tie goes to
    the smaller learning rate. A scheme whose every run diverged is left out."""
    best: dict = {}
    for (scheme, lr), loss in sorted(losses.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if loss is None or not math.isfinite(loss):
            continue
        if scheme not in best or loss < losses[(scheme, best[scheme])]:
            best[scheme] = lr
    return best


def grid_run_name(scheme: str, config_name: str, lr: float, seed: int) -> str:
    return f"{scheme}-{config_name}-lr{lr:g}-s{seed}"


def _one(base: Config, tr: ResultsDir, scheme: str, lr: float, device: str) -> Optional[float]:
    from .evaluate import evaluate_run
    from .train import train

    cfg = replace(base, model=replace(base.model, pe=scheme),
                  train=replace(base.train, lr=lr, lr_by_scheme={})).validate()
    name = grid_run_name(scheme, base.name, lr, cfg.train.seed)
    try:
        train(cfg, tr, name, device=device, resume=True)
    except TrainingDiverged:
        return None
    (rec,) = evaluate_run(tr, name, [cfg.model.context], device=device, skip_existing=True)
    return rec["loss"]


def tune(base: Config, schemes: list[str], lrs: list[float], results: ResultsDir, device: str = "auto",
         on_result: Callable[[str, float, Optional[float]], None] = lambda s, lr, loss: None) -> TuneResult:
    """Train every (scheme, learning rate) of the grid (resuming, skipping what is done), score each at 1x on
    validation, and write the overlay and a table into ``results/tune/``."""
    tr = ResultsDir(results.root / "tune")
    tr.ensure_writable()
    losses = {}
    for scheme in schemes:
        for lr in lrs:
            losses[(scheme, lr)] = _one(base, tr, scheme, lr, device)
            on_result(scheme, lr, losses[(scheme, lr)])
    best = pick_best(losses)
    overlay = tr.root / OVERLAY
    header = (f"# Written by `pebench tune` from config {base.name!r} ({base.train.steps} steps, seed "
              f"{base.train.seed}): per scheme, the learning rate of {', '.join(f'{x:g}' for x in lrs)} with the "
              "lowest 1x validation loss.\n# Use: pebench run --overlay " + str(overlay) + "\n")
    atomic_write_text(overlay, header + yaml.safe_dump({"train": {"lr_by_scheme": best}}, sort_keys=True))
    table = tr.root / "tune.md"
    atomic_write_text(table, grid_markdown(losses, best, lrs))
    return TuneResult(losses, best, overlay, table)


def grid_markdown(losses: dict, best: dict, lrs: list[float]) -> str:
    """Perplexity at 1x (validation) per scheme and learning rate, the best in bold; a best value at the edge
    of the grid is flagged, since the optimum may lie beyond it."""
    lines = ["| scheme | " + " | ".join(f"lr {x:g}" for x in lrs) + " | best | note |",
             "|---|" + "---|" * (len(lrs) + 2)]
    for scheme in dict.fromkeys(s for s, _ in losses):
        cells = []
        for lr in lrs:
            loss = losses.get((scheme, lr))
            c = "diverged" if loss is None or not math.isfinite(loss) else f"{math.exp(loss):.3f}"
            cells.append(f"**{c}**" if best.get(scheme) == lr else c)
        b = best.get(scheme)
        note = "" if b is None or min(lrs) < b < max(lrs) else "best at the grid's edge: widen the grid"
        lines.append(f"| {scheme} | " + " | ".join(cells) + f" | {'-' if b is None else f'{b:g}'} | {note} |")
    return "\n".join(lines) + "\n"
