"""The analysis plan frozen at registration: each prediction decided again by the claims engine as it stood at the
commit that registered it, beside today's verdict.

The engine of a commit is pebench's package as git holds it there (``git archive``), run in a subprocess on the set's
records as they are today and its claims file as that commit held it (the plan as registered: the family of
predictions then, without a later ``withdrawn``); its verdicts are cached by the commit and the hashes of the set's
files (under ``$XDG_CACHE_HOME/pebench/engines``). Where the two engines give a prediction different verdicts,
``check`` fails unless the set's ``engine-changes.yaml`` shows both and says why::

    - id: pred-learned-undefined
      then: confirmed            # the verdict of the engine at the registration commit
      now: holds                 # today's
      why: a claim no data could contradict became a property (8eee3fe)

A row whose verdicts are no longer the two engines' is stale and fails ``check`` too, so the file always says what
the engines say. Pages show the rows through ``<!-- pebench:engines set=... -->``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..util.errors import UsageError
from ..util.yamlio import load_yaml

ENGINE_CHANGES = "engine-changes.yaml"
_RUN = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
claims, registered = Path(sys.argv[2], "claims.yaml").resolve(), Path(sys.argv[3]).read_text()
read = Path.read_text
Path.read_text = lambda self, *a, **k: registered if self.resolve() == claims else read(self, *a, **k)
from pebench.findings.claims import check_set
def state(v):
    s = getattr(v, "state", None)
    return s if isinstance(s, str) else ("confirmed" if v.held else "failed")
print("VERDICTS " + json.dumps({v.claim["id"]: state(v) for v in check_set(Path(sys.argv[2]))}))
"""


@dataclass(frozen=True)
class EngineDiff:
    """A prediction the two engines decide differently (or the older one cannot decide), and whether the set's
    ``engine-changes.yaml`` shows it (``shown``: its row's reason)."""

    id: str
    commit: str
    then: str  # its verdict, or "cannot decide" (``detail`` says why)
    now: str
    shown: str = ""
    detail: str = ""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pebench" / "engines"


def _engine_tree(root: Path, commit: str) -> Path:
    """pebench/ as git holds it at ``commit``, unpacked once into the cache."""
    out = _cache_dir() / "trees" / commit
    if (out / "pebench" / "__init__.py").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent))
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "archive", commit, "pebench"], cwd=root, stdout=tar, check=True, timeout=120)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(tmp, filter="data")
    try:
        tmp.rename(out)
    except OSError:  # another process unpacked it first
        pass
    return out


def _key(commit: str, set_dir: Path) -> str:
    h = hashlib.sha256(commit.encode())
    for p in sorted(set_dir.rglob("*")):
        if p.is_file() and p.name != ENGINE_CHANGES and p.name.endswith((".yaml", ".jsonl.gz", ".json", ".md", ".csv")):
            h.update(p.relative_to(set_dir).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:32]


def has_engine(root: Path, commit: str) -> bool:
    """Whether ``commit`` of the repository at ``root`` holds pebench's claims engine (a user's own repository of
    result sets, with pebench installed from a wheel, holds none: there is no plan in git to compare with)."""
    return any(  # a module until the split by job, a package after it
        subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=root, capture_output=True).returncode == 0
        for path in ("pebench/findings/claims.py", "pebench/findings/claims/__init__.py")
    )


def engine_verdicts(root: Path, commit: str, set_dir: Path) -> dict[str, str] | str:
    """The verdicts of the engine at ``commit`` on the set as it is today ({id: state}), or why it gave none."""
    key = _cache_dir() / "verdicts" / f"{_key(commit, set_dir)}.json"
    if key.exists():
        cached = json.loads(key.read_text())
        return cached["verdicts"] if cached["verdicts"] is not None else cached["error"]
    rel = (set_dir.resolve() / "claims.yaml").relative_to(root).as_posix()
    try:
        tree = _engine_tree(root, commit)
        then = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=root, capture_output=True, timeout=60, check=True)
        (tree / "claims-then.yaml").write_bytes(then.stdout)
        r = subprocess.run(
            [sys.executable, "-c", _RUN, str(tree), str(set_dir.resolve()), str(tree / "claims-then.yaml")],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(tree)},
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot decide: it could not run ({e})"
    line = next((x for x in r.stdout.splitlines() if x.startswith("VERDICTS ")), None)
    if line is None:
        last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        out: dict = {"verdicts": None, "error": f"cannot decide: {last[:240]}"}
    else:
        out = {"verdicts": json.loads(line[len("VERDICTS ") :]), "error": None}
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(json.dumps(out))
    return out["verdicts"] if out["verdicts"] is not None else out["error"]


def load_changes(set_dir: Path) -> dict[str, dict]:
    """The set's shown engine differences by prediction id ({} without the file)."""
    path = Path(set_dir) / ENGINE_CHANGES
    if not path.exists():
        return {}
    try:
        rows = load_yaml(path.read_text()) or []
    except yaml.YAMLError as e:
        raise UsageError(f"cannot read {path}: {e}") from e
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and {"id", "then", "now", "why"} <= set(r) for r in rows
    ):
        raise UsageError(f"{path}: a list of rows, each with id, then, now and why")
    return {str(r["id"]): r for r in rows}


def compare(set_dir: Path, verdicts: list, registrations: dict) -> list[EngineDiff]:
    """Each prediction of ``verdicts`` decided by the engine at its registration commit (``registrations``: id ->
    commit) and compared with today's; the differences, each with the row that shows it (if any)."""
    from .registration import repo_root

    root = repo_root(str(Path(set_dir).resolve()))
    if root is None:
        return []
    changes = load_changes(set_dir)
    now = {v.id: v.state for v in verdicts}
    commits = sorted(c for c in set(registrations.values()) if has_engine(root, c))
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:  # a subprocess each
        decided = dict(zip(commits, pool.map(lambda c: engine_verdicts(root, c, Path(set_dir)), commits)))
    out = []
    for commit in commits:
        ids = sorted(i for i, c in registrations.items() if c == commit)
        then = decided[commit]
        for i in ids:
            old = then.get(i, "cannot decide") if isinstance(then, dict) else "cannot decide"
            detail = then if isinstance(then, str) else "" if i in then else "it has no verdict for this id"
            if old != now[i]:
                row = changes.get(i)
                shown = row["why"] if row and (row["then"], row["now"]) == (old, now[i]) else ""
                out.append(EngineDiff(i, commit, old, now[i], shown, detail))
    return out


def stale_rows(set_dir: Path, diffs: list[EngineDiff]) -> list[str]:
    """Rows of the set's engine-changes.yaml that no longer match a difference the engines show."""
    live = {d.id for d in diffs if d.shown}
    return sorted(set(load_changes(set_dir)) - live)


def render(set_dir: Path) -> str:
    """The set's shown engine differences as a markdown table (for the pages; ``check`` proves each row)."""
    rows = load_changes(set_dir)
    if not rows:
        return "No prediction of this set is decided differently by the engine of its registration.\n"
    out = ["| prediction | engine at registration | today's engine | why |", "|---|---|---|---|"]
    for i, r in sorted(rows.items()):
        out.append(f"| `{i}` | {r['then']} | {r['now']} | {r['why']} |")
    return "\n".join(out) + "\n"
