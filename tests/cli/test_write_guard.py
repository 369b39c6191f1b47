"""No command writes inside a committed result set (results.guard_target): each write route the newcomer's pass
found losing or adding committed files is replayed against a repository fixture (a committed set with its claims
and packed records, tracked by git) and must exit non-zero with one line, leaving every file of the repository as
it was; `pack` into a set shows what would change and writes only with --update-set."""

import hashlib
import subprocess
from pathlib import Path

import pytest
import yaml

from pebench.findings.claims import CLAIMS_FILE
from pebench.results import PACKED_RECORDS, committed_set, guard_file, guard_target
from pebench.util.errors import UsageError
from support import invoke, micro


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A repository holding a committed set results/ref (claims and packed records of a micro run), and a scratch
    folder B1 with a finished micro run and its records."""
    root = tmp_path_factory.mktemp("repo")
    cfg = root / "micro.yaml"
    cfg.write_text(yaml.safe_dump(micro(train={"steps": 2})))
    b1 = root / "B1"
    assert invoke("train", "--pe", "rope", "--config", cfg, "--results", b1).exit_code == 0
    assert invoke("eval", "--lengths", "16", "--rope-scaling", "", "--results", b1).exit_code == 0
    ref = root / "results" / "ref"
    ref.mkdir(parents=True)
    assert invoke("pack", ref, "--results", b1).exit_code == 0
    (ref / CLAIMS_FILE).write_text("claims: []\n")
    (root / "results" / "analysis").mkdir()
    (root / "results" / "analysis" / CLAIMS_FILE).write_text("claims: []\n")
    (root / "results" / "analysis" / "analysis.md").write_text("committed\n")
    (root / ".gitignore").write_text("/B1/\n/results/scratch/\n/results/runs/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "a committed set")
    return root


REFUSED = [
    ("report", "--results", "{B1}", "--out", "{ref}"),
    ("report", "--results", "{B1}", "--out", "{ref}/plots"),
    ("pack", "{ref}", "--results", "{B1}", "--overwrite"),
    ("pack", "{ref}", "--results", "{ref}", "--results", "{B1}"),
    ("train", "--pe", "rope", "--steps", "1", "--results", "{ref}"),
    ("tune", "--pe", "rope", "--lr", "1e-3", "--steps", "1", "--results", "{ref}"),
    ("bench", "--pe", "rope", "--results", "{ref}", "--no-compile", "--no-reference", "--no-baseline"),
    ("export", "rope-micro-s0", "--hf", "{ref}/hf", "--results", "{B1}"),
    ("run", "--pe", "rope", "--steps", "1", "--results", "{B1}/more", "--emit-sbatch", "{ref}/x.sh"),
    ("run", "--pe", "rope", "--steps", "1", "--results", "{B1}/more", "--emit-sbatch", "{root}/no/such/dir/x.sh"),
    ("eval", "--results", "{ref}"),
]


@pytest.mark.parametrize("args", REFUSED, ids=lambda a: " ".join(a[:2]))
def test_a_write_into_a_committed_set_is_refused_in_one_line_and_changes_nothing(repo, args):
    before = digest(repo)
    where = {"B1": repo / "B1", "ref": repo / "results" / "ref", "root": repo}
    res = invoke(*[a.format(**where) for a in args])
    assert res.exit_code != 0, res.output
    assert "Traceback" not in res.output and res.output.strip().splitlines()[-1].lower().startswith("error"), res.output
    assert digest(repo) == before
    assert not (repo / "no").exists()


def test_pack_shows_what_would_change_and_writes_only_with_update_set(repo, tmp_path):
    ref = repo / "results" / "ref"
    before = (ref / PACKED_RECORDS).read_bytes()
    res = invoke("pack", ref, "--results", repo / "B1", "--overwrite")
    assert res.exit_code != 0 and "records now" in res.output and "--update-set" in res.output
    assert (ref / PACKED_RECORDS).read_bytes() == before
    copy = tmp_path / "ref"
    copy.mkdir()
    (copy / PACKED_RECORDS).write_bytes(before)
    res = invoke("pack", copy, "--results", repo / "B1", "--overwrite", "--update-set")
    assert res.exit_code == 0 and "0 added" in res.output and "0 removed" in res.output, res.output


def test_analyze_from_a_folder_whose_analysis_is_committed_writes_a_scratch_folder(repo):
    results = repo / "results"
    assert (
        invoke("train", "--pe", "rope", "--steps", "2", "--config", repo / "micro.yaml", "--results", results).exit_code
        == 0
    )
    before = digest(repo / "results" / "analysis")
    res = invoke("analyze", "--tokens", "64", "--lengths", "1x", "--results", results)
    assert res.exit_code == 0, res.output
    assert "committed result set" in res.output and (results / "scratch" / "analysis" / "analysis.md").exists()
    assert digest(repo / "results" / "analysis") == before


def test_the_guard_names_the_set_and_the_flag(repo):
    ref = repo / "results" / "ref"
    assert committed_set(ref / "a" / "b") == ref.resolve() and committed_set(repo / "B1") is None
    with pytest.raises(UsageError, match=r"in the committed result set .*ref.*--out"):
        guard_target(ref / "plots", "--out")
    with pytest.raises(UsageError, match="a file git tracks"):
        guard_target(repo / "micro.yaml", "--out")
    with pytest.raises(UsageError, match="no such folder"):
        guard_file(repo / "nope" / "x.sh", "--emit-sbatch")
    assert guard_target(repo / "B1" / "new", "--results") == repo / "B1" / "new"


@pytest.mark.parametrize(
    "args, says",
    [
        (("train", "--seeds", "99999999999999999999", "--steps", "1"), "--seeds must be in [0, 9223372036854775807]"),
        (("train", "--lr", "inf", "--steps", "1"), "--lr must be a finite number > 0"),
        (("train", "--pe", "rope,rope", "--steps", "1"), "--pe lists a value twice"),
        (("train", "--resume", "--overwrite", "--steps", "1"), "give one of them"),
    ],
    ids=["seed-overflow", "lr-inf", "pe-twice", "resume-overwrite"],
)
def test_input_that_cannot_be_meant_is_one_line_and_leaves_nothing(tmp_path, args, says):
    res = invoke(*args, "--results", tmp_path / "r")
    assert res.exit_code == 2 and says in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "r").exists()


def test_a_run_whose_config_is_damaged_is_one_line(repo, tmp_path):
    import shutil

    res = tmp_path / "r"
    shutil.copytree(repo / "B1", res)
    (res / "runs" / "rope-micro-s0" / "config.yaml").write_text("model: [unclosed\n")
    out = invoke("eval", "--results", res)
    assert out.exit_code != 0 and "its config.yaml is damaged" in out.output and "Traceback" not in out.output


@pytest.mark.parametrize(
    "args, says",
    [
        (("--task", ""), "--task names no task; tasks: "),
        (("--stride", "64"), "--stride sets the sliding protocol's step; add --protocol sliding"),
        (("--protocol", "sliding", "--stride", "64", "--targets", "8"), "--targets sets the fixed protocol's targets"),
        (("--logit-scale", "logn@nope"), "--logit-scale logn@nope: no scheme 'nope'"),
        (("--max-tokens", "99999999999"), "--max-tokens 99,999,999,999 is more than the validation split of"),
    ],
    ids=["empty-task", "stride-without-sliding", "targets-without-fixed", "logit-scale-no-scheme", "max-tokens-huge"],
)
def test_an_evaluation_setting_that_would_be_ignored_is_refused(repo, args, says):
    res = invoke("eval", *args, "--results", repo / "B1")
    assert res.exit_code == 2 and says in res.output and "Traceback" not in res.output, res.output


def test_rope_scalings_on_runs_without_rope_evaluate_what_applies_or_refuse_before_training(tmp_path):
    """#82: `eval --rope-scaling none,ntk,yarn` (even `none`) on a folder whose only run is ALiBi was refused; it
    evaluates the run as trained and says what it skipped. A scaling that applies to no run and no `none` beside it
    measures nothing asked: `eval` refuses it and `run --pe alibi --rope-scaling yarn` refuses before it trains."""
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(yaml.safe_dump(micro(train={"steps": 1})))
    a = tmp_path / "A"
    assert invoke("train", "--pe", "alibi", "--config", cfg, "--results", a).exit_code == 0
    res = invoke("eval", "--lengths", "16", "--rope-scaling", "none,ntk,yarn", "--results", a)
    assert res.exit_code == 0 and "evaluated as trained (ntk, yarn skipped)" in res.output, res.output
    assert [p.name for p in (a / "records" / "alibi-micro-s0").iterdir()] == ["alibi__nonoverlap__L16.json"]
    res = invoke("eval", "--lengths", "16", "--rope-scaling", "yarn", "--results", a)
    assert res.exit_code != 0 and "add none to evaluate it as trained" in res.output
    res = invoke("run", "--pe", "alibi", "--rope-scaling", "yarn", "--config", cfg, "--results", tmp_path / "B")
    assert res.exit_code == 2 and "no run here has RoPE (alibi)" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "B").exists()


def test_messages_say_what_was_wrong_and_what_is_allowed(repo, tmp_path, monkeypatch):
    """#82's misleading messages: a folder under runs/ without config.yaml is not 'no run named'; a missing folder
    given to compare or report --compare is named; --rope-factor nan is refused before anything is measured; an
    option no task takes does not say 'task(s) none'; an export error names the folder asked for, never the
    temporary one beside it."""
    import shutil

    res = tmp_path / "r"
    shutil.copytree(repo / "B1", res)
    (res / "runs" / "ghost").mkdir()
    cases = [
        (("eval", "--run", "ghost", "--results", res), "runs/ghost has no config.yaml: it is not a run"),
        (("compare", "--results", tmp_path / "none"), f"no results folder {tmp_path / 'none'}"),
        (("analyze", "--run", "x", "--results", tmp_path / "none"), f"no results folder {tmp_path / 'none'}"),
        (("report", "--compare", tmp_path / "none", "--compare", res), f"--compare {tmp_path / 'none'}: no such"),
        (("eval", "--rope-factor", "nan", "--results", res), "--rope-factor must be a finite number >= 1, got nan"),
        (("eval", "--task-opt", "foo=1", "--results", res), "'foo' is an option of no task; not of ppl"),
        (("export", "rope-micro-s0", "--hf", "/proc/pebench-x/y", "--results", res), "--hf /proc/pebench-x/y: cannot"),
    ]
    for args, says in cases:
        out = invoke(*args)
        assert out.exit_code != 0 and says in out.output and "Traceback" not in out.output, (args, out.output)
    assert not list((res / "records").rglob("*rope-factor*"))


def test_next_hints_run_as_printed_from_any_folder(repo, tmp_path, monkeypatch):
    """#82: a `next:` hint printed `compare` outside a clone (no reference there) and paths unquoted; it quotes the
    folder for the shell and suggests `report` where the committed reference is not beside it; after
    --emit-sbatch the next step is the script."""
    import shlex

    cfg = tmp_path / "micro.yaml"
    cfg.write_text(yaml.safe_dump(micro(train={"steps": 1})))
    monkeypatch.chdir(tmp_path)
    spaced = tmp_path / "my runs"
    out = invoke("run", "--pe", "rope", "--config", cfg, "--lengths", "16", "--rope-scaling", "", "--results", spaced)
    assert out.exit_code == 0, out.output
    hint = out.output.split("next: ")[1].split("  (")[0]
    assert hint == f"pebench report --results {shlex.quote(str(spaced))}" and shlex.split(hint)[-1] == str(spaced)
    out = invoke(
        "run", "--pe", "rope", "--config", cfg, "--results", tmp_path / "E", "--emit-sbatch", tmp_path / "e.sh"
    )
    assert out.exit_code == 0 and f"next: sbatch {tmp_path / 'e.sh'}" in out.output, out.output
