"""End to end through the CLI on a very small config, and every bad input gets one line."""

import json

import pandas as pd
import pytest
import yaml

from pebench.cli import app
from support import invoke as _invoke  # noqa: F401
from support import micro, runner, write_micro

MICRO = micro(train={"steps": 4, "log_every": 2})


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def micro_config(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "micro.yaml"
    p.write_text(yaml.safe_dump(MICRO))
    return p


@pytest.fixture(scope="module")
def trained(tmp_path_factory, micro_config):
    """Two schemes trained for a few steps, evaluated at two lengths, reported."""
    res = tmp_path_factory.mktemp("results")
    r = invoke("train", "--pe", "alibi,learned", "--config", micro_config, "--results", res)
    assert r.exit_code == 0, r.output
    r = invoke("eval", "--lengths", "16,64", "--results", res)
    assert r.exit_code == 0, r.output
    assert f"next: pebench report --results {res}" in r.output
    return res


def test_train_writes_run_folder(trained):
    run = trained / "runs" / "alibi-micro-s0"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["model"]["pe"] == "alibi" and cfg["run"]["corpus"] == "sotu"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [2, 4]
    assert set(lines[0]) == {"step", "loss", "lr", "tokens_per_s"}
    assert (run / "checkpoint.pt").exists()
    assert json.loads((run / "status.json").read_text())["state"] == "finished"


def test_eval_records_with_provenance_and_undefined(trained):
    from pebench.results import OPTIONAL_RECORD_FIELDS, RECORD_FIELDS

    recs = [json.loads(p.read_text()) for p in (trained / "records").rglob("*.json")]
    assert len(recs) == 4
    for r in recs:  # every documented field, nothing undocumented
        assert set(RECORD_FIELDS) - OPTIONAL_RECORD_FIELDS <= set(r) <= set(RECORD_FIELDS)
    by = {(r["scheme"], r["length"]): r for r in recs}
    ok = by[("alibi", 64)]
    assert ok["status"] == "ok" and ok["metrics"]["ppl"] > 1 and ok["details"]["tokens_scored"] == 599
    for key in (
        "pebench_version",
        "torch_version",
        "device",
        "seed",
        "steps",
        "params",
        "corpus",
        "corpus_fingerprint",
        "config_hash",
        "wall_s",
        "git_commit",
    ):
        assert key in ok["provenance"], key
    und = by[("learned", 64)]
    assert und["status"] == "undefined" and und["metrics"]["ppl"] is None
    assert by[("learned", 16)]["status"] == "ok"


def test_report_table_md_csv(trained):
    r = invoke("report", "--format", "md", "--results", trained)
    assert r.exit_code == 0, r.output
    assert "| alibi |" in r.output and "undefined" in r.output and "16 (1x)" in r.output and "64 (4x)" in r.output
    md = (trained / "report.md").read_text()
    assert "| learned |" in md
    df = pd.read_csv(trained / "report.csv")
    assert set(df["label"]) == {"alibi", "learned"}
    row = df[(df["label"] == "learned") & (df["length"] == 64)]
    assert row["value"].isna().all()
    r = invoke("report", "--results", trained)
    assert r.exit_code == 0 and "alibi" in r.output


def test_list_shows_runs(trained):
    r = invoke("list", "--results", trained)
    assert r.exit_code == 0 and "alibi-micro-s0" in r.output and "finished" in r.output


def test_list_shows_every_model_option_with_its_help():
    """Each flag that sets a model key (sinks, ssmax, the output gate, selective and scale-invariant attention, Canon
    layers, the normaliser) is listed with the help its command gives."""
    out = invoke("list").output
    section = out.split("model options", 1)[1].split("training options", 1)[0]
    flags = [line.split()[0] for line in section.splitlines()[1:] if line.strip()]
    assert flags == [
        "--sinks",
        "--ssmax",
        "--gate",
        "--selective",
        "--scale-invariant",
        "--canon",
        "--normaliser",
    ], section
    assert "elementwise | headwise" in section
    training = out.split("training options", 1)[1].split("evaluation-time variants", 1)[0]
    keys = [line.split()[0] for line in training.splitlines()[1:] if line.strip()]
    assert keys == ["train.random_positions", "train.random_positions_float"] and "Random Float Sampling" in training


def test_refuses_to_overwrite_a_finished_run(trained, micro_config):
    r = invoke("train", "--pe", "alibi", "--config", micro_config, "--results", trained)
    assert r.exit_code == 2 and "--overwrite" in r.output


def _assert_one_line_error(r, code, fragment):
    assert r.exit_code == code, (r.exit_code, r.output)
    lines = [x for x in r.output.strip().splitlines() if x.strip()]
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output
    assert fragment in r.output, r.output


def _bad_configs(tmp_path):
    (tmp_path / "unknown.yaml").write_text("model:\n  widthh: 3\n")
    (tmp_path / "typed.yaml").write_text("train:\n  steps: many\n")
    (tmp_path / "broken.yaml").write_text("model: [1, 2\n")
    (tmp_path / "broken2.yaml").write_text("model:\n  n_layers: 2\n  d_model: [64\ntrain: {}\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "lr.yaml").write_text("train:\n  lr: 1e-2\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("")


BAD = [
    (["train", "--pe", "alibl"], 2, "did you mean 'alibi'"),
    (["train", "--pe", "rope", "--steps", "0"], 2, "--steps must be between 1 and"),
    (["train", "--pe", "rope", "--steps", "99999999999999999999"], 2, "--steps must be between 1 and 1,000,000,000"),
    (["train", "--pe", "", "--steps", "1"], 2, "--pe must be a comma-separated list"),
    (["run", "--pe", "", "--steps", "1"], 2, "--pe must be a comma-separated list"),
    (["train", "--name", "", "--steps", "1"], 2, "run name '' is not allowed"),
    (["train", "--config", "{tmp}/empty.yaml"], 2, "is empty: give the sections"),
    (["train", "--config", "{tmp}/lr.yaml"], 2, "write it with a decimal point, e.g. 0.01"),
    (["train", "--config", "{tmp}/broken2.yaml"], 2, "not valid YAML at line 4, column 6"),
    (["train", "--precision", "fp16", "--steps", "1"], 2, "--precision must be one of auto, fp32, bf16, got"),
    (["run", "--precision", "half", "--steps", "1"], 2, "--precision must be one of auto, fp32, bf16, got"),
    (["train", "--config", "{tmp}/unknown.yaml"], 2, "'model.widthh'"),
    (["train", "--config", "{tmp}/typed.yaml"], 2, "'train.steps' must be int"),
    (["train", "--config", "{tmp}/broken.yaml"], 2, "not valid YAML"),
    (["train", "--config", "{tmp}/missing.yaml"], 2, "config file not found"),
    (["train", "--config", "tinyy"], 2, "did you mean 'tiny'"),
    (["train", "--data", "wikipedia", "--steps", "1"], 2, "unknown corpus spec"),
    (["train", "--data", "local:{tmp}/nothing/*.txt", "--steps", "1"], 2, "no file matches"),
    (["train", "--data", "local:{tmp}/empty", "--steps", "1"], 1, "is empty"),
    (["train", "--data", "hf:pebench-no-such/x", "--steps", "1"], 1, "offline"),
    (["eval", "--lengths", ""], 2, "--lengths must be"),
    (["eval", "--lengths", "12,abc"], 2, "--lengths must be integers"),
    (["eval", "--lengths", "128,"], 2, "a comma-separated list of lengths (token counts or multiples"),
    (["eval", "--window", "0"], 2, "--window must be a number of tokens >= 1, got 0"),
    (["train", "--layers", "irop", "--steps", "1"], 2, "did you mean 'irope'?), or a list of"),
    (["eval", "--lengths", "0,16"], 2, ">= 2"),
    (["eval", "--lengths", "-16"], 2, ">= 2"),
    (["eval", "--lengths", "16,16"], 2, "twice"),
    (["eval", "--protocol", "sliding"], 2, "needs --stride"),
    (["eval", "--protocol", "fixd"], 2, "did you mean 'fixed'"),
    (["eval", "--rope-scaling", "yarm"], 2, "did you mean 'yarn'"),
    (["eval"], 2, "no results folder"),  # a missing --results folder is called missing
    (["report", "--format", "xml"], 2, "unknown report format"),
    (["report"], 2, "no results folder"),
]


@pytest.mark.parametrize("args,code,fragment", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_invocations(tmp_path, args, code, fragment):
    _bad_configs(tmp_path)
    res = tmp_path / "res"
    r = invoke(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--results", res)
    _assert_one_line_error(r, code, fragment)
    assert not (res / "runs").exists() or not any((res / "runs").iterdir())


def test_eval_length_longer_than_stream(trained):
    r = invoke("eval", "--lengths", "16,100000", "--results", trained)
    _assert_one_line_error(r, 2, "longer than the evaluation stream")


def test_unwritable_results_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = invoke("train", "--pe", "rope", "--steps", "1", "--results", blocker / "sub")
    _assert_one_line_error(r, 1, "not writable")


def test_help_for_every_command():
    for cmd in ("train", "eval", "report", "run", "list"):
        r = invoke(cmd, "--help")
        assert r.exit_code == 0 and "--results" in r.output


def test_run_with_several_tasks_writes_the_context_table_and_needles_name_the_config(tmp_path, micro_config):
    res = tmp_path / "res"
    r = invoke(
        "run",
        "--pe",
        "rope",
        "--config",
        micro_config,
        "--results",
        res,
        "--task",
        "ppl,copy",
        "--trials",
        "2",
        "--lengths",
        "64,128",
        "--rope-scaling",
        "none,yarn",
    )
    assert r.exit_code == 0, r.output
    assert f"--results {res}  (" in r.output.split("next: pebench ")[1]  # the folder run wrote, never 'None'
    ctx = (res / "report-context.md").read_text()
    assert "| rope | ppl |" in ctx and "|  | copy_acc |" in ctx and "| rope+yarn | ppl |" in ctx
    assert (res / "copy_by_distance.md").exists()
    recs = [json.loads(p.read_text()) for p in (res / "records").rglob("copy__*.json")]
    assert len(recs) == 4 and {r["protocol_params"]["trials"] for r in recs} == {2}  # 2 variants x 2 lengths
    r = invoke("run", "--suite", "contxt", "--results", res)
    assert r.exit_code == 2 and "unknown suite 'contxt'" in r.output and "context" in r.output
    r = invoke("train", "--pe", "alibi", "--config", micro_config, "--needles", "0.5", "--results", res)
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "alibi-micro-needles0.5-s0" / "config.yaml").read_text())
    assert cfg["train"]["needles"] == 0.5
    r = invoke("train", "--pe", "alibi", "--config", micro_config, "--needles", "1.5", "--results", res)
    assert r.exit_code == 2 and "--needles must be a fraction in [0, 1]" in r.output


def test_suite_context_scores_ppl_with_long_context_and_writes_the_context_table(tmp_path, micro_config):
    res = tmp_path / "ctx"
    r = invoke(
        "run",
        "--suite",
        "context",
        "--pe",
        "alibi",
        "--config",
        micro_config,
        "--lengths",
        "128,256",
        "--trials",
        "2",
        "--max-tokens",
        "3000",
        "--results",
        res,
    )
    assert r.exit_code == 0, r.output
    keys = sorted(p.name.split("__")[-2] for p in (res / "records" / "alibi-micro-s0").glob("alibi__*.json"))
    assert keys == ["sliding-m3000-s64"] * 2  # ppl scored with at least L - 64 tokens of context, its stream said
    ctx = (res / "report-context.md").read_text()
    # the cap keys ppl, which reads the stream, and not passkey, whose filler haystack no cap reaches
    assert "ppl (sliding-m3000-s64" in ctx and "passkey_exact (filler-t2," in ctx and "| alibi | ppl |" in ctx
    assert len(list(res.glob("heatmap_passkey_alibi_*.png"))) == 1


def test_a_retrieval_phase_continues_a_run_with_needles(tmp_path, micro_config):
    res = tmp_path / "res"
    assert invoke("train", "--pe", "alibi", "--config", micro_config, "--results", res).exit_code == 0
    over = tmp_path / "dense.yaml"
    over.write_text("train: {needle_kinds: {repeat: 1}, needle_lengths: [4, 8]}\n")
    r = invoke(
        "train",
        "--pe",
        "alibi",
        "--init-from",
        "alibi-micro-s0",
        "--steps",
        "2",
        "--needles",
        "1",
        "--overlay",
        over,
        "--results",
        res,
    )
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "alibi-micro-s0-cont-dense-needles1" / "config.yaml").read_text())
    assert cfg["train"]["needles"] == 1.0 and cfg["train"]["needle_kinds"] == {"repeat": 1}
    assert cfg["run"]["parent"] == "alibi-micro-s0" and cfg["train"]["steps"] == 2
    r = invoke(
        "train", "--pe", "alibi", "--init-from", "alibi-micro-s0", "--context", "2x", "--needles", "1", "--results", res
    )
    assert r.exit_code == 2 and "without --context" in r.output


