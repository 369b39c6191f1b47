"""The README's "Commands in brief", run in order as a user would type them, on the folders those same lines make
(one scratch folder, its ./results). Each line runs as written except for the substitutions below, which shrink its
cost (a micro model, short lengths, fewer schemes and seeds) or point a line that reads the repository at it
read-only. Two lines run in their own tests, which this one does not repeat (COVERED). A line that fails, or a README
block this test cannot read, fails."""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from support import MICRO, invoke, merged

ROOT = Path(__file__).resolve().parents[2]

# the micro model at a 128-token context (the passkey's shortest prompt is 105 tokens), two lengths
CONFIG = merged(MICRO, {"model": {"context": 128}, "eval": {"multiples": [1, 2], "max_tokens": 600}})
SUBSTITUTIONS = [  # (README text, what runs here): cost only
    ("--steps 600", "--steps 6"),
    ("--trials 20", "--trials 1"),
    ("--seeds 0,1,2", "--seeds 0,1"),
    ("--lengths 512,2048,8192", "--lengths 128,256"),
    ("--pe all", "--pe rope,alibi"),
    ("--pe classic", "--pe rope,none"),
]
TAKES_CONFIG = {"train", "run", "tune", "bench"}
COVERED = {  # a command: the test that runs it (each costs 15-20 s more here)
    "bench --pe modern": "tests/test_bench.py::test_bench_cli_writes_table_and_csv (four isolated processes)",
    "docs": "tests/findings/test_claims_docs.py (docs --check on this repository)",
}


def readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Commands in brief", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("  #")[0].strip() for line in block.strip().splitlines()]
    assert lines and all(line.startswith("pebench ") for line in lines), lines
    return lines


def as_run_here(line: str, config: Path, repo: Path = ROOT) -> list[str]:
    for a, b in SUBSTITUTIONS:
        line = line.replace(a, b)
    line = re.sub(r"(\S+?)(\|\S+)+", r"\1", line)  # `--format table|md|csv`: one of them, the first
    args = shlex.split(line)[1:]
    if args[0] in TAKES_CONFIG and "--estimate" not in args and "--suite" not in args:
        args += ["--config", str(config)]
    if args[0] == "eval" and "--task" in args and "--trials" not in args:
        args += ["--trials", "1"]  # a retrieval task's prompts: one per cell
    if args[:2] == ["run", "--suite"]:  # the suite's own config, shortened: its steps and lengths
        args += ["--steps", "2", "--lengths", "1x", "--pe", "rope", "--task", "ppl,passkey"]
    if args[0] == "analyze":
        args += ["--tokens", "256"]
    if args[0] == "compare":
        args += ["--reference", str(repo / "results" / "reference")]
    if args[0] == "check":
        args += [str(repo / "results" / "wave2026")]  # one committed set: a scratch folder has no claims
    return args


def _clone(tmp_path) -> Path:
    """This repository as committed (a shared clone: its files, no copy of its history), or a skip where the
    tests do not run from a git checkout."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the tests do not run from a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(clone)], check=True, capture_output=True)
    return clone


@pytest.mark.parametrize("where", ["scratch", "clone"])
def test_the_readmes_commands_run_in_order_on_the_folders_they_make(tmp_path, monkeypatch, where):
    """From a scratch folder, and from the root of a clone of this repository (#82: a README line run there once
    replaced committed files), where afterwards no tracked file has changed."""
    import subprocess

    repo = _clone(tmp_path) if where == "clone" else ROOT
    here = repo if where == "clone" else tmp_path
    monkeypatch.chdir(here)
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    lines = readme_lines()
    assert all(any(line == f"pebench {c}" for line in lines) for c in COVERED), "COVERED names a line not there"
    for line in lines:
        if line.removeprefix("pebench ") in COVERED:
            continue
        args = as_run_here(line, config, repo)
        r = invoke(*args)
        if "--launcher" in args:  # no Slurm here: refused in one line that says what to do instead
            assert r.exit_code == 2 and "--emit-sbatch" in r.output and not (here / "jobs").exists(), r.output
            continue
        assert r.exit_code == 0, f"README line `{line}` (run as `pebench {' '.join(args)}`) failed:\n{r.output}"
        assert "Traceback" not in r.output
    runs = {p.name for p in (here / "results" / "runs").iterdir()}
    assert {"rope-600", "rope-micro-s0", "alibi-micro-s1", "irope-micro-s0"} <= runs, runs
    assert (here / "results" / "mine" / "records.jsonl.gz").is_file() and (here / "sweep.sh").is_file()
    if where == "clone":
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True
        ).stdout
        assert changed == "", f"README lines changed tracked files:\n{changed}"


@pytest.mark.parametrize("line", ["pebench report --format table|md|csv --metric ppl|bpb --html"])
def test_an_alternation_runs_as_its_first_choice(line, tmp_path):
    assert as_run_here(line, tmp_path / "c.yaml") == ["report", "--format", "table", "--metric", "ppl", "--html"]
