"""Claims that cannot fail are refused. ``pebench check`` fails a claim, by id and reason, that:

- would hold whatever the data: its decision does not flip under the counterfactual of its relation, computed on its
  own cells (``lower``/``higher``: a and b swapped; ``flat``: a's values times the square of the allowed ratio;
  ``above``/``below``: a's values mirrored across the threshold; ``overlap``: a moved clear above b, or above the
  value its interval covers);
- compares a measurement with itself: the same cell on both sides, or a side whose records were copied from the
  other's (``provenance.measured_as``);
- repeats another claim of the set (the same cells, relation and rule);
- reads, beyond the training context, a run that did not train (``claims.untrained_runs``);
- says ``overlap`` where an interval covers the whole range of its metric ([0, 1] for a proportion): uninformative;
- reads an MFU above 100% (a peak of the wrong precision);
- is a headline claim decided over fewer than five seeds in a training precision its cells hold;
- names in its text a scheme or a length its cells do not test, or tests one its text does not name (schemes are
  spelled as the papers do, ``ALIASES``; a claim may add its own spellings with ``aliases: {label: [spelling]}``).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Optional

from .rules import Cell, decide, expand

# How a text names a row label's scheme or variant (case-insensitive, whole words). A label is named when any of
# its spellings is; a variant label also counts as naming its base scheme.
ALIASES: dict[str, tuple[str, ...]] = {
    "none": ("NoPE", "no positional encoding", "none"),
    "sinusoidal": ("sinusoidal",),
    "learned": ("learned absolute", "learned table", "learned positions", "learned"),
    "shaw": ("Shaw",),
    "t5": ("T5",),
    "rope": ("RoPE", "plain RoPE"),
    "alibi": ("ALiBi",),
    "kerple": ("KERPLE",),
    "fire": ("FIRE",),
    "xpos": ("xPos",),
    "p-rope": ("p-RoPE",),
    "sandwich": ("Sandwich",),
    "fox": ("FoX", "Forgetting Transformer"),
    "cope": ("CoPE",),
    "rope+linear": ("linear", "Position Interpolation", "PI"),
    "rope+ntk": ("NTK", "NTK-aware"),
    "rope+dynamic-ntk": ("dynamic NTK", "dynamic-NTK"),
    "rope+yarn": ("YaRN",),
    "rope+llama3": ("Llama 3", "Llama-3", "llama3"),
    "pope": ("PoPE",),
    "stick-breaking": ("stick-breaking",),
    "path": ("PaTH",),
    "irope": ("iRoPE",),
    "local-global": ("local-global", "local/global"),
    "swan": ("SWAN", "SWAN-GPT"),
    "nope-rope-alt": ("alternating NoPE/RoPE", "nope-rope-alt"),
}


def audit(claims: list[dict], ev, verdicts: list) -> list:
    """The verdicts with every refused claim failed and the refusal named first in its reason."""
    seen: dict[str, str] = {}
    out = []
    for claim, v in zip(claims, verdicts):
        reasons = []
        key = json.dumps(
            [
                expand(claim["a"]),
                claim.get("b"),
                claim["relation"],
                claim["rule"],
                claim.get("within"),
                claim.get("value"),
                claim.get("count"),
                claim.get("of"),
                claim.get("effect"),
            ],
            sort_keys=True,
            default=str,
        )
        if key in seen:
            reasons.append(f"duplicates claim {seen[key]} (the same cells, relation and rule)")
        seen.setdefault(key, claim["id"])
        if not v.pending:  # a pending claim's cells have no numbers yet: its text and its cells' names are checked
            reasons += _refusals(claim, v.cells) + _too_few_seeds(claim, v.cells)
            if claim["relation"] != "undefined":  # that a scheme cannot represent a length holds trained or not
                reasons += _untrained(v.cells)
            if v.held and not reasons and (why := cannot_fail(claim, v.cells)):
                reasons.append(why)
        reasons += lint_text(claim)
        if reasons:
            v = replace(v, held=False, pending=False, refused=True, why="REFUSED: " + "; ".join(reasons) + "\n" + v.why)
        out.append(v)
    return out


def _pairs(claim: dict, cells: list[Cell]) -> list[tuple[Cell, Optional[Cell]]]:
    if claim.get("b") is None:
        return [(c, None) for c in cells]
    return [(cells[i], cells[i + 1]) for i in range(0, len(cells) - 1, 2)]


def _refusals(claim: dict, cells: list[Cell]) -> list[str]:
    out = []
    for a, b in _pairs(claim, cells):
        if b is not None and (a.name == b.name or _label(b) in a.copy_of or _label(a) in b.copy_of):
            out.append(f"its sides are the same measurement ({a.name} / {b.name})")
        if claim["relation"] == "overlap" and any(_covers_range(c) for c in (a, b) if c is not None):
            out.append("an interval covers the metric's whole range [0, 1]: overlap says nothing")
        for c in (a, b):
            if c is not None and "mfu" in c.name.lower() and c.mean is not None:
                percent = ".md:" in c.name or ".csv:" in c.name  # a table's cell reads '61%' as 61
                if c.mean > (100 if percent else 1):
                    shown = c.mean / 100 if percent else c.mean
                    out.append(f"{c.name} = {shown:.0%}: an MFU above 100% is measured against the wrong peak")
    return sorted(set(out), key=out.index)


def _untrained(cells: list[Cell]) -> list[str]:
    """A claim that reads, beyond the training context, a draw whose run did not train."""
    for c in cells:
        if c.untrained and (c.length_multiple or 1) > 1:
            why = next(iter(c.untrained.values()))
            return [f"it reads {c.name} beyond the training context, and a run there did not train ({why})"]
    return []


MIN_SEEDS = 5  # a headline claim rests on at least this many seeds in each precision it draws on


def _too_few_seeds(claim: dict, cells: list[Cell]) -> list[str]:
    """A headline claim decided over seeds needs ``MIN_SEEDS`` of them in every training precision its cells hold."""
    if "headline" not in (claim.get("tags") or []) or claim["rule"] in ("one-seed", "point"):
        return []
    out = []
    for c in cells:
        per = {}
        for seed, precision in (k for k in c.values if isinstance(k, tuple)):
            per.setdefault(precision, set()).add(seed)
        if few := {p: len(s) for p, s in per.items() if len(s) < MIN_SEEDS}:
            out.append(f"a headline claim on {few} seeds ({c.name}; at least {MIN_SEEDS} per precision)")
    return sorted(set(out))[:1]


def _label(c: Cell) -> str:
    return c.name.split(" ")[0]


def _covers_range(c: Cell) -> bool:
    from ..eval.tasks import METRICS

    m = METRICS.get(c.metric)
    return bool(m and m.proportion and c.lo is not None and c.lo <= 0 and c.hi >= 1)


def _mapped(c: Cell, f, flips: bool = False) -> Cell:
    """The cell with every value (and interval end) through ``f``; ``flips``: f reverses order (a mirror)."""

    def iv(lo, hi):
        if lo is None:
            return lo, hi
        lo, hi = f(lo), f(hi)
        return (hi, lo) if flips else (lo, hi)

    lo, hi = iv(c.lo, c.hi)
    return replace(
        c,
        values={k: f(v) for k, v in c.values.items()},
        mean=None if c.mean is None else f(c.mean),
        lo=lo,
        hi=hi,
        trials={k: iv(*t) for k, t in c.trials.items()},
    )


def _far(a: Cell, b: Optional[Cell], value: Optional[float] = None) -> float:
    """A shift far larger than any value's distance or interval's width on these cells, and than their distance
    from the claim's threshold (``value``), so that a value moved by it crosses the threshold too."""
    nums = [x for c in (a, b) if c is not None for x in (*c.values.values(), c.mean, c.lo, c.hi) if x is not None]
    nums += [float(value)] if value is not None else []
    return 20 * (max(nums) - min(nums)) + 1e-6 * (1 + max(abs(x) for x in nums)) + 1.0