def test_debug_works_anywhere_on_the_line():
    for args in (["--debug", "list"], ["list", "--debug"]):
        r = invoke(*args)
        assert r.exit_code == 0 and "schemes by group" in r.output, args


def test_a_usage_error_is_one_line():
    for args, msg in (
        (["eval", "--bogus"], "No such option: --bogus"),
        (["evall"], "No such command 'evall'"),
        (["train", "--steps", "x"], "--steps"),
    ):
        r = invoke(*args)
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0], r.output
        assert "─" not in r.output and "╭" not in r.output  # no box art


def test_a_continuation_saves_the_rate_it_trained_at(tmp_path):
    """train --init-from RUN --pe none continues at the parent's rate (it continues the parent's optimisation), and
    its saved config says exactly that: no lr_by_scheme that names another rate for its scheme."""
    cfg = write_micro(tmp_path, train={"steps": 4, "warmup": 2, "lr_by_scheme": {"rope": 0.01, "none": 0.003}})
    res = tmp_path / "res"
    assert invoke("train", "--pe", "rope", "--config", cfg, "--results", res).exit_code == 0
    r = invoke("train", "--pe", "none", "--init-from", "rope-micro-s0", "--steps", "20", "--results", res)
    assert r.exit_code == 0, r.output
    saved = yaml.safe_load((res / "runs" / "rope-micro-s0-to-none" / "config.yaml").read_text())["train"]
    logged = [
        json.loads(x)["lr"]
        for x in (res / "runs" / "rope-micro-s0-to-none" / "metrics.jsonl").read_text().splitlines()
        if '"lr"' in x
    ]
    assert saved["lr"] == 0.01 and saved["lr_by_scheme"] == {}
    assert max(logged) == pytest.approx(saved["lr"])  # the peak of the schedule is the saved rate


