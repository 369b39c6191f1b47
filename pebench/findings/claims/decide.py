"""Deciding: each claim from its cells by its rule (a prediction by its test), a set's claims together (the audit,
the order proof, the family's adjustment) and its scoreboard."""

from __future__ import annotations

from pathlib import Path

from ...results import CLAIMS_FILE
from ...util.errors import UsageError
from ..rules import Cell, decide, expand, held_draws
from .cells import Evidence
from .order import prove_order, refuse, settle, withdraw
from .spec import Verdict, load_claims


def check_claim(ev: Evidence, claim: dict) -> Verdict:
    """Every expansion of a claim must hold; the verdict keeps each compared cell and the deciding numbers."""
    if claim.get("kind") == "prediction" and "file" not in claim["a"] and ev.df.empty:
        return Verdict(
            claim, False, [], f"pending: 0 of {claim['draws']} fresh draws in (no records yet)", pending=True
        )
    a_specs = expand(claim["a"])
    zipped = expand(claim["b"]) if claim.get("zip") else None
    if zipped is not None and len(zipped) != len(a_specs):
        raise UsageError(f"claim {claim['id']}: zip needs as many b cells as a cells ({len(zipped)} vs {len(a_specs)})")
    pairs = []
    for i, a_spec in enumerate(a_specs):
        b_spec = None
        if claim.get("b") is not None:
            b_spec = paired_spec(claim["b"], a_spec, claim["b_inherits"])
        for b_one in [zipped[i]] if zipped else expand(b_spec) if b_spec else [None]:
            pairs.append((ev.cell(a_spec), ev.cell(b_one) if b_one else None))
    cells = [c for a, b in pairs for c in ([a] + ([b] if b else []))]
    if claim.get("kind") == "prediction":
        return _predict(claim, pairs, cells)
    if claim.get("awaits") and (empty := [c.name for c in cells if _no_records(c)]):
        return Verdict(
            claim,
            False,
            cells,
            f"pending: registered {claim['registered']}; no records yet for {empty[0]}; awaits {claim['awaits']}",
            pending=True,
        )
    why, held = [], True
    for a, b in pairs:
        ok, reason = decide(claim, a, b)
        held &= ok
        why.append(f"{'ok' if ok else 'FAILS'}: {a.text()}" + (f" vs {b.text()}" if b else "") + f"; {reason}")
    return Verdict(claim, held, cells, "\n".join(why), observed=observed_count(claim, pairs))


def _predict(claim: dict, pairs: list, cells: list[Cell]) -> Verdict:
    """A prediction's test on each comparison (pending until its fresh draws are in); held is settled later, on
    the set's adjusted p-values (``check_set``)."""
    from ..power import test

    want = int(claim["draws"])
    undefined = claim["relation"] == "undefined"  # its draws are the records that say so
    if short := [c for c in cells if len(c.values) + (c.undefined if undefined else 0) < want]:
        c = short[0]
        have = len(c.values) + (c.undefined if undefined else 0)
        return Verdict(claim, False, cells, f"pending: {have} of {want} fresh draws in for {c.name}", pending=True)
    if claim["rule"] == "point":
        why, held = [], True
        for a, b in pairs:
            ok, reason = decide(claim, a, b)
            held &= ok
            why.append(f"{'ok' if ok else 'FAILS'}: {a.text()}; {reason}")
        return Verdict(claim, held, cells, "\n".join(why))
    tests, why = [], []
    for a, b in pairs:
        try:
            t = test(claim, a, b)
        except ValueError as e:
            raise UsageError(f"claim {claim['id']}: {e}") from e
        tests.append(t)
        why.append(f"{a.text()}" + (f" vs {b.text()}" if b else "") + f"; {t.text()}")
    p = max(t.p for t in tests)
    return Verdict(claim, False, cells, "\n".join(why), p=p)


def observed_count(claim: dict, pairs: list) -> str:
    """How many draws show an observation's relation, each draw on its own (the smallest count over its
    comparisons): 'lower in 3 of 3 draws'; under the rule ``seeds`` counted as that rule counts (by a draw's trial
    intervals where it has them), so the line and the rule's count agree. Empty where the cells hold no draws (a
    table's value)."""
    rel = claim["relation"]
    if rel == "undefined" or (rel == "overlap" and claim.get("b") is None):
        return ""
    if claim["rule"] == "seeds" and rel != "overlap":
        counted = [held_draws(claim, a, b) for a, b in pairs]
        if not counted or any(not draws for draws, _ in counted):
            return ""
        draws, held = min(counted, key=lambda c: len(c[1]) / len(c[0]))
        return f"{rel} in {len(held)} of {len(draws)} draws"
    if rel == "overlap":  # "not told apart": the direction the draws lean, and that the level does not show it
        counts = []
        for a, b in pairs:
            draws = sorted(set(a.values) & set(b.values))
            if not draws:
                return ""
            counts.append((sum(a.values[d] < b.values[d] for d in draws), len(draws)))
        k, n = max(counts, key=lambda c: abs(c[0] / c[1] - 0.5))
        return f"a lower in {k} of {n} draws, not shown at 95%"
    worst = None
    for a, b in pairs:
        draws = sorted(set(a.values) & set(b.values)) if b is not None else sorted(a.values)
        if not draws or (b is not None and not b.values):
            return ""
        k = 0
        for d in draws:
            x, y = a.values[d], (b.values[d] if b is not None else float(claim.get("value", 0)))
            k += {
                "lower": x < y,
                "below": x < y,
                "higher": x > y,
                "above": x > y,
                "flat": x > 0 and y > 0 and max(x / y, y / x) <= float(claim.get("within", 1)),
            }[rel]
        if worst is None or k / len(draws) < worst[0] / worst[1]:
            worst = (k, len(draws))
    return f"{rel} in {worst[0]} of {worst[1]} draws" if worst else ""


