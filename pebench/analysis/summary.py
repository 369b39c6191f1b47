"""Numbers -> tables and sentences. Every sentence is built from measured values (nothing canned), and a verdict
word only appears when the numbers it compares say so."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd

from .attention import entropy_ceiling, head_means


def run_row(a: dict) -> Optional[dict]:
    """The summary of one analysed run: statistics at 1x and at its longest defined length."""
    T = a["context"]
    defined = [L for L in a["lengths"] if a["stats"].get(str(L)) is not None]
    if T not in defined or len(defined) < 2:
        return None
    L = max(defined)
    s1, sL = a["stats"][str(T)], a["stats"][str(L)]
    h1, hL = np.array(s1["entropy"]), np.array(sL["entropy"])
    ppl = a.get("ppl", {})
    p1, pL = ppl.get(str(T)), ppl.get(str(L))
    return {
        "run": a["run"],
        "label": a["label"],
        "length": L,
        "multiple": L / T,
        "entropy_1x": float(h1.mean()),
        "entropy_long": float(hL.mean()),
        "entropy_drift": float(np.abs(hL - h1).mean()),
        "far_share": head_means(sL, "far"),
        "distance_1x": head_means(s1, "distance"),
        "distance_long": head_means(sL, "distance"),
        "sink_1x": head_means(s1, "sink") if "sink" in s1 else None,  # analyses written before it have none
        "sink_long": head_means(sL, "sink") if "sink" in sL else None,
        "ppl_ratio": (pL / p1) if p1 and pL else None,
    }


def drift_table(analyses: list[dict]) -> pd.DataFrame:
    """One row per run, ranked by how much attention entropy moves from 1x to the longest length."""
    rows = [r for r in (run_row(a) for a in analyses) if r is not None]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df = df.sort_values("entropy_drift", ascending=False).reset_index(drop=True)
    df.insert(0, "rank", range(1, len(df) + 1))
    return df


STATISTICS = {  # the candidate predictors of breaking, per (run, length > 1x)
    "entropy drift (mean |dH| per head)": lambda s1, sL: float(
        np.abs(np.array(sL["entropy"]) - np.array(s1["entropy"])).mean()
    ),
    "attention share beyond the training context": lambda s1, sL: head_means(sL, "far"),
    "mean attention distance ratio": lambda s1, sL: head_means(sL, "distance") / max(head_means(s1, "distance"), 1e-9),
}


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN below 3 points or with a constant input."""
    if len(x) < 3:
        return float("nan")
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def predictors(analyses: list[dict]) -> dict:
    """Per statistic, Spearman's correlation with log(ppl at L / ppl at 1x) over every (run, length > 1x) pair
    that has both; and the number of pairs."""
    pairs = []
    for a in analyses:
        T, ppl = a["context"], a.get("ppl", {})
        s1 = a["stats"].get(str(T))
        for L in a["lengths"]:
            sL = a["stats"].get(str(L))
            if L <= T or s1 is None or sL is None or not ppl.get(str(T)) or not ppl.get(str(L)):
                continue
            pairs.append((s1, sL, math.log(ppl[str(L)] / ppl[str(T)])))
    out = {"pairs": len(pairs), "rho": {}}
    for name, fn in STATISTICS.items():
        out["rho"][name] = spearman([fn(s1, sL) for s1, sL, _ in pairs], [y for *_, y in pairs])
    return out


def has_ratio(row: dict) -> bool:
    """A perplexity ratio is known (records of both lengths exist); pandas turns a missing one into NaN."""
    r = row.get("ppl_ratio")
    return r is not None and not (isinstance(r, float) and math.isnan(r))


def attention_sentence(row: dict, context: int) -> str:
    h1, hL, L = row["entropy_1x"], row["entropy_long"], row["length"]
    move = "rises" if hL > h1 else "falls"
    s = (
        f"{row['run']}: at {L} tokens ({row['multiple']:g}x) {row['far_share']:.0%} of the attention lies on keys "
        f"farther than {context}; mean entropy {move} from {h1:.2f} to {hL:.2f} nats ({hL / h1:.2f}x; uniform "
        f"attention would give {entropy_ceiling(context):.2f} -> {entropy_ceiling(L):.2f}); mean distance "
        f"{row['distance_1x']:.1f} -> {row['distance_long']:.1f} tokens"
    )
    if has_ratio(row):
        s += f"; ppl x{row['ppl_ratio']:.2f}"
    return s + "."


def predictor_sentence(pred: dict) -> str:
    rho = {k: v for k, v in pred["rho"].items() if not math.isnan(v)}
    if not rho:
        return (
            f"Too few (run, length) pairs with perplexity records ({pred['pairs']}) to say which attention "
            "statistic tracks breaking; run `pebench eval` on these runs first."
        )
    best = max(rho, key=lambda k: rho[k])
    others = ", ".join(f"{k} {v:+.2f}" for k, v in rho.items() if k != best)
    return (
        f"Across {pred['pairs']} (run, length > 1x) pairs, the statistic whose rank best follows the rank of the "
        f"perplexity ratio is the {best} (Spearman rho {rho[best]:+.2f}; {others})."
    )


def undefined_sentence(a: dict) -> Optional[str]:
    bad = [L for L in a["lengths"] if a["stats"].get(str(L)) is None]
    if not bad:
        return None
    return (
        f"{a['run']}: undefined at {', '.join(map(str, bad))} tokens (the scheme represents no position "
        f"beyond its table); analysed at {', '.join(str(L) for L in a['lengths'] if L not in bad)} only."
    )


def table_sentence(run: str, conc: float, sinus: float, noise: float) -> str:
    nearer = "a sinusoid" if abs(conc - sinus) < abs(conc - noise) else "noise"
    return (
        f"{run}: each dimension of the position table keeps {conc:.0%} of its power in its strongest frequency "
        f"(+-1 bin); a sinusoidal table of the same shape keeps {sinus:.0%}, Gaussian noise {noise:.0%}: "
        f"nearer {nearer}."
    )


def window_sentence(run: str, windows: list, k: float, context: int, longest: int) -> str:
    ws = ", ".join("none" if w is None else str(w) for w in windows)
    inside = sum(1 for w in windows if w is not None and w < context)
    return (
        f"{run}: distance at which each head's logit term is {k:g} nats below its value at distance 0: {ws} "
        f"(none: not within {longest}); {inside} of {len(windows)} heads reach it inside the training context of "
        f"{context}."
    )


def rope_sentence(curves: dict, context: int, longest: int) -> str:
    parts = []
    for v, c in curves.items():
        parts.append(f"{v} {c[context]:.2f} -> {c[longest]:.2f}")
    return (
        f"RoPE's relative bound (Su et al.) at distance {context} -> {longest}: "
        + "; ".join(parts)
        + " (lower: more decay with distance)."
    )


def relative_sentence(run: str, norms: dict) -> str:
    k = np.array(norms["key"][0])
    return (
        f"{run}: layer 0's relative key vectors have norm {k[0]:.2f} at distance 0, {k[len(k) // 2]:.2f} at "
        f"{len(k) // 2} and {k[-1]:.2f} at the clip distance {len(k) - 1}, which every farther key shares."
    )