def test_steps_says_what_else_it_changed(tmp_path):
    cfg = write_micro(tmp_path, train={"warmup": 5, "checkpoint_every": 50})
    r = invoke("train", "--pe", "alibi", "--config", cfg, "--steps", "3", "--results", tmp_path / "res")
    assert r.exit_code == 0
    assert "note: --steps 3 also set train.warmup 5 -> 0, train.checkpoint_every 50 -> 3" in r.output


def test_steps_keeps_an_induction_warm_up_at_its_share_of_the_training():
    """The context suite's 4,000 warm-up steps of 5,000: --steps 1000 keeps the share (800), any --steps leaves at
    least one language-model step after the warm-up, and one step has no room for one (off)."""
    from dataclasses import replace

    from pebench.config import load_config, with_steps

    cfg = load_config("context")
    assert (cfg.train.steps, cfg.train.induction_steps) == (5000, 4000)
    for steps, want in ((1000, 800), (10000, 8000), (2, 1), (1, 0), (5000, 4000)):
        got, notes = with_steps(cfg, steps)
        assert got.validate().train.induction_steps == want, steps
        assert ("train.induction_steps 4000 -> " in " ".join(notes)) == (want != 4000), notes
    plain = replace(cfg, train=replace(cfg.train, induction_steps=0))
    assert with_steps(plain, 1000)[0].train.induction_steps == 0


