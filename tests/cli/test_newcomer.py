"""What a newcomer hits first: run names stay inside the results folder, compare works from any folder, resume never
trains a changed config silently and says when there was nothing to resume, a bad seed leaves nothing behind, a
damaged record value is skipped and named, and written files follow the umask."""

import json
import os
import stat
from pathlib import Path

import pytest

from support import invoke, write_micro


def _one_line(r, code, fragment):
    lines = [x for x in r.output.strip().splitlines() if x.strip() and not x.startswith("note: ")]  # notes come first
    assert r.exit_code == code and len(lines) == 1 and fragment in lines[0] and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("name", ["../../escape", "a/b", ".hidden", "-dash"])
def test_a_run_name_is_one_safe_folder_name(tmp_path, name):
    res = tmp_path / "res"
    r = invoke("train", "--pe", "alibi", "--config", write_micro(tmp_path), "--name", name, "--results", res)
    _one_line(r, 2, "is not allowed")
    assert not (tmp_path / "escape").exists() and not (res / "runs").exists()


def test_compare_from_another_folder_says_where_the_reference_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "res").mkdir()
    _one_line(invoke("compare", "--results", tmp_path / "res"), 1, "no reference records in results/reference")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "records").mkdir()
    r = invoke("compare", "--reference", tmp_path / "empty", "--results", tmp_path / "empty")
    _one_line(r, 1, "in the reference")


def test_resume_refuses_a_changed_config_and_says_when_nothing_was_there(tmp_path):
    cfg, res = write_micro(tmp_path, train={"steps": 4}), tmp_path / "res"
    r = invoke("train", "--pe", "alibi", "--config", cfg, "--resume", "--results", res)
    assert r.exit_code == 0 and "does not exist yet; training it from scratch" in r.output, r.output
    status = res / "runs" / "alibi-micro-s0" / "status.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "state": "interrupted"}))
    r = invoke("train", "--pe", "alibi", "--config", cfg, "--steps", "6", "--resume", "--results", res)
    _one_line(r, 2, "is interrupted but was trained with another config (train.steps")


def test_a_negative_seed_is_one_line_and_leaves_no_run(tmp_path):
    res = tmp_path / "res"
    _one_line(invoke("train", "--pe", "alibi", "--seeds", "-1", "--results", res), 2, "--seeds must be in [0, ")
    _one_line(
        invoke("train", "--pe", "alibi", "--seed", "-1", "--results", res), 2, "--seed must be an integer in [0, "
    )
    assert not res.exists()


def test_a_damaged_value_in_a_record_is_skipped_and_named_and_files_follow_the_umask(tmp_path):
    res = tmp_path / "res"
    assert invoke("train", "--pe", "alibi", "--config", write_micro(tmp_path), "--results", res).exit_code == 0
    assert invoke("eval", "--lengths", "16,32", "--results", res).exit_code == 0
    paths = sorted((res / "records").rglob("*.json"))
    mask = os.umask(0)
    os.umask(mask)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mask for p in paths)
    rec = json.loads(paths[0].read_text())
    rec["metrics"]["ppl"] = "high"
    paths[0].write_text(json.dumps(rec))
    r = invoke("report", "--results", res)
    assert r.exit_code == 0 and f"skipped record {paths[0]}" in r.output and "ppl" in r.output, r.output


def test_lengths_are_spelled_the_same_for_own_runs_and_outside_models(tmp_path):
    from pebench.util.parsing import parse_lengths, resolve_lengths

    assert resolve_lengths(parse_lengths("1x,0.5x,48"), 16) == [16, 8, 48]
    res = tmp_path / "res"
    assert invoke("train", "--pe", "alibi", "--config", write_micro(tmp_path), "--results", res).exit_code == 0
    r = invoke("eval", "--lengths", "1x,2x", "--results", res)
    assert r.exit_code == 0, r.output
    assert sorted(json.loads(p.read_text())["length"] for p in (res / "records").rglob("*.json")) == [16, 32]
    _one_line(invoke("eval", "--lengths", "0x", "--results", res), 2, "--lengths")


