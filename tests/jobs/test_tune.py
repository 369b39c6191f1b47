"""Fair baselines: the tuner's choice and overlay, learning curves that leave training alone, the test split."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import yaml

from pebench.cli import app
from pebench.jobs.tune import (
    check_option_grid,
    grid_markdown,
    option_settings,
    overlay_dict,
    parse_option_grid,
    pick_best,
)
from pebench.util.errors import UsageError
from support import micro as micro_cfg
from support import runner

MICRO = micro_cfg(train={"steps": 6, "checkpoint_every": 3}, eval={"curve_tokens": 300})


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "micro.yaml"
    p.write_text(yaml.safe_dump(MICRO))
    return p


def test_the_tuner_picks_each_schemes_argmin_and_never_a_diverged_run():
    raw = {
        ("rope", 1e-3): 1.5,
        ("rope", 3e-3): 1.2,
        ("rope", 1e-2): None,
        ("alibi", 1e-3): 1.1,
        ("alibi", 3e-3): 1.1,
        ("alibi", 1e-2): 1.3,  # a tie: the smaller lr
        ("t5", 1e-3): float("nan"),
        ("t5", 3e-3): None,
        ("t5", 1e-2): None,  # all diverged: left out
        ("shaw", 1e-3): 2.0,
        ("shaw", 3e-3): 1.9,
        ("shaw", 1e-2): 0.7,
    }
    losses = {(s, lr, ()): v for (s, lr), v in raw.items()}
    assert pick_best(losses) == {"rope": (3e-3, ()), "alibi": (1e-3, ()), "shaw": (1e-2, ())}
    md = grid_markdown(losses, pick_best(losses), [1e-3, 3e-3, 1e-2]).splitlines()
    assert md[2] == f"| rope | defaults | {math.exp(1.5):.3f} | **{math.exp(1.2):.3f}** | diverged | 0.003 |  |"
    assert md[3].endswith("| 0.001 | best at the grid's edge: widen the grid |")
    assert md[4] == "| t5 | defaults | diverged | diverged | diverged | - |  |"


def test_an_option_grid_is_part_of_the_argmin_and_of_the_overlay():
    opt = (("table_scale", 0.3),)
    losses = {
        ("sinusoidal", 1e-3, ()): 2.0,
        ("sinusoidal", 3e-3, ()): 1.5,
        ("sinusoidal", 1e-3, opt): 1.4,
        ("sinusoidal", 3e-3, opt): 1.6,
        ("learned", 1e-3, ()): 1.0,
        ("learned", 1e-3, (("weight_decay", True),)): 1.0,
    }  # tie: defaults
    best = pick_best(losses)
    assert best == {"sinusoidal": (1e-3, opt), "learned": (1e-3, ())}
    assert overlay_dict(best) == {
        "train": {"lr_by_scheme": {"sinusoidal": 1e-3, "learned": 1e-3}},
        "model": {"pe_options": {"sinusoidal": {"table_scale": 0.3}}},
    }
    md = grid_markdown(losses, best, [1e-3, 3e-3]).splitlines()
    assert (
        md[3]
        == f"| sinusoidal | table_scale=0.3 | **{math.exp(1.4):.3f}** | {math.exp(1.6):.3f} | 0.001, table_scale=0.3 | "
        "best at the grid's edge: widen the grid |"
    )
    assert md[5].startswith("| learned | weight_decay=true | 2.718 | not run |")
    # the default value is the plain run (trained once); values are typed; a wrong option is one line
    assert parse_option_grid(["table_scale=1,0.3", "weight_decay=false,true"]) == {
        "table_scale": [1, 0.3],
        "weight_decay": [False, True],
    }
    assert option_settings("sinusoidal", {"table_scale": [1.0, 0.3]}) == [(), (("table_scale", 0.3),)]
    # against the base config's value: with weight decay on in the config, "false" is the departure
    assert option_settings("learned", {"weight_decay": [False, True]}, {"weight_decay": True}) == [
        (("weight_decay", False),),
        (),
    ]
    assert option_settings("rope", {"table_scale": [0.3]}) == [()]  # another scheme's option: its default
    with pytest.raises(UsageError, match="no scheme of rope, alibi has an option 'table_scale'"):
        check_option_grid(["rope", "alibi"], {"table_scale": [0.3]})
    with pytest.raises(UsageError, match="must be bool"):
        option_settings("learned", {"weight_decay": [0.1]})
    for bad in ("table_scale", "=1", "table_scale="):
        with pytest.raises(UsageError, match="NAME=V1,V2"):
            parse_option_grid([bad])


def test_the_sinusoidal_table_scale_multiplies_the_table_only():
    from pebench.model.pe import PEContext, build_pe
    from pebench.model.pe.sinusoidal import sinusoidal_table

    ctx = PEContext(8, 2, 1, 16)
    x, pos = torch.randn(1, 5, 8), torch.arange(5)
    full, third = build_pe("sinusoidal", ctx), build_pe("sinusoidal", ctx, {"table_scale": 0.3})
    table = sinusoidal_table(pos, 8).float()
    assert torch.allclose(full.embed(x, pos) - third.embed(x, pos), 0.7 * table, atol=1e-6)
    assert torch.allclose(full.embed(x, pos), x * 8**0.5 + table, atol=1e-6)


def test_tune_writes_an_overlay_that_train_reads_back(tmp_path, micro):
    res = tmp_path / "res"
    r = runner.invoke(
        app,
        [
            "tune",
            "--pe",
            "rope,alibi",
            "--lr",
            "1e-3,1e-2",
            "--config",
            str(micro),
            "--steps",
            "3",
            "--results",
            str(res),
        ],
    )
    assert r.exit_code == 0, r.output
    overlay = res / "tune" / "tuned.yaml"
    best = yaml.safe_load(overlay.read_text())["train"]["lr_by_scheme"]
    assert set(best) == {"rope", "alibi"} and all(v in (1e-3, 1e-2) for v in best.values())
    losses = {}
    for scheme in ("rope", "alibi"):  # the choice is the argmin of the grid's own 1x records
        for lr in (1e-3, 1e-2):
            (rec,) = (res / "tune" / "records" / f"{scheme}-micro-lr{lr:g}-s0").glob("*.json")
            losses[(scheme, lr, ())] = json.loads(rec.read_text())["metrics"]["loss"]
    assert best == {s: lr for s, (lr, _) in pick_best(losses).items()}
    assert not (res / "records").exists()  # the grid never mixes with the benchmark's records
    r = runner.invoke(
        app,
        [
            "train",
            "--pe",
            "alibi",
            "--config",
            str(micro),
            "--overlay",
            str(overlay),
            "--steps",
            "2",
            "--results",
            str(res),
        ],
    )
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "alibi-micro-tuned-s0" / "config.yaml").read_text())
    assert cfg["train"]["lr"] == best["alibi"] and cfg["name"] == "micro-tuned"


def test_tune_at_a_scale_point_trains_its_shape_and_says_how_to_use_it(tmp_path, micro):
    """``--point``: the grid at one scale-suite point's shape (its steps unless --steps replaces them), its runs named
    by the point, and its overlay's use line runs that point; a wrong or a second point is one line."""
    from pebench.config import load_config
    from pebench.jobs.plan import at_point

    res = tmp_path / "res"
    args = ["tune", "--pe", "rope", "--lr", "3e-3", "--config", str(micro), "--results", str(res)]
    r = runner.invoke(app, [*args, "--point", "d64", "--steps", "2"])
    assert r.exit_code == 0, r.output
    (run,) = (res / "tune" / "runs").iterdir()
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert run.name == "rope-micro-d64-lr0.003-s0" and cfg["name"] == "micro-d64"
    assert (cfg["model"]["d_model"], cfg["model"]["d_mlp"], cfg["train"]["steps"]) == (64, 256, 2)
    use = f"pebench run --suite scale --points d64 --overlay {res / 'tune' / 'tuned.yaml'}"
    assert use in (res / "tune" / "tuned.yaml").read_text() and use in r.output
    tiny = load_config("tiny")
    assert at_point(tiny, "d256", False).train.steps == 1957 and at_point(tiny, "d256", True).train.steps == 500
    for bad, msg in (("nope", "--point: no point 'nope' in suite scale; valid:"), ("d64,d256", "takes one point")):
        r = runner.invoke(app, [*args, "--point", bad])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_bad_tuning_input_gets_one_line(tmp_path, micro):
    for args, msg in (
        (["--lr", "0.01,abc"], "--lr must be numbers"),
        (["--lr", "0.01,0.01"], "twice"),
        (["--pe", "ropee"], "did you mean 'rope'"),
        (["--pe", "rope", "--option", "table_scale=0.3"], "no scheme of rope has an option 'table_scale'"),
        (["--pe", "sinusoidal", "--option", "table_scale"], "--option must be NAME=V1,V2"),
    ):
        r = runner.invoke(app, ["tune", "--config", str(micro), "--results", str(tmp_path), *args])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {lr_by_scheme: {alibi: -1}}")
    r = runner.invoke(app, ["train", "--config", str(micro), "--overlay", str(bad), "--results", str(tmp_path)])
    assert r.exit_code == 2 and "train.lr_by_scheme.alibi must be a finite learning rate > 0" in r.output
    bad.write_text("train: {lr_by_scheme: {alibbi: 0.01}}")
    r = runner.invoke(app, ["train", "--config", str(micro), "--overlay", str(bad), "--results", str(tmp_path)])
    assert r.exit_code == 2 and "did you mean 'alibi'" in r.output