def test_precision_flag_sets_the_training_precision_and_the_run_records_it(tmp_path, micro_config):
    res = tmp_path / "res"
    r = invoke("train", "--pe", "alibi", "--config", micro_config, "--precision", "fp32", "--results", res)
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "alibi-micro-s0" / "config.yaml").read_text())
    assert cfg["train"]["precision"] == "fp32" and cfg["run"]["precision"] == "fp32"
    again = ("train", "--pe", "alibi", "--config", micro_config, "--resume", "--results", res)
    r = invoke(*again)  # auto accepts the precision the run trained in: the finished run is reused
    assert r.exit_code == 0 and "trained" not in r.output, r.output
    r = invoke(*again, "--precision", "bf16")  # an explicit other precision is another model
    _assert_one_line_error(r, 2, "train.precision (trained in fp32)")


def test_a_reader_that_leaves_the_pipe_gets_no_error():
    """`pebench list | head -1`: the command's output goes into a pipe already closed (head took its line and left),
    early or at the final flush; pebench says nothing and exits 141, as a command ended by SIGPIPE does."""
    import os
    import subprocess
    import sys

    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte is written
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.run([sys.executable, "-m", "pebench", "list"], stdout=w, stderr=subprocess.PIPE, text=True, env=env)
    os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)


def test_eval_resume_keeps_the_records_already_written(trained):
    """`eval --resume` measures only the missing cells: a record already written is kept as it is (its creation
    time unchanged) while a new length is measured; without it the cell is measured again."""
    path = trained / "records" / "alibi-micro-s0"
    before = {p.name: json.loads(p.read_text())["created"] for p in path.glob("*.json")}
    r = invoke("eval", "--run", "alibi-micro-s0", "--lengths", "16,32", "--resume", "--results", trained)
    assert r.exit_code == 0, r.output
    after = {p.name: json.loads(p.read_text())["created"] for p in path.glob("*.json")}
    kept = [n for n in before if "16" in n]
    assert kept and all(after[n] == before[n] for n in kept)
    assert len(after) == len(before) + 1  # 32 tokens: measured
    for p in path.glob("*32*.json"):
        p.unlink()  # the module's other tests count the records


