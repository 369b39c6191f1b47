"""What ``check`` prints and the pages show: every set's claims and scoreboard, the engines' agreement, the sets
under a folder, a verdict's line (``render_verdicts``), and the power a prediction asks for."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ...results import CLAIMS_FILE
from ...util.errors import PebenchError, UsageError
from ..rules import expand
from .cells import Evidence
from .decide import check_set, paired_spec, scoreboard
from .spec import Verdict, load_claims


def check_sets(paths: list[Path], quiet: bool, echo, warn, engines: bool = False) -> int:
    """``pebench check``: every set's scoreboard and claims through ``echo`` (``quiet``: the refused and
    contradicted ones only), every damaged record named through ``warn`` and counted; returns how many claims are
    refused or contradicted plus how many records are damaged (0: all is well)."""
    from ...results import ResultsDir
    from ..report import records_frame

    found = claim_sets(paths)
    if not found:
        raise PebenchError("no claims.yaml under " + ", ".join(str(s) for s in paths))
    every, damaged = [], 0
    for root in found:
        skipped: list = []
        df = records_frame(ResultsDir(root), skipped)  # damaged evidence is named and counted, as report does
        for path, reason in skipped:
            warn(f"warning: skipped record {path}: {reason}")
        damaged += len(skipped)
        verdicts = check_set(root, df)
        every += verdicts
        shown = [v for v in verdicts if not (quiet and not v.bad)]
        note = f"; damaged evidence: {len(skipped)} record(s) skipped" if skipped else ""
        echo(f"# {root}: {scoreboard(verdicts)}{note}" + ("\n" + render_verdicts(shown) if shown else ""))
        if engines:
            damaged += check_engines(root, verdicts, echo)
    bad = sum(v.bad for v in every)
    echo(f"all {len(found)} result sets: {scoreboard(every)}")
    if bad or damaged:
        echo(
            f"{bad} claim(s) refused or contradicted by their data"
            + (f"; {damaged} damaged record(s): a committed set's evidence must be whole" if damaged else "")
        )
    return bad + damaged


def check_engines(root: Path, verdicts: list[Verdict], echo) -> int:
    """Each prediction (and property) decided again by the engine of its registration commit; every difference not
    shown in the set's engine-changes.yaml, and every row there that no difference backs, printed and counted."""
    from .. import engines
    from ..registration import registrations

    ids = [v.id for v in verdicts if v.claim.get("kind") == "prediction" and not v.id.startswith("_")]
    regs = registrations(Path(root) / CLAIMS_FILE, ids) or {}
    commits = {i: r.commit for i, r in regs.items() if r.commit and not r.changed}
    diffs = engines.compare(Path(root), [v for v in verdicts if v.id in commits], commits)
    bad = 0
    for d in diffs:
        if d.shown:
            echo(f"[engines differ, shown] {d.id}: {d.then} by the engine at {d.commit[:7]}, {d.now} today: {d.shown}")
        else:
            bad += 1
            echo(
                f"[ENGINES DIFFER] {d.id}: {d.then} by the engine at {d.commit[:7]}, {d.now} today; show both and why "
                f"in {Path(root) / engines.ENGINE_CHANGES}" + (f"\n    {d.detail}" if d.detail else "")
            )
    for i in engines.stale_rows(Path(root), diffs):
        bad += 1
        echo(f"[STALE] {Path(root) / engines.ENGINE_CHANGES}: {i}'s row no longer matches what the engines decide")
    return bad


def claim_sets(paths: list[Path]) -> list[Path]:
    """The result sets with a claims file among ``paths`` and their subfolders (sorted)."""
    found = set()
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise UsageError(f"no such folder: {p}")
        found |= {f.parent for f in ([p / CLAIMS_FILE] if (p / CLAIMS_FILE).is_file() else [])}
        found |= {f.parent for f in p.rglob(CLAIMS_FILE)}
    return sorted(found)


MARKS = {
    "confirmed": "confirmed",
    "failed": "FAILED",
    "pending": "pending",
    "refused": "REFUSED",
    "withdrawn": "WITHDRAWN",
    "observed": "observed",
    "holds": "holds by construction",
    "contradicted": "CONTRADICTED",
}


def render_verdicts(verdicts: list[Verdict], markdown: bool = False) -> str:
    """Each claim with its state (a prediction: confirmed, failed, pending; an observation: observed, with its
    count of draws; either: refused) and its numbers (markdown bullets for the docs)."""
    out = []
    for v in verdicts:
        mark = MARKS[v.state]
        kind = f"{v.kind}, {v.claim['rule']}" if v.kind in ("prediction", "property") else v.claim["rule"]
        if v.observed:
            kind += f"; {v.observed}"
        lines = [re.sub(r"^(ok|FAILS|pending): ", "", line) for line in v.why.splitlines()]
        if markdown:
            nums = "; ".join(lines)
            out.append(f"- **{mark}** ({kind}) {v.claim['text']} <sub>`{v.id}`: {nums}{_registered(v)}</sub>")
        else:
            out.append(f"[{mark}] {v.id} ({kind}): {v.claim['text']}\n    " + "\n    ".join(lines) + _registered(v))
    return "\n".join(out) + "\n"


def _registered(v: Verdict) -> str:
    """Where a prediction was registered (its commit and day), or the day a legacy claim said it was written."""
    reg = v.claim.get("_registration")
    if reg is not None and reg.commit:
        return f"; registered {reg.short} ({reg.date}), before its records" if not v.pending else ""
    return (
        f"; said to be written {v.claim['registered']}, before its runs (not proved from git)"
        if v.claim.get("registered") and not v.pending
        else ""
    )


def power_of(root, claim_id: str, seeds: list[int], precision: Optional[str], level: float, floor: int, cap: int):
    """The power function for one prediction of a result set, from the draws in hand: its cells read at ``seeds``
    (and ``precision``; None: every precision) instead of its fresh ones, each comparison's draw count, and the
    largest (the comparison that needs the most draws decides)."""
    from ..power import power

    claims = {c["id"]: c for c in load_claims(Path(root) / CLAIMS_FILE)}
    if claim_id not in claims:
        raise UsageError(f"{root} has no claim {claim_id!r}; its predictions: {', '.join(_predictions(claims))}")
    claim = claims[claim_id]
    if claim.get("kind") != "prediction" or claim["rule"] == "point":
        raise UsageError(f"{claim_id} is not a prediction decided by a test (kind prediction, rule not point)")
    ev = Evidence(Path(root))

    def in_hand(spec: dict) -> dict:
        out = {**spec, "seeds": list(seeds)}
        if precision is None:
            out.pop("precision", None)
        else:
            out["precision"] = precision
        return out

    results = []
    for a_spec in expand(claim["a"]):
        a = ev.cell(in_hand(a_spec))
        bs = [None]
        if claim.get("b") is not None:
            bs = expand(paired_spec(claim["b"], a_spec, claim["b_inherits"]))
        for b_spec in bs:
            b = ev.cell(in_hand(b_spec)) if b_spec is not None else None
            if len(a.values) < 2 or (b is not None and len(b.values) < 2):
                raise UsageError(f"{claim_id}: fewer than 2 draws in hand for {a.name}; name --seeds that have records")
            results.append(power(claim, a, b, level, cap=cap, floor=floor))
    return max(results, key=lambda p: (p.draws, -p.power))


def _predictions(claims: dict) -> list[str]:
    return [i for i, c in claims.items() if c.get("kind") == "prediction"] or ["none"]