def test_every_commands_help_gives_every_flag_a_line_and_no_bool_value():
    import typer

    from pebench.cli import app

    group = typer.main.get_command(app)
    ctx = group.make_context("pebench", ["list"], resilient_parsing=True)
    names = group.list_commands(ctx)
    assert len(names) >= 15
    for name in [None, *names]:
        cmd = group if name is None else group.get_command(ctx, name)
        bare = [p.opts for p in cmd.params if p.param_type_name == "option" and not (p.help or "").strip()]
        assert not bare, f"{name}: options without help text {bare}"
        r = invoke(*([] if name is None else [name]), "--help")
        assert r.exit_code == 0 and "<bool>" not in r.output and "Usage" in r.output, (name, r.output)
    assert invoke("--version").output.startswith("pebench ") and invoke("train", "-h").exit_code == 0


def test_a_missing_results_folder_is_called_missing_and_an_empty_one_empty(tmp_path):
    _one_line(invoke("eval", "--results", tmp_path / "typo"), 2, "no results folder")
    _one_line(invoke("report", "--results", tmp_path / "typo"), 2, "no results folder")
    (tmp_path / "empty").mkdir()
    _one_line(invoke("eval", "--results", tmp_path / "empty"), 2, "no finished runs")
    _one_line(invoke("report", "--results", tmp_path / "empty"), 1, "no records")
    assert "none (no such folder)" in invoke("list", "--results", tmp_path / "typo").output


def test_one_vocabulary_for_scalings_contexts_and_where_jobs_run(tmp_path):
    """eval's --rope-scaling defaults to each run's whole list as run's does; --context takes N or Kx everywhere;
    run's job placement is --workers, so --device means the same kind (auto | cpu | cuda) in every command."""
    from pebench.util.errors import UsageError
    from pebench.util.parsing import parse_context

    assert parse_context("2x", 16) == 32 and parse_context("512", 16) == 512 and parse_context("4x") == "4x"
    for bad in ("0x", "1,2", "big"):
        with pytest.raises(UsageError, match="--context"):
            parse_context(bad, 16)
    res = tmp_path / "res"
    assert invoke("train", "--pe", "rope", "--config", write_micro(tmp_path), "--results", res).exit_code == 0
    assert invoke("eval", "--lengths", "2x", "--results", res).exit_code == 0
    variants = {json.loads(p.read_text())["variant"] for p in (res / "records").rglob("*.json")}
    assert variants == {"none", "linear", "ntk", "dynamic-ntk", "yarn", "llama3"}
    r = invoke("run", "--pe", "rope", "--config", write_micro(tmp_path), "--devices", "cpu:2", "--results", res)
    _one_line(r, 2, "--devices is now --workers")
    _one_line(invoke("rope", "--hf", tmp_path / "cfg", "--length", "512"), 2, "--length is now --lengths")
    assert "--workers" in invoke("run", "--help").output


def test_a_failed_command_leaves_no_folder_and_a_bad_length_fails_before_training(tmp_path):
    res = tmp_path / "res"
    cfg = write_micro(tmp_path)
    r = invoke("run", "--pe", "rope", "--config", cfg, "--lengths", "99999999", "--results", res)
    _one_line(r, 2, "longer than the evaluation stream")
    assert not res.exists()  # nothing trained, no empty folder
    _one_line(invoke("eval", "--hf", tmp_path / "nosuch", "--results", res), 2, "--hf")
    _one_line(invoke("bench", "--lengths", "0x", "--results", res), 2, "--lengths")
    _one_line(
        invoke("bench", "--multiples", "1,16", "--results", res),
        2,
        "--multiples is now --lengths, in tokens or Kx: --lengths 1x,16x",
    )
    assert not res.exists()


def test_the_command_reference_is_generated_from_the_commands():
    import typer

    from pebench.cli import app
    from pebench.cli.reference import command_reference

    text = (Path(__file__).resolve().parents[2] / "docs" / "manual" / "cli.md").read_text()
    assert command_reference() in text  # `pebench docs` wrote it; a changed option makes it stale
    group = typer.main.get_command(app)
    ctx = group.make_context("pebench", ["list"], resilient_parsing=True)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if not cmd.hidden:
            assert f"### `pebench {name}" in text
            for p in cmd.params:
                if p.param_type_name == "option" and not p.hidden:
                    assert f"`{p.opts[0]}" in text, (name, p.opts)
