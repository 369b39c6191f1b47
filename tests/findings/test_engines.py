"""The analysis plan frozen at registration (findings/engines.py): `check` decides each prediction again with the
claims engine of the commit that registered it (pebench/ taken from git) and fails where the two verdicts differ,
unless the set's engine-changes.yaml shows both and why; a row no difference backs is stale and fails too. On a
scratch git repository holding a copy of pebench/ as its engine."""

import shutil
from pathlib import Path

import pytest
import yaml
from test_predictions import DEGRADES, commit, git, write_claims, write_records

from pebench.findings import claims as cl
from pebench.findings import engines
from support import invoke

PKG = Path(cl.__file__).resolve().parents[2]  # pebench/ (claims is a package: claims/__init__.py)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository whose first commit holds pebench's engine as it is today, and an empty result set."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    shutil.copytree(PKG, root / "pebench", ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@t")
    git(root, "config", "user.name", "t")
    (root / "set").mkdir()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the engine")
    return root


def check(root):
    return invoke("check", root / "set")


def test_the_same_engine_agrees_and_an_engine_change_that_flips_a_verdict_fails_check_until_shown(repo):
    write_claims(repo, [DEGRADES])
    commit(repo, "register")
    write_records(repo, commit(repo, "after"))
    res = check(repo)  # the registration's engine is today's: both confirm it
    assert res.exit_code == 0 and "ENGINES" not in res.output, res.output
    # an engine whose level no p-value reaches, committed, and a prediction registered under it
    power = repo / "pebench" / "findings" / "power.py"
    text = power.read_text()
    assert "\nALPHA = 0.05" in text
    power.write_text(text.replace("\nALPHA = 0.05", "\nALPHA = 1e-300"))
    write_claims(repo, [DEGRADES, {**DEGRADES, "id": "rope-degrades-b", "effect": "40%"}])
    reg = commit(repo, "a stricter engine, and a prediction registered under it")
    write_records(repo, commit(repo, "after b"))
    res = check(repo)
    assert res.exit_code == 1, res.output
    assert f"[ENGINES DIFFER] rope-degrades-b: failed by the engine at {reg[:7]}, confirmed today" in res.output
    assert "rope-degrades:" not in res.output  # registered under today's engine: no difference
    why = "the level was 1e-300 at its registration, 0.05 since"
    rows = [{"id": "rope-degrades-b", "then": "failed", "now": "confirmed", "why": why}]
    (repo / "set" / engines.ENGINE_CHANGES).write_text(yaml.safe_dump(rows))
    res = check(repo)
    assert res.exit_code == 0 and "[engines differ, shown] rope-degrades-b" in res.output and why in res.output
    assert why in engines.render(repo / "set")
    rows.append({"id": "rope-degrades", "then": "failed", "now": "confirmed", "why": "no such difference"})
    (repo / "set" / engines.ENGINE_CHANGES).write_text(yaml.safe_dump(rows))
    res = check(repo)
    assert res.exit_code == 1 and "[STALE]" in res.output and "rope-degrades's row" in res.output
    assert invoke("check", "--no-engines", repo / "set").exit_code == 0  # today's engine alone


def test_an_engine_that_cannot_read_the_plan_is_a_difference_and_a_repository_without_one_compares_nothing(repo):
    claims_py = repo / "pebench" / "findings" / "claims" / "__init__.py"
    claims_py.write_text(claims_py.read_text() + "\nraise ImportError('an engine that does not start')\n")
    write_claims(repo, [DEGRADES])
    reg = commit(repo, "register under a broken engine")
    write_records(repo, commit(repo, "after"))
    res = check(repo)
    assert res.exit_code == 1 and f"cannot decide by the engine at {reg[:7]}" in res.output
    assert "an engine that does not start" in res.output
    git(repo, "rm", "-rq", "pebench")  # a user's own repository of result sets: no engine in git
    write_claims(repo, [DEGRADES, {**DEGRADES, "id": "rope-degrades-c", "effect": "40%"}])
    commit(repo, "register without an engine")
    head = git(repo, "rev-parse", "HEAD")
    assert engines.compare(repo / "set", cl.check_set(repo / "set"), {"rope-degrades-c": head}) == []


def test_every_committed_prediction_agrees_with_the_engine_of_its_registration_or_its_page_shows_why():
    """The committed sets: no difference between the engines that no engine-changes.yaml shows, and no stale row;
    every set with such a file shows it on a page."""
    repo = PKG.parent
    lines: list[str] = []
    bad = 0
    for s in cl.claim_sets([repo / "results"]):
        bad += cl.check_engines(s, cl.check_set(s), lines.append)
    assert bad == 0, "\n".join(lines)
    pages = "\n".join(p.read_text() for p in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))])
    for f in sorted((repo / "results").glob(f"*/{engines.ENGINE_CHANGES}")):
        assert f"<!-- pebench:engines set={f.parent.relative_to(repo)} -->" in pages, f"{f} is shown on no page"