def _counterfactuals(claim: dict, a: Cell, b: Optional[Cell]) -> list[tuple[Cell, Optional[Cell]]]:
    """Data under which the claim must fail. One alternative for a relation decided once (a and b swapped; a
    scaled past the allowed ratio; a mirrored across the threshold; a moved clear above b); for a count of seeds
    (rule ``seeds``), the two extremes (the relation holding in every seed, and in none): a count that allows both
    holds for any data."""
    rel, g = claim["relation"], _far(a, b, claim.get("value"))
    up, down = _mapped(a, lambda x: x + g), _mapped(a, lambda x: x - g)
    if claim["rule"] == "seeds":
        if rel in ("lower", "below"):
            return [(down, b), (up, b)]
        if rel in ("higher", "above"):
            return [(up, b), (down, b)]
        same = replace(b, name=a.name) if b is not None else a
        return [(same, b), (_mapped(same, lambda x: x * claim["within"] ** 2) if rel == "flat" else up, b)]
    if rel in ("lower", "higher"):
        return [(b, a)]
    if rel == "flat":
        return [(_mapped(a, lambda x: x * claim["within"] ** 2), b)]
    if rel in ("above", "below"):
        v = float(claim["value"])
        return [(_mapped(a, lambda x: 2 * v - x, flips=True), b)]
    return [(up, b)]  # overlap: a moved far above b (or above the value)