def test_docs_and_analyze_read_what_they_are_given(tmp_path):
    """`docs --check --root` of a folder with no docs is an error, not 'up to date'; `analyze --run a --run b`
    keeps both runs (the first was dropped): the error names the first."""
    _assert_one_line_error(invoke("docs", "--check", "--root", tmp_path / "nope"), 2, "holds no README.md")
    (tmp_path / "res" / "runs").mkdir(parents=True)
    r = invoke("analyze", "--run", "aaa", "--run", "bbb", "--results", tmp_path / "res")
    _assert_one_line_error(r, 2, "'aaa'")


def test_list_checks_a_runs_state_against_its_folder(trained, tmp_path):
    """A "running" run whose process is gone shows as stopped; a finished run whose checkpoint was deleted says so."""
    import shutil

    res = tmp_path / "res"
    shutil.copytree(trained / "runs", res / "runs")
    run = res / "runs" / "alibi-micro-s0"
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "state": "running"}))
    (run / ".lock").write_text("999999999")  # no such process
    (res / "runs" / "learned-micro-s0" / "checkpoint.pt").unlink()
    out = invoke("list", "--results", res).output
    assert "alibi-micro-s0" in out and "stopped (its process is gone" in out
    assert "finished (checkpoint missing" in out


def test_a_uniform_layer_list_trains_as_its_scheme_and_lr_sets_every_rate(tmp_path):
    """`--layers rope,rope,rope,rope` is the plain RoPE model: it trains at RoPE's tuned rate (it took the config's
    default); `--lr` trains every scheme at the rate given, says the tuned rates are set aside and names its runs
    apart."""
    from pebench.config import load_config

    tuned = load_config("tiny").train.lr_by_scheme["rope"]
    res = tmp_path / "res"
    r = invoke("train", "--layers", "rope,rope,rope,rope", "--steps", "1", "--results", res)
    assert r.exit_code == 0, r.output
    assert f"next: pebench eval --results {res}  (measures the finished runs" in r.output  # the next step
    (run,) = (res / "runs").iterdir()
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["lr"] == tuned
    r = invoke("train", "--pe", "rope", "--lr", "0.002", "--steps", "1", "--results", res)
    assert r.exit_code == 0 and "--lr 0.002 trains every scheme at it" in r.output, r.output
    cfg = yaml.safe_load((res / "runs" / "rope-tiny-lr0.002-s0" / "config.yaml").read_text())
    assert cfg["train"]["lr"] == 0.002 and cfg["train"]["lr_by_scheme"] == {} and tuned != 0.002
