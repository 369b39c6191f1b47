"""The claims file: its format checked on load (cell fields, relations, rules, a prediction's test and
registration), and the verdict a claim gets (``Verdict``). The format is in the package's docstring."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from ...util.errors import UsageError
from ...util.yamlio import load_yaml
from ..rules import Cell

RELATIONS = ("lower", "higher", "flat", "overlap", "above", "below", "undefined")
RULES = ("intervals", "paired", "one-seed", "ratio", "point", "seeds")
KINDS = ("observation", "prediction")
_CELL_KEYS = {
    "label",
    "per_draw",
    "length",
    "metric",
    "split",
    "protocol",
    "seeds",
    "file",
    "row",
    "col",
    "table",
    "where",
    "task",
    "over",
    "part",
    "key",
    "precision",
    "config",
    "tau",
    "unit",
}


@dataclass
class Verdict:
    claim: dict[str, Any]
    held: bool
    cells: list[Cell]
    why: str
    pending: bool = False  # a prediction (or a claim with ``awaits``) some of whose draws are not in yet
    refused: bool = False  # it cannot be a finding as written (the audit's reasons, or its order not proved)
    p: Optional[float] = None  # a prediction's p-value (the largest over its comparisons)
    p_adj: Optional[float] = None  # adjusted over its set's predictions (Benjamini-Hochberg)
    observed: str = ""  # an observation's count: "lower in 3 of 3 draws"
    withdrawn: str = ""  # a prediction its registration cannot decide, and why (the claim's ``withdrawn``)
    unproven: str = ""  # why git cannot prove a decided prediction came before its data (it can then only fail)

    @property
    def id(self) -> str:
        return self.claim["id"]

    @property
    def kind(self) -> str:
        """observation | prediction | property: a prediction that no data could contradict (``relation:
        undefined``: a scheme that cannot represent a length says so by its construction, trained or not) is a
        property, shown apart and never counted as confirmed."""
        kind = self.claim.get("kind", "observation")
        return "property" if kind == "prediction" and self.claim.get("relation") == "undefined" else kind

    @property
    def state(self) -> str:
        """withdrawn | refused | pending | confirmed | failed (a prediction) | holds | contradicted (a property) |
        observed | contradicted (an observation)."""
        if self.withdrawn:
            return "withdrawn"
        if self.refused:
            return "refused"
        if self.pending:
            return "pending"
        if self.kind == "prediction":
            return "confirmed" if self.held else "failed"
        if self.kind == "property":
            return "holds" if self.held else "contradicted"
        return "observed" if self.held else "contradicted"

    @property
    def bad(self) -> bool:
        """What makes ``check`` fail: a refused claim, or an observation its data no longer shows."""
        return self.state in ("refused", "contradicted")


# ---- loading -------------------------------------------------------------------------------------------------


def load_claims(path: Path) -> list[dict]:
    """The claims of one file, defaults merged in and every field checked (a bad file is one clear line)."""
    try:
        data = load_yaml(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"cannot read claims file {path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("claims") or [], list):
        raise UsageError(f"{path}: a claims file is a mapping with `claims:` (a list) and optional `defaults:`")
    defaults, out = data.get("defaults") or {}, []
    for i, c in enumerate(data.get("claims") or []):
        out.append(_checked_claim(c, defaults, f"{path}: claim {i + 1}"))
    ids = [c["id"] for c in out]
    if dup := sorted({x for x in ids if ids.count(x) > 1}):
        raise UsageError(f"{path}: claim ids must be unique; repeated: {', '.join(dup)}")
    return out


def _checked_claim(c: dict, defaults: dict, where: str) -> dict:
    if not isinstance(c, dict) or not c.get("id") or not c.get("text"):
        raise UsageError(f"{where}: needs an id and a text")
    where = f"{where} ({c['id']})"
    rel, rule = c.get("relation"), c.get("rule")
    kind = c.get("kind", "observation")
    if kind not in KINDS:
        raise UsageError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "prediction":
        return _checked_prediction(c, defaults, where)
    if (aliases := c.get("aliases")) is not None and not (
        isinstance(aliases, dict) and all(isinstance(v, list) for v in aliases.values())
    ):
        raise UsageError(f"{where}: aliases must map a row label to a list of its spellings")
    if rel not in RELATIONS:
        raise UsageError(f"{where}: relation {rel!r} is not one of {', '.join(RELATIONS)}")
    if rule not in RULES:
        raise UsageError(f"{where}: rule {rule!r} is not one of {', '.join(RULES)}")
    if rule == "one-seed" and "one seed" not in c["text"]:
        raise UsageError(f"{where}: a one-seed claim must say 'one seed' in its text")
    if rule == "seeds":
        _check_seed_count(c, where)
    _check_registration(c, where)
    if rel in ("above", "below") and "value" not in c:
        raise UsageError(f"{where}: relation {rel} needs a value")
    covers_value = rel == "overlap" and "b" not in c and "value" in c  # a's interval covers the value
    if covers_value and rule != "intervals":
        raise UsageError(f"{where}: overlap with a value (a's interval covers it) needs rule intervals")
    if rel not in ("above", "below", "undefined") and "b" not in c and not covers_value:
        raise UsageError(f"{where}: relation {rel} compares a with b (or, for overlap, a value); b is missing")
    if rel == "flat" and not (isinstance(c.get("within"), (int, float)) and c["within"] >= 1):
        raise UsageError(f"{where}: relation flat needs within >= 1 (the largest ratio of the means)")
    return _with_sides(c, defaults, where)


def _with_sides(c: dict, defaults: dict, where: str) -> dict:
    """The claim with its cell fields checked, the file's defaults in a, and b completed from a (what it inherits
    named)."""
    for side in ("a", "b"):
        if side in c and (unknown := set(c[side]) - _CELL_KEYS):
            raise UsageError(f"{where}: unknown cell fields {sorted(unknown)}; allowed: {sorted(_CELL_KEYS)}")
    a = {**defaults, **c["a"]}
    if "b" not in c:
        return {**c, "a": a, "b": None, "b_inherits": []}
    b = {**a, **c["b"], "where": {**(a.get("where") or {}), **(c["b"].get("where") or {})}}
    inherited = sorted(set(a) - set(c["b"]) - {"where"}) + [
        f"where.{k}" for k in (a.get("where") or {}) if k not in (c["b"].get("where") or {})
    ]
    return {
        **c,
        "a": a,
        "b": b if b["where"] else {k: v for k, v in b.items() if k != "where"},
        "b_inherits": inherited,
    }


_PREDICTION_RELATIONS = {
    "paired": ("lower", "higher"),
    "welch": ("lower", "higher"),
    "equivalence": ("flat",),
    "one-sample": ("above", "below"),
    "point": ("undefined",),
}


def _checked_prediction(c: dict, defaults: dict, where: str) -> dict:
    """A prediction: a test (its rule) fit for its relation, the fresh draws it is decided on, its effect."""
    from ..power import PREDICTION_RULES, effect_of

    rel, rule = c.get("relation"), c.get("rule")
    if rule not in PREDICTION_RULES:
        raise UsageError(f"{where}: a prediction's rule {rule!r} is not one of {', '.join(PREDICTION_RULES)}")
    if rel not in _PREDICTION_RELATIONS[rule]:
        raise UsageError(
            f"{where}: rule {rule} decides relation {' or '.join(_PREDICTION_RELATIONS[rule])}, not {rel!r}"
        )
    if "awaits" in c or "registered" in c:
        raise UsageError(f"{where}: a prediction is registered by its commit (git proves it); drop awaits/registered")
    if "withdrawn" in c and not (isinstance(c["withdrawn"], str) and c["withdrawn"].strip()):
        raise UsageError(f"{where}: withdrawn says why the prediction cannot be decided as registered (a sentence)")
    draws = c.get("draws")
    if not (isinstance(draws, int) and not isinstance(draws, bool) and draws >= (1 if rule == "point" else 2)):
        raise UsageError(f"{where}: a prediction needs draws, the number of fresh draws it is decided on (>= 2)")
    try:
        effect_of(c)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{where}: effect must be a number or a percentage such as '5%' ({e})") from e
    if rel == "flat" and not (isinstance(c.get("within"), (int, float)) and c["within"] > 1):
        raise UsageError(f"{where}: an equivalence needs within > 1 (the largest ratio that is still flat)")
    if rel in ("above", "below") and "value" not in c:
        raise UsageError(f"{where}: relation {rel} needs a value")
    if rule in ("paired", "welch", "equivalence") and "b" not in c:
        raise UsageError(f"{where}: rule {rule} compares a with b; b is missing")
    return _with_sides(c, defaults, where)


def _check_registration(c: dict, where: str) -> None:
    """A claim written before its runs names them (``awaits``: the command or runs that decide it) and the day it
    was written (``registered``: YYYY-MM-DD); git keeps the proof of the order."""
    import datetime

    if "awaits" not in c and "registered" not in c:
        return
    day = c.get("registered")
    if isinstance(day, str):
        try:
            day = datetime.date.fromisoformat(day)
        except ValueError:
            day = None
    if not (isinstance(c.get("awaits"), str) and c["awaits"].strip() and isinstance(day, datetime.date)):
        raise UsageError(
            f"{where}: a claim registered before its runs needs awaits (the runs) and registered (YYYY-MM-DD)"
        )
    c["registered"] = day.isoformat()


def _check_seed_count(c: dict, where: str) -> None:
    of, count = c.get("of"), c.get("count")
    counts = count if isinstance(count, list) else [count]
    if not (isinstance(of, int) and of >= 1 and counts and all(isinstance(k, int) and 0 <= k <= of for k in counts)):
        raise UsageError(
            f"{where}: rule seeds needs of (the number of seeds, >= 1) and count (a number of them, "
            f"or a list of numbers, each 0..of)"
        )
    if f"of {of} seeds" not in c["text"] and f"of {of} draws" not in c["text"]:  # a draw: a seed in one precision
        raise UsageError(
            f"{where}: a seeds claim must say how many of how many in its text ('of {of} seeds' or 'of {of} draws')"
        )


# ---- cells from evidence -------------------------------------------------------------------------------------


def parse_length(v, context: int) -> int:
    if isinstance(v, str) and v.endswith("x"):
        return int(round(float(v[:-1]) * context))
    return int(v)