def _train(res, cfg_path, name):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pebench",
            "train",
            "--pe",
            "rope",
            "--config",
            str(cfg_path),
            "--results",
            str(res),
            "--name",
            name,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in (res / "runs" / name / "metrics.jsonl").read_text().splitlines()]


def test_learning_curve_points_leave_the_training_trajectory_bitwise_unchanged(tmp_path, micro):
    curve = tmp_path / "curve.yaml"
    curve.write_text(yaml.safe_dump({**MICRO, "train": {**MICRO["train"], "eval_every": 2}}))
    res = tmp_path / "res"
    plain, with_curve = _train(res, micro, "plain"), _train(res, curve, "curve")
    assert [x for x in with_curve if "loss" in x] == [
        {**x, "tokens_per_s": y["tokens_per_s"]} for x, y in zip(plain, [x for x in with_curve if "loss" in x])
    ]
    a = torch.load(res / "runs" / "plain" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(res / "runs" / "curve" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    points = [x for x in with_curve if "curve" in x]
    assert [p["step"] for p in points] == [2, 4, 6] and [p["tokens"] for p in points] == [128, 256, 384]
    assert all(set(p["curve"]) == {"16", "32"} and all(v > 1 for v in p["curve"].values()) for p in points)
    r = runner.invoke(app, ["eval", "--run", "curve", "--lengths", "16", "--results", str(res)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["report", "--results", str(res)])
    assert r.exit_code == 0, r.output
    assert (res / "plot_curves.png").read_bytes()[:4] == b"\x89PNG"
    rows = (res / "curves.csv").read_text().splitlines()
    assert rows[0] == "run,scheme,seed,step,tokens,length,ppl" and len(rows) == 1 + 3 * 2


def test_test_split_reads_only_test_documents(tmp_path):
    from pebench.data import prepare_corpus
    from pebench.data.dataset import split_of

    folder = tmp_path / "docs"
    folder.mkdir()
    names = [f"doc{i:03d}.txt" for i in range(300)]
    for n in names:
        (folder / n).write_text(f"<{n}>")
    corpus = prepare_corpus(f"local:{folder}", tmp_path / "cache")
    by_split = {}
    for split in ("train", "validation", "test"):
        text = bytes(corpus.tokens(split)).decode()
        by_split[split] = {d.strip("<>") for d in text.split("\x00") if d}
        assert by_split[split] == {n for n in names if split_of(n) == split}
    assert by_split["test"] and not (by_split["test"] & (by_split["validation"] | by_split["train"]))


def test_eval_on_the_test_split_is_a_separate_record_and_report(tmp_path, micro):
    res = tmp_path / "res"
    assert (
        runner.invoke(
            app, ["train", "--pe", "alibi", "--config", str(micro), "--steps", "2", "--results", str(res)]
        ).exit_code
        == 0
    )
    r = runner.invoke(app, ["report", "--split", "test", "--results", str(res)])
    assert r.exit_code == 1 and "no records" in r.output
    for split in ("validation", "test"):
        r = runner.invoke(app, ["eval", "--lengths", "16", "--split", split, "--results", str(res)])
        assert r.exit_code == 0, r.output
    recs = {p.name: json.loads(p.read_text()) for p in (res / "records").rglob("*.json")}
    assert sorted(recs) == ["alibi__nonoverlap__L16.json", "alibi__nonoverlap__test__L16.json"]
    assert recs["alibi__nonoverlap__test__L16.json"]["split"] == "test"
    assert (
        recs["alibi__nonoverlap__test__L16.json"]["metrics"]["ppl"]
        != recs["alibi__nonoverlap__L16.json"]["metrics"]["ppl"]
    )
    r = runner.invoke(app, ["report", "--split", "test", "--format", "md", "--results", str(res)])
    assert r.exit_code == 0 and "split: test" in r.output and (res / "report-test.md").exists()
    r = runner.invoke(app, ["eval", "--split", "train", "--results", str(res)])
    assert r.exit_code == 2 and "unknown split 'train'" in r.output


def test_a_diverged_grid_cell_is_recorded_as_diverged_and_never_chosen(tmp_path, micro):
    r = runner.invoke(
        app,
        [
            "tune",
            "--pe",
            "rope",
            "--lr",
            "1e-3,1e6",
            "--config",
            str(micro),
            "--steps",
            "3",
            "--results",
            str(tmp_path),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "rope        lr 1e+06    diverged" in r.output
    assert yaml.safe_load((tmp_path / "tune" / "tuned.yaml").read_text())["train"]["lr_by_scheme"] == {"rope": 1e-3}


def test_a_finished_run_is_reused_only_with_its_own_config(tmp_path, micro):
    res = tmp_path / "res"
    args = ["train", "--pe", "alibi", "--config", str(micro), "--results", str(res)]
    assert runner.invoke(app, args).exit_code == 0
    assert runner.invoke(app, args + ["--resume"]).exit_code == 0  # the same config: skipped
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**MICRO, "train": {**MICRO["train"], "lr": 0.01}}))
    r = runner.invoke(
        app,
        [
            "train",
            "--pe",
            "alibi",
            "--config",
            str(other),
            "--name",
            "alibi-micro-s0",
            "--results",
            str(res),
            "--resume",
        ],
    )
    assert r.exit_code == 2 and "trained with another config (train.lr differ)" in r.output
    same_model = tmp_path / "same.yaml"  # another scheme's rate and the log interval do not change this model
    same_model.write_text(
        yaml.safe_dump(
            {
                **MICRO,
                "train": {**MICRO["train"], "log_every": 3, "lr_by_scheme": {"rope": 0.02}},
                "model": {**MICRO["model"], "pe_options": {"rope": {"base": 500.0}}},
            }
        )
    )
    r = runner.invoke(
        app,
        [
            "train",
            "--pe",
            "alibi",
            "--config",
            str(same_model),
            "--name",
            "alibi-micro-s0",
            "--results",
            str(res),
            "--resume",
        ],
    )
    assert r.exit_code == 0, r.output