def cannot_fail(claim: dict, cells: list[Cell]) -> Optional[str]:
    """Why a claim that held would hold whatever its data (None: it can fail)."""
    if claim["relation"] == "undefined":
        return None
    for a, b in _pairs(claim, cells):
        if a.mean is None or (b is not None and b.mean is None):
            continue
        alts = _counterfactuals(claim, a, b)
        if claim["rule"] == "seeds" and all(decide(claim, *alt)[0] for alt in alts):
            return "cannot fail: the counts it allows include both every seed and none"
        if claim["rule"] != "seeds" and decide(claim, *alts[0])[0]:
            return f"cannot fail: it holds under the counterfactual of {claim['relation']} too"
    return None


# Words that name a whole group of schemes: a text that uses one names each scheme of the group.
GROUP_WORDS: dict[str, tuple[str, ...]] = {
    "classic scheme": ("none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"),
    "classic schemes": ("none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"),
    "relative scheme": ("shaw", "t5", "rope", "alibi"),
    "relative schemes": ("shaw", "t5", "rope", "alibi"),
    "RoPE scalings": ("rope+linear", "rope+ntk", "rope+dynamic-ntk", "rope+yarn", "rope+llama3"),
}


def _spellings(label: str, claim: dict) -> tuple[str, ...]:
    own = tuple((claim.get("aliases") or {}).get(label, ()))
    base = label.split(" ")[0]
    groups = tuple(w for w, members in GROUP_WORDS.items() if base in members)
    return own + ALIASES.get(base, (base,)) + groups


def _named(text: str, spelling: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text, flags=re.I) is not None


def lint_text(claim: dict) -> list[str]:
    """The text names every scheme and length its record cells test, and no other scheme or length multiple."""
    specs = [s for side in ("a", "b") if claim.get(side) for s in expand(claim[side]) if "label" in s]
    if not specs:
        return []
    for s in list(specs):
        if "over" in s:
            specs.append({**s, **s["over"]})
    text, out = claim["text"], []
    labels = sorted({s["label"] for s in specs})
    if any(lab.split(" ")[0].split("+")[0] not in ALIASES for lab in labels):
        return []  # rows that are not schemes (a user's own labels): nothing to spell
    for lab in labels:
        if not any(_named(text, sp) for sp in _spellings(lab, claim)):
            out.append(f"its text does not name {lab!r}, which its cells test")
    rest = text
    tested = {sp.lower() for lab in labels for sp in _spellings(lab, claim)}
    for sp in sorted(tested, key=len, reverse=True):  # the longest spellings first: 'dynamic NTK' before 'NTK'
        rest = re.sub(rf"(?<![\w-]){re.escape(sp)}(?![\w-])", " ", rest, flags=re.I)
    bases = {x.split(" ")[0].split("+")[0] for x in labels}  # a variant's text may name its base scheme
    for lab, sps in ALIASES.items():
        if lab in labels or lab in bases:
            continue
        distinctive = [sp for sp in sps if any(ch.isupper() for ch in sp) or sp == "sinusoidal"]
        if hit := next((sp for sp in distinctive if _named(rest, sp)), None):
            out.append(f"its text names {hit!r} ({lab}), which its cells do not test")
    lengths = {str(s["length"]) for s in specs if "length" in s}
    for L in sorted(lengths):
        if not _named(text, L) and not _named(text, f"{int(L):,}" if L.isdigit() else L):
            out.append(f"its text does not name the length {L}, which its cells test")
    for m in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?x)(?![\w])", text):
        if m not in lengths:
            out.append(f"its text names the length {m}, which its cells do not test")
    return sorted(set(out), key=out.index)
