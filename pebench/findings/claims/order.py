"""The order proof: a prediction decided only on records measured and trained after its registration
(``prove_order``), counted only against itself where that is not proved (``settle``), withdrawn only before its
first record (``withdraw``), refused with its reason (``refuse``)."""

from __future__ import annotations

from pathlib import Path

from ..rules import draw_name
from .cells import DIRTY, TRAINED
from .spec import Verdict


def _withdrawn(v: Verdict, why: str = "") -> Verdict:
    from dataclasses import replace

    reason = str(v.claim["withdrawn"])
    body = f"{why}\n{v.why}" if why else v.why
    return replace(v, withdrawn=reason, held=False, refused=False, pending=False, why=f"WITHDRAWN: {reason}\n{body}")


def withdraw(v: Verdict, root: str) -> Verdict:
    """A prediction whose ``withdrawn`` says why its registration cannot decide it (a baseline measured before it was
    registered; draws that will never come) is withdrawn, shown with its numbers and that reason, never counted and
    outside the family's adjustment, only where the withdrawal came before every record it reads: its first commit
    that says ``withdrawn`` is older than the earliest record's creation, and every record's commit descends from it.
    A withdrawal written after any of its data was in hand is not honoured: the prediction is decided as it falls and
    the page says so. ``withdrawn`` is the one field a registered prediction may gain (``registration``); a successor
    decides the statement under a new id."""
    from dataclasses import replace

    if v.kind != "prediction" or not v.claim.get("withdrawn") or v.refused:
        return v  # an edit, or the audit's reasons, stay refusals
    reg = v.claim.get("_registration")
    late = _late_withdrawal(v, reg, root)
    if not late:
        return _withdrawn(v, v.unproven)
    return replace(v, why=f"its withdrawal is not honoured: {late}; decided as it falls\n{v.why}")


def _late_withdrawal(v: Verdict, reg, root: str) -> str:
    """Why a prediction's withdrawal came too late ("" where it came before every record it reads)."""
    from datetime import datetime

    from ..registration import descends

    if reg is None or reg.withdrawn_commit is None:
        return "the withdrawal is not committed"
    first = min((c.first_created for c in v.cells if c.first_created), default="")
    at = reg.withdrawn_commit[:7]
    if first and datetime.fromisoformat(first) <= datetime.fromisoformat(reg.withdrawn_time):
        return f"withdrawn at {at} ({reg.withdrawn_time}), after its first record was written ({first})"
    for c in v.cells:
        for commits in c.commits.values():
            for commit in commits:
                if commit is not None and not descends(root, reg.withdrawn_commit, _sha(commit)):
                    return f"withdrawn at {at}, after a record of {c.name} {_when(commit)}"
    return ""


def settle(v: Verdict) -> Verdict:
    """A prediction whose order git cannot prove (a record it reads predates its registration, or its model trained
    before it or from a changed tree) counts only against itself: failed where its test fails, refused where it
    would be confirmed (data in hand before a prediction can never confirm it)."""
    if v.kind != "prediction" or not v.unproven or v.state in ("withdrawn", "refused", "pending"):
        return v
    if v.held:
        return refuse(v, v.unproven)
    from dataclasses import replace

    return replace(v, why=f"its order is not proved ({v.unproven}): it counts as failed, never as confirmed\n{v.why}")


def prove_order(path: Path, verdicts: list[Verdict]) -> list[Verdict]:
    """Each prediction refused unless git proves it was registered before every record it is decided on and is
    unchanged since; a pending one that is not committed yet says so."""
    from dataclasses import replace

    from ..registration import descends, registrations, repo_root

    preds = [v for v in verdicts if v.kind == "prediction"]
    if not preds:
        return verdicts
    regs = registrations(path, [v.id for v in preds])
    root = str(repo_root(str(path.resolve().parent)))
    out = []
    for v in verdicts:
        if v.kind != "prediction":
            out.append(v)
            continue
        if regs is None:
            if v.pending:
                out.append(replace(v, why=v.why + f"; its order cannot be proved: {path} is not in a git repository"))
            else:
                out.append(refuse(v, f"its order cannot be proved: {path} is not in a git repository"))
            continue
        reg = regs[v.id]
        if reg.changed:
            out.append(refuse(v, f"{'; '.join(reg.changed)} ({reg.short}); a changed prediction needs a new id"))
            continue
        v = replace(v, claim={**v.claim, "_registration": reg})
        if v.pending:
            note = "" if reg.commit else "; not registered yet: commit it before its runs start"
            out.append(replace(v, why=v.why + note))
            continue
        if reg.commit is None:
            out.append(refuse(v, "decided on records, but it is not committed: it cannot predate them"))
            continue
        late = None
        for c in v.cells:
            for draw, commits in sorted(c.commits.items(), key=str):
                for commit in sorted(commits, key=str):
                    if commit is None or commit.startswith(DIRTY) or not descends(root, reg.commit, _sha(commit)):
                        late = late or (c.name, draw, commit)
        if late:
            name, draw, commit = late
            when = "names no commit" if commit is None else _when(commit)
            late_why = f"a record of {name} ({draw_name(draw)}) {when}, not after its registration {reg.short}"
            v = replace(v, unproven=late_why)
        out.append(v)
    return out


def _sha(commit: str) -> str:
    return commit.split(":", 1)[-1]


def _when(commit: str) -> str:
    """What a late commit of a draw was: a model trained at it (from a changed tree), or a measurement."""
    if commit.startswith(DIRTY):
        return f"was trained from a changed tree at {_sha(commit)[:7]}"
    return f"was {'trained' if commit.startswith(TRAINED) else 'measured'} at {_sha(commit)[:7]}"


def refuse(v: Verdict, reason: str) -> Verdict:
    from dataclasses import replace

    return replace(v, held=False, pending=False, refused=True, why=f"REFUSED: {reason}\n{v.why}")