def _no_records(c: Cell) -> bool:
    return not c.values and c.mean is None and not c.undefined


def paired_spec(b: dict, a: dict, inherited: list[str]) -> dict:
    """b with the fields it took from a set to this expansion of a (so a list in a pairs element by element)."""
    out = {**b, **{k: a[k] for k in inherited if "." not in k and k in a}}
    keys = [k.split(".", 1)[1] for k in inherited if k.startswith("where.")]
    if keys:
        out["where"] = {**b["where"], **{k: a["where"][k] for k in keys}}
    return out


def check_set(root: Path, df=None) -> list[Verdict]:
    """Every claim of one result set, decided (from ``df``, its records frame, where already read): the audit's
    refusals, each prediction's order proved from git, and the predictions' p-values adjusted as one family."""
    from ..audit import audit
    from ..registration import deleted_predictions, repo_root

    path = Path(root) / CLAIMS_FILE
    ev = Evidence(root, df)
    claims = load_claims(path)
    verdicts = audit(claims, ev, [check_claim(ev, c) for c in claims])
    root = str(repo_root(str(path.resolve().parent)))
    decided = [settle(v) for v in adjust([withdraw(v, root) for v in prove_order(path, verdicts)])]
    stays = "a registered prediction stays on its page"
    gone = [
        refuse(
            Verdict({"rule": "?", "text": "", **c}, False, [], ""),
            f"registered, then deleted from {path.name} (last held at {at[:7]}): {stays}",
        )
        for c, at in deleted_predictions(path)
    ]
    return decided + gone


def adjust(verdicts: list[Verdict]) -> list[Verdict]:
    """The set's decided predictions as one family: Benjamini-Hochberg adjusted p-values, confirmed below
    ``ALPHA``. While any prediction of the family is pending, the adjustment is not final (the family it adjusts
    over is not all in, and each pending one could change every other's adjusted p): a decided prediction stays
    pending too, its numbers and the verdict so far shown as provisional."""
    from dataclasses import replace

    from ...util.stats import bh_adjust
    from ..power import ALPHA

    live = [
        i
        for i, v in enumerate(verdicts)
        if v.kind == "prediction" and v.p is not None and v.state not in ("refused", "withdrawn")
    ]
    idx = [i for i in live if not verdicts[i].pending]
    waiting = sum(v.kind == "prediction" and v.state == "pending" for v in verdicts)
    adjusted = bh_adjust([verdicts[i].p for i in idx])
    out = list(verdicts)
    for i, q in zip(idx, adjusted):
        v = out[i]
        line = (
            f"Benjamini-Hochberg adjusted p={q:.2g} over {len(idx)} predictions ({'<' if q < ALPHA else '>='} {ALPHA})"
        )
        if waiting:
            so_far = "confirmed" if q < ALPHA else "failed"
            line = f"provisional: {line}, {so_far} so far; {waiting} of its family's predictions are pending"
        out[i] = replace(v, p_adj=q, held=q < ALPHA, pending=bool(waiting), why=v.why + "\n" + line)
    return out


def scoreboard(verdicts: list[Verdict]) -> str:
    """One line: the set's predictions registered, confirmed, failed, pending (refused), its properties (which hold
    by construction, never counted) and its observations."""
    preds = [v for v in verdicts if v.kind == "prediction"]
    props = [v for v in verdicts if v.kind == "property"]
    obs = [v for v in verdicts if v.kind == "observation"]
    count = {s: sum(v.state == s for v in preds) for s in ("confirmed", "failed", "pending", "refused", "withdrawn")}
    line = (
        f"predictions: {len(preds)} registered, {count['confirmed']} confirmed, {count['failed']} failed, "
        f"{count['pending']} pending"
        + (f", {count['withdrawn']} withdrawn" if count["withdrawn"] else "")
        + (f", {count['refused']} refused" if count["refused"] else "")
        + (f"; properties (true by construction, never counted as findings): {len(props)}" if props else "")
        + f"; observations (written after their data, never counted as findings): {len(obs)}"
    )
    bad = [v for v in obs + props if v.bad]
    return line + (f", {len(bad)} contradicted or refused" if bad else "")
