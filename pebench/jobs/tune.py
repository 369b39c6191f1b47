"""`pebench tune`: each scheme's learning rate (and, optionally, scheme options such as the sinusoidal table's
amplitude or weight decay on the learned table), chosen by 1x validation loss over a grid and written as a
config overlay (``train.lr_by_scheme``, ``model.pe_options``) that `train --overlay` and `run --overlay` read.

The grid's runs and records live in ``RESULTS/tune/`` (a results folder of their own), so they never mix
with the benchmark's runs in a report. Tuning reads the validation split only; final numbers come from the
test split (`pebench run --final`).

A grid cell is ``(scheme, lr, options)`` where ``options`` is a tuple of ``(name, value)`` pairs that differ
from the scheme's defaults (``()``: the defaults), so a cell at the default options is the same run as a plain
learning-rate cell and is trained once.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ..config import Config
from ..results import ResultsDir
from ..util.errors import TrainingDiverged, UsageError
from ..util.fsutil import atomic_write_text
from ..util.yamlio import load_yaml

OVERLAY = "tuned.yaml"


@dataclass
class TuneResult:
    losses: dict[tuple, Optional[float]]  # (scheme, lr, options) -> 1x validation loss, None where training diverged
    best: dict[str, tuple]  # scheme -> (lr, options)
    overlay: Path
    table: Path


def _finite(loss) -> bool:
    return loss is not None and math.isfinite(loss)


def pick_best(losses: dict) -> dict:
    """Per scheme, the (lr, options) cell with the lowest loss; diverged runs (None, NaN) never win; a tie goes
    to the default options, then to the smaller learning rate. A scheme whose every run diverged is left out."""
    best: dict[str, tuple] = {}
    for (scheme, lr, opts), loss in losses.items():
        if not _finite(loss):
            continue
        rank = (loss, opts != (), lr)
        if scheme not in best or rank < best[scheme][0]:
            best[scheme] = (rank, (lr, opts))
    return {s: cell for s, (_, cell) in best.items()}


def option_settings(scheme: str, grid: dict[str, list], base: Optional[dict] = None) -> list[tuple]:
    """Every combination of the scheme's own options in the grid (options of other schemes are ignored), as tuples
    of the pairs that differ from the base config's values (the scheme's defaults updated by ``base``, its
    ``pe_options``), so the combination the base config already trains is ``()``. A layer pattern tunes its
    learning rate only (its settings are part of its name: ``swan:window=16``)."""
    from ..model.patterns import is_pattern
    from ..model.pe import SCHEMES

    if is_pattern(scheme):
        return [()]
    cls = SCHEMES.get(scheme)
    defaults = {f.name: f.default for f in fields(cls.Options)} if cls.Options is not None else {}
    defaults.update({k: v for k, v in (base or {}).items() if k in defaults})
    mine = {k: v for k, v in grid.items() if k in defaults}
    settings = []
    for values in itertools.product(*mine.values()):
        cls.parse_options(dict(zip(mine, values)))  # a bad value is one line, before any training
        pairs = tuple((k, v) for k, v in zip(mine, values) if v != defaults[k])
        if pairs not in settings:
            settings.append(pairs)
    return settings


def check_option_grid(schemes: list[str], grid: dict[str, list]) -> None:
    """An option that no scheme of the grid has is a typo: one line naming the options they do have."""
    from ..model.patterns import is_pattern
    from ..model.pe import SCHEMES

    known: dict[str, list[str]] = {}
    for s in (s for s in schemes if not is_pattern(s)):
        cls = SCHEMES.get(s)
        for f in fields(cls.Options) if cls.Options is not None else ():
            known.setdefault(f.name, []).append(s)
    for name in grid:
        if name not in known:
            allowed = ", ".join(f"{k} ({'/'.join(v)})" for k, v in known.items()) or "none"
            raise UsageError(
                f"--option {name}: no scheme of {', '.join(schemes)} has an option {name!r}; their options: {allowed}"
            )


def _fmt(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)


def grid_run_name(scheme: str, config_name: str, lr: float, seed: int, opts: tuple = ()) -> str:
    extra = "".join(f"-{k}{_fmt(v)}" for k, v in opts)
    return f"{scheme}-{config_name}-lr{lr:g}{extra}-s{seed}"


def _one(base: Config, tr: ResultsDir, scheme: str, lr: float, opts: tuple, device: str) -> Optional[float]:
    """One grid cell: the run ``plan_runs`` makes of the scheme at rate ``lr`` with ``opts``, trained (resumed where
    it stopped) through ``jobs.training.train_run`` and scored at 1x; None if it diverged."""
    from ..eval.evaluate import EvalRequest, evaluate_run
    from ..util.progress import Reporter
    from .plan import plan_runs
    from .training import train_run

    pe_options = dict(base.model.pe_options)
    pe_options[scheme] = {**(pe_options.get(scheme) or {}), **dict(opts)}
    cell = replace(
        base, model=replace(base.model, pe_options=pe_options), train=replace(base.train, lr=lr, lr_by_scheme={})
    )
    ((_, cfg),) = plan_runs(cell, [scheme], [base.train.seed])
    name = grid_run_name(cfg.model.pe, base.name, lr, cfg.train.seed, opts)
    try:
        train_run(cfg, tr, name, Reporter.quiet(), device, resume=True)
    except TrainingDiverged:
        return None
    (rec,) = evaluate_run(tr, name, EvalRequest(lengths=[cfg.model.context], device=device, skip_existing=True))
    return rec["metrics"]["loss"]


def overlay_dict(best: dict) -> dict:
    """The config overlay of a tuning: every scheme's learning rate, and its options where they won."""
    out: dict = {"train": {"lr_by_scheme": {s: lr for s, (lr, _) in best.items()}}}
    options = {s: dict(opts) for s, (_, opts) in best.items() if opts}
    if options:
        out["model"] = {"pe_options": options}
    return out


