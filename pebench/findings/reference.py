"""Your run against the committed reference, in your run's training precision: for each cell, your value, the
reference's value for the same seed, the reference's seeds (mean and 95% interval) and the range one new seed is
expected in (a 95% prediction interval over the reference seeds, m ± t * s * sqrt(1 + 1/n)), so a run on another
CPU can tell a correct reproduction from a broken one."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..errors import PebenchError
from ..stats import mean_ci

DEFAULT_REFERENCE = Path("results/reference")


def prediction_interval(values: list[float]) -> tuple[float, float] | None:
    """Where one more seed is expected, 95%: m ± t(n-1) * s * sqrt(1 + 1/n); None below two seeds."""
    if len(values) < 2:
        return None
    m, ci = mean_ci(values)  # ci = t s / sqrt(n), so t s sqrt(1 + 1/n) = ci sqrt(n + 1)
    h = ci * math.sqrt(len(values) + 1)
    return m - h, m + h


def _cells(df: pd.DataFrame, metric: str, split: str, protocol: str) -> dict:
    from ..tasks import metric as find_metric

    if df.empty:  # a folder without records: nothing to compare (the caller says so in one line)
        return {}
    df = df[
        (df["task"] == find_metric(metric).task)
        & (df["split"] == split)
        & (df["protocol"] == protocol)
        & (df["status"] == "ok")
    ]
    out: dict = {}
    for lab, L, seed, prec, v in zip(df["label"], df["length"], df["seed"], df["precision"], df[metric]):
        if v is not None and not pd.isna(v):
            out.setdefault((lab, int(L), prec), {})[int(seed)] = float(v)
    return out


def compare_runs(
    yours: pd.DataFrame, ref: pd.DataFrame, metric: str = "ppl", split: str = "validation", protocol: str = "nonoverlap"
) -> pd.DataFrame:
    """One row per cell of your run: yours, reference (same seed), reference mean ± ci (n), expected range,
    and whether your value lies inside it."""
    mine, theirs = _cells(yours, metric, split, protocol), _cells(ref, metric, split, protocol)
    if not theirs:
        raise PebenchError(f"no {metric} records on the {split} split ({protocol}) in the reference")
    if not mine:
        raise PebenchError(f"no {metric} records on the {split} split ({protocol}) in your results")
    rows = []
    for (lab, L, prec), seeds in sorted(mine.items(), key=lambda kv: kv[0]):
        ref_seeds = theirs.get((lab, L, prec), {})  # the reference's draws in your run's training precision
        for seed, v in sorted(seeds.items()):
            m, ci = mean_ci(list(ref_seeds.values())) if ref_seeds else (None, None)
            pi = prediction_interval(list(ref_seeds.values()))
            rows.append(
                {
                    "label": lab,
                    "length": L,
                    "seed": seed,
                    "precision": prec,
                    "yours": v,
                    "ref_same_seed": ref_seeds.get(seed),
                    "ref_mean": m,
                    "ref_ci95": ci,
                    "ref_seeds": len(ref_seeds),
                    "expected_lo": pi[0] if pi else None,
                    "expected_hi": pi[1] if pi else None,
                    "verdict": _verdict(v, pi),
                }
            )
    return pd.DataFrame(rows)


def _verdict(v: float, pi) -> str:
    if pi is None:
        return "no reference"
    return "inside" if pi[0] <= v <= pi[1] else ("better" if v < pi[0] else "worse") + " than expected"


def summary(df: pd.DataFrame) -> str:
    n_in = int((df["verdict"] == "inside").sum())
    n_ref = int((df["verdict"] != "no reference").sum())
    return (
        f"{n_in} of {n_ref} cells inside the range one new seed is expected in (95% prediction interval over "
        f"the reference seeds); a few outside is expected of 95% intervals, many is not"
    )
