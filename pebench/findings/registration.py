"""The proof, from git, that a prediction was written before its data: the commit that registered it and whether it
is unchanged since, and whether a record's commit descends from that registration.

A prediction is registered by the first commit in which its claims file holds its id. From that commit on, its
YAML (the claim with the file's ``defaults``) must stay as it was: ``registration`` compares the two and says what
changed. A record proves it was measured after the registration when the commit in its provenance
(``provenance.git_commit``, the HEAD of the checkout that measured it) has the registration commit as an ancestor.

Everything here asks git (``git log``, ``git show``, ``git merge-base --is-ancestor``) in the repository that holds
the claims file; outside a repository nothing can be proved, and the caller says so.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml

from ..util.yamlio import load_yaml


@dataclass(frozen=True)
class Registration:
    """Where a prediction was registered: the commit (None: not committed yet), its date, and what changed since
    (empty: unchanged; the working tree counts as a change too)."""

    commit: Optional[str]
    date: str = ""
    changed: tuple[str, ...] = ()
    withdrawn_commit: Optional[str] = None  # the first commit whose claim says ``withdrawn`` (None: never)
    withdrawn_time: str = ""  # that commit's time (ISO 8601), to compare with the records' creation

    @property
    def short(self) -> str:
        return self.commit[:7] if self.commit else "uncommitted"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@lru_cache(maxsize=None)
def repo_root(path: str) -> Optional[Path]:
    """The top of the git work tree that holds ``path`` (None: not in one, or no git)."""
    try:
        r = _git(Path(path), "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(r.stdout.strip()) if r.returncode == 0 else None


def canonical(claim: dict, defaults: dict) -> str:
    """A claim as registered: its own fields and the file's defaults, in one sorted JSON string. ``withdrawn`` is
    left out: it is the one field a registered prediction may gain (it takes the prediction out of the count, and
    changes nothing of its test)."""
    kept = {k: v for k, v in claim.items() if k != "withdrawn"}
    return json.dumps({"claim": kept, "defaults": defaults or {}}, sort_keys=True, default=str)


def _claims_by_id(text: str) -> tuple[dict, dict]:
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError:
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    defaults = data.get("defaults") or {}
    claims = {c["id"]: c for c in data.get("claims") or [] if isinstance(c, dict) and c.get("id")}
    return claims, defaults


def registrations(claims_file: Path, ids: list[str]) -> Optional[dict[str, Registration]]:
    """For each id, the commit that first held it in ``claims_file``, whether the claim (with the file's defaults)
    differs from that commit's today, and the first commit that withdrew it (None: the file is not in a git
    repository)."""
    claims_file = Path(claims_file).resolve()
    root = repo_root(str(claims_file.parent))
    if root is None:
        return None
    rel = claims_file.relative_to(root).as_posix()
    log = _git(root, "log", "--reverse", "--format=%H %cs %cI", "--", rel)
    first: dict[str, tuple[str, str, str]] = {}  # id -> (commit, date, canonical form there)
    withdrawn: dict[str, tuple[str, str]] = {}  # id -> (the first commit that withdrew it, its time)
    wanted = set(ids)
    for line in log.stdout.split("\n") if log.returncode == 0 else []:
        if not line.strip() or not (wanted - set(withdrawn)):
            continue
        commit, date, when = line.split()
        shown = _git(root, "show", f"{commit}:{rel}")
        if shown.returncode != 0:
            continue
        claims, defaults = _claims_by_id(shown.stdout)
        for cid in wanted & set(claims):
            if cid not in first:
                first[cid] = (commit, date, canonical(claims[cid], defaults))
            if cid not in withdrawn and claims[cid].get("withdrawn"):
                withdrawn[cid] = (commit, when)
    now, now_defaults = _claims_by_id(claims_file.read_text())
    out = {}
    for cid in ids:
        if cid not in first:
            out[cid] = Registration(None)
            continue
        commit, date, then = first[cid]
        changed = () if canonical(now.get(cid, {}), now_defaults) == then else (_what_changed(then, now, cid),)
        out[cid] = Registration(commit, date, changed, *withdrawn.get(cid, (None, "")))
    return out


def deleted_predictions(claims_file: Path) -> list[tuple[dict, str]]:
    """Every prediction some commit of ``claims_file`` held that today's file does not (deleted, or renamed to a new
    id), as its last committed form with the commit that last held it: registered predictions are append-only, so
    no deletion can take a failure off the page or shrink the family that adjusts the others' p-values."""
    claims_file = Path(claims_file).resolve()
    root = repo_root(str(claims_file.parent))
    if root is None:
        return []
    rel = claims_file.relative_to(root).as_posix()
    log = _git(root, "log", "--reverse", "--format=%H", "--", rel)
    last: dict[str, tuple[dict, str]] = {}
    for commit in log.stdout.split() if log.returncode == 0 else []:
        shown = _git(root, "show", f"{commit}:{rel}")
        if shown.returncode == 0:
            claims, _ = _claims_by_id(shown.stdout)
            last.update({cid: (c, commit) for cid, c in claims.items() if c.get("kind") == "prediction"})
    now, _ = _claims_by_id(claims_file.read_text()) if claims_file.exists() else ({}, {})
    return [last[cid] for cid in sorted(set(last) - set(now))]


def _what_changed(then: str, now: dict, cid: str) -> str:
    old = json.loads(then)
    new = json.loads(canonical(now.get(cid, {}), {}))["claim"]
    keys = sorted(k for k in set(old["claim"]) | set(new) if old["claim"].get(k) != new.get(k))
    if not keys:
        keys = ["the file's defaults"]
    return "changed since its registration: " + ", ".join(keys)


@lru_cache(maxsize=4096)
def descends(root: str, registered: str, commit: str) -> Optional[bool]:
    """Whether ``commit`` is ``registered`` or comes after it in git's history (None: git does not know
    ``commit``)."""
    r = _git(Path(root), "merge-base", "--is-ancestor", registered, commit)
    if r.returncode in (0, 1):
        return r.returncode == 0
    return None
