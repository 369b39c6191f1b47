"""Your run against the committed reference, in your run's training precision: for each cell, your value, the
reference's value for the same seed, the reference's seeds (mean and 95% interval) and the range one new seed is
expected in (a 95% prediction interval over the reference seeds, m ± t * s * sqrt(1 + 1/n)), so a run on another
CPU can tell a correct reproduction from a broken one."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..util.errors import PebenchError
from ..util.stats import mean_ci

DEFAULT_REFERENCE = Path("results/reference")


def prediction_interval(values: list[float]) -> tuple[float, float] | None:
    """Where one more seed is expected, 95%: m ± t(n-1) * s * sqrt(1 + 1/n); None below two seeds."""
    if len(values) < 2:
        return None
    m, ci = mean_ci(values)  # ci = t s / sqrt(n), so t s sqrt(1 + 1/n) = ci sqrt(n + 1)
    h = ci * math.sqrt(len(values) + 1)
    return m - h, m + h


def _records(df: pd.DataFrame, metric: str, split: str, protocol: str) -> pd.DataFrame:
    """The records a comparison reads: the metric's task on one split and protocol."""
    from ..eval.tasks import metric as find_metric

    if df.empty:  # a folder without records: nothing to compare (the caller says so in one line)
        return df
    return df[(df["task"] == find_metric(metric).task) & (df["split"] == split) & (df["protocol"] == protocol)]


def _settings(df: pd.DataFrame) -> dict:
    """Per (label, length): what makes two cells comparable: the corpus, the steps trained, the config's name (its
    hash holds the seed) and the tokens scored (the evaluation stream), each as the set of values its records hold."""
    out: dict = {}
    if df.empty:
        return out
    corpora = df["corpus"] if "corpus" in df else [None] * len(df)
    for lab, L, steps, h, d, c in zip(df["label"], df["length"], df["steps"], df["config"], df["details"], corpora):
        s = out.setdefault((lab, int(L)), {"steps": set(), "config": set(), "tokens": set(), "corpus": set()})
        s["steps"].add(_count(steps))
        s["config"].add(None if pd.isna(h) else h)
        s["tokens"].add(_count((d or {}).get("tokens_scored")))
        s["corpus"].add("sotu" if c is None or pd.isna(c) else c)  # records from before the corpus was named: sotu
    return out


def _count(v):
    """A count as an int (pandas makes a column with gaps float), None where a record has none."""
    return None if v is None or pd.isna(v) else int(v)


def comparable(mine: dict, theirs: dict) -> str:
    """Why a cell of yours cannot be judged against the reference's ('' when it can): a corpus, training length,
    config or evaluation stream that none of the reference's draws of that cell had."""
    why = []
    if not mine.get("corpus", set()) <= theirs.get("corpus", set()):
        return f"measured on corpus {_one(mine['corpus'])}, the reference on {_one(theirs['corpus'])}"
    if not mine["steps"] <= theirs["steps"]:
        why.append(f"trained {_one(mine['steps'])} steps, the reference {_one(theirs['steps'])}")
    elif not mine["config"] <= theirs["config"]:
        why.append(f"config {_one(mine['config'])}, the reference {_one(theirs['config'])}")
    if not mine["tokens"] <= theirs["tokens"]:
        why.append(f"scored {_one(mine['tokens'])} tokens, the reference {_one(theirs['tokens'])} (--max-tokens)")
    return "; ".join(why)


def _one(values: set) -> str:
    return "/".join(sorted(f"{v:,}" if isinstance(v, int) else str(v) for v in values))


def _cells(df: pd.DataFrame, metric: str) -> dict:
    if df.empty:
        return {}
    df = df[df["status"] == "ok"]
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
    yours, ref = _records(yours, metric, split, protocol), _records(ref, metric, split, protocol)
    mine, theirs = _cells(yours, metric), _cells(ref, metric)
    if not theirs:
        raise PebenchError(f"no {metric} records on the {split} split ({protocol}) in the reference")
    if not mine:
        raise PebenchError(f"no {metric} records on the {split} split ({protocol}) in your results")
    rows = []
    mine_set, theirs_set = _settings(yours), _settings(ref)
    for (lab, L, prec), seeds in sorted(mine.items(), key=lambda kv: kv[0]):
        ref_seeds = theirs.get((lab, L, prec), {})  # the reference's draws in your run's training precision
        apart = comparable(mine_set[(lab, L)], theirs_set[(lab, L)]) if (lab, L) in theirs_set else ""
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
                    "verdict": f"not comparable: {apart}" if apart else _verdict(v, pi),
                }
            )
    return pd.DataFrame(rows)


def _verdict(v: float, pi) -> str:
    if pi is None:
        return "no reference"
    return "inside" if pi[0] <= v <= pi[1] else ("better" if v < pi[0] else "worse") + " than expected"


def summary(df: pd.DataFrame) -> str:
    apart = df["verdict"].str.startswith("not comparable")
    n_in = int((df["verdict"] == "inside").sum())
    n_ref = int(((df["verdict"] != "no reference") & ~apart).sum())
    out = (
        f"{n_in} of {n_ref} cells inside the range one new seed is expected in (95% prediction interval over "
        f"the reference seeds); a few outside is expected of 95% intervals, many is not"
    )
    if apart.any():
        first = df.loc[apart, "verdict"].iloc[0].removeprefix("not comparable: ")
        out += f"\n{int(apart.sum())} cells not comparable with the reference and not judged ({first})"
    return out
