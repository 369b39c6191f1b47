"""The learned position table along the scale suite's axes: does it grow the survey's sinusoid-like
multi-scale structure once it trains longer or wider? For every finished ``learned`` run of the scale suite it
measures, as `pebench analyze` does (``pebench.analysis.encodings``), the table's spectral concentration: the mean
over dimensions of the share of a dimension's power in its strongest frequency (+-1 bin), about 1 for a sinusoid
and about 3 / (T / 2) for noise; and the variance share of the table's top three principal components (smooth
multi-scale curves concentrate it, noise spreads it over every component). Beside each point it gives the same
numbers for a sinusoidal table and for Gaussian noise of that point's shape (ten draws, with their interval).
Writes ``tables.md`` into the set, one row per point with the mean and 95% interval over its seeds (the claims
read it). A point with no learned run in the directories given keeps its row from the ``tables.md`` already there
(the checkpoints behind it need not be on this machine any more), so one point can be added at a time.

Usage: python scripts/scale_tables.py WORK_RESULTS... --out results/scale"""

import argparse
import re
from pathlib import Path

import torch

from pebench.analysis.encodings import learned_vs_reference, table_components, table_spectrum
from pebench.config import load_config
from pebench.jobs.suites import SCALE_POINTS
from pebench.model.checkpoint import load_run_model
from pebench.model.pe.sinusoidal import sinusoidal_table
from pebench.results import ResultsDir
from pebench.util.stats import mean_ci

ap = argparse.ArgumentParser()
ap.add_argument("work", nargs="+", type=Path)
ap.add_argument("--out", type=Path, required=True)
args = ap.parse_args()

base = load_config("tiny")
points = {p.apply(base).name: p for p in SCALE_POINTS}
found: dict[str, list] = {}
for root in args.work:
    rd = ResultsDir(root)
    for run in rd.runs_in("finished"):
        m = re.fullmatch(r"learned-(.+)-s(\d+)", run)
        if not m or m.group(1) not in points:
            continue
        cfg, _, model = load_run_model(rd, run, torch.device("cpu"))
        T = cfg.model.context
        enc = learned_vs_reference(model.pe, T)
        found.setdefault(m.group(1), []).append(
            (int(m.group(2)), enc["spectrum"]["concentration"], sum(enc["components"]["explained"]), cfg)
        )


def fmt(vals: list[float]) -> str:
    mean, half = mean_ci(vals)
    return f"{mean:.3f} ± {half:.3f} (n={len(vals)})" if len(vals) > 1 else f"{mean:.3f} (n=1)"


def kept_rows(path: Path) -> dict[str, str]:
    """The rows of an existing tables.md by point name (its first cell)."""
    if not path.exists():
        return {}
    rows = [ln for ln in path.read_text().splitlines() if ln.startswith("| ") and not ln.startswith("| point ")]
    return {ln.split("|")[1].strip(): ln for ln in rows}


kept = kept_rows(args.out / "tables.md")
lines = [
    "| point | axis | steps | d_model | context | seeds | concentration: learned | concentration: sinusoidal "
    "| concentration: noise | top-3 PCA share: learned | top-3 PCA share: sinusoidal | top-3 PCA share: noise |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for name, p in points.items():  # the suite's order
    rows = sorted(found.get(name, []), key=lambda r: r[0])
    if not rows:
        if name in kept:
            lines.append(kept[name])
        continue
    cfg = rows[0][3]
    T, d = cfg.model.context, cfg.model.d_model
    sinus = sinusoidal_table(torch.arange(T), d)
    noises = [  # ten draws of Gaussian noise of the point's shape: its numbers with their interval
        torch.randn(T, d, generator=torch.Generator().manual_seed(k), dtype=torch.float64) for k in range(10)
    ]
    lines.append(
        f"| {name} | {p.axis or 'all'} | {cfg.train.steps} | {d} | {T} | {','.join(str(r[0]) for r in rows)} "
        f"| {fmt([r[1] for r in rows])} | {table_spectrum(sinus)['concentration']:.3f} "
        f"| {fmt([table_spectrum(z)['concentration'] for z in noises])} | {fmt([r[2] for r in rows])} "
        f"| {sum(table_components(sinus)['explained']):.3f} "
        f"| {fmt([sum(table_components(z)['explained']) for z in noises])} |"
    )
args.out.mkdir(parents=True, exist_ok=True)
(args.out / "tables.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