def tune(
    base: Config,
    schemes: list[str],
    lrs: list[float],
    results: ResultsDir,
    device: str = "auto",
    on_result: Callable[[str, float, tuple, Optional[float]], None] = lambda s, lr, o, loss: None,
    options: Optional[dict[str, list]] = None,
    point: Optional[str] = None,
) -> TuneResult:
    """Train every (scheme, learning rate, options) cell of the grid (resuming, skipping what is done), score each
    at 1x on validation, and write the overlay and a table into ``results/tune/``. ``point``: the scale suite's
    point ``base`` is at (its overlay is then used with that point)."""
    check_option_grid(schemes, options or {})
    settings = {s: option_settings(s, options or {}, base.model.pe_options.get(s)) for s in schemes}
    tr = ResultsDir(results.root / "tune")
    tr.ensure_writable()
    losses = {}
    for scheme in schemes:
        for opts in settings[scheme]:
            for lr in lrs:
                losses[(scheme, lr, opts)] = _one(base, tr, scheme, lr, opts, device)
                on_result(scheme, lr, opts, losses[(scheme, lr, opts)])
    best = pick_best(losses)
    overlay = tr.root / OVERLAY
    header = (
        f"# Written by `pebench tune` from config {base.name!r} ({base.train.steps} steps, seed "
        f"{base.train.seed}): per scheme, the learning rate of {', '.join(f'{x:g}' for x in lrs)}"
        + (f" and the options ({describe_grid(options)})" if options else "")
        + " with the lowest 1x validation loss.\n# Use: "
        + use_overlay(overlay, point)
        + "\n"
    )
    atomic_write_text(overlay, header + yaml.safe_dump(overlay_dict(best), sort_keys=True))
    table = tr.root / "tune.md"
    atomic_write_text(table, grid_markdown(losses, best, lrs))
    return TuneResult(losses, best, overlay, table)


def use_overlay(overlay: Path, point: Optional[str] = None) -> str:
    """The command that trains with a grid's overlay: at the scale suite's point where the grid was at one."""
    where = f"--suite scale --points {point} " if point else ""
    return f"pebench run {where}--overlay {overlay}"


def describe_grid(options: dict) -> str:
    return "; ".join(f"{k} = {', '.join(_fmt(v) for v in vs)}" for k, vs in options.items())


def parse_option_grid(specs: list[str]) -> dict[str, list]:
    """``["table_scale=1,0.3", "weight_decay=false,true"]`` -> ``{"table_scale": [1, 0.3], ...}`` (values read as
    YAML scalars, so numbers and booleans come out typed)."""
    from ..util.parsing import parse_assignment, parse_list

    grid: dict[str, list] = {}
    for spec in specs:
        try:
            name, values = parse_assignment(spec, "--option")
        except UsageError:
            raise UsageError(f"--option must be NAME=V1,V2,..., got {spec!r}") from None
        if name in grid:
            raise UsageError(f"--option {name} is given twice")
        try:
            grid[name] = [load_yaml(v) for v in parse_list(values, f"--option {name}", unique=False)]
        except yaml.YAMLError:
            raise UsageError(f"--option {name}: values must be numbers, true/false or words, got {values!r}") from None
    return grid


def grid_markdown(losses: dict, best: dict, lrs: list[float]) -> str:
    """Perplexity at 1x (validation) per scheme, options and learning rate, the best in bold; a best learning rate
    at the edge of the grid is flagged, since the optimum may lie beyond it."""
    lines = [
        "| scheme | options | " + " | ".join(f"lr {x:g}" for x in lrs) + " | best | note |",
        "|---|---|" + "---|" * (len(lrs) + 2),
    ]
    for scheme, opts in dict.fromkeys((s, o) for s, _, o in losses):
        cells = []
        for lr in lrs:
            if (scheme, lr, opts) not in losses:
                cells.append("not run")
                continue
            loss = losses[(scheme, lr, opts)]
            c = f"{math.exp(loss):.3f}" if _finite(loss) else "diverged"
            cells.append(f"**{c}**" if best.get(scheme) == (lr, opts) else c)
        b = best.get(scheme)
        if b is None:
            btxt, note = "-", ""
        else:
            btxt = f"{b[0]:g}" + "".join(f", {k}={_fmt(v)}" for k, v in b[1])
            edge = b[1] == opts and not min(lrs) < b[0] < max(lrs)  # said once, on the winning row
            note = "best at the grid's edge: widen the grid" if edge else ""
        label = ", ".join(f"{k}={_fmt(v)}" for k, v in opts) or "defaults"
        lines.append(f"| {scheme} | {label} | " + " | ".join(cells) + f" | {btxt} | {note} |")
    return "\n".join(lines) + "\n"
