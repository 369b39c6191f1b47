"""Data parallel training (gloo on CPU) and parallel sweeps give what one process gives."""
import json
import os
import subprocess
import sys

import pytest
import yaml

CFG = {
    "name": "micro",
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16},
    "train": {"steps": 6, "batch_size": 8, "lr": 0.003, "warmup": 1, "log_every": 1, "checkpoint_every": 3,
              "data": "sotu"},
    "eval": {"multiples": [1, 2], "max_tokens": 600, "batch_tokens": 256},
}


def run(cmd, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, **kw)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "micro.yaml"
    p.write_text(yaml.safe_dump(CFG))
    return p


def losses(folder):
    return [json.loads(x)["loss"] for x in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("accum", [1, 2])
def test_two_ranks_match_one_process(tmp_path, cfg, accum):
    data = yaml.safe_load(cfg.read_text())
    data["train"]["grad_accum"] = accum
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(data))
    res = tmp_path / "res"
    r = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "pebench",
             "train", "--pe", "rope", "--config", c, "--results", res, "--name", "ddp", "--device", "cpu"])
    assert r.returncode == 0, r.stderr[-2000:]
    r = run([sys.executable, "-m", "pebench", "train", "--pe", "rope", "--config", cfg, "--results", res,
             "--name", "single"])
    assert r.returncode == 0, r.stderr
    a, b = losses(res / "runs" / "ddp"), losses(res / "runs" / "single")
    assert len(a) == len(b) == 6
    assert a == pytest.approx(b, abs=2e-5)
    # one set of files: rank 1 wrote nothing of its own
    assert sorted(p.name for p in (res / "runs" / "ddp").iterdir()) == \
        ["checkpoint.pt", "config.yaml", "metrics.jsonl", "status.json"]
    assert r.stdout.count("trained") == 1


def test_parallel_sweep_equals_sequential(tmp_path, cfg):
    out = {}
    for mode, extra in (("par", ["--devices", "cpu:2"]), ("seq", [])):
        res = tmp_path / mode
        r = run([sys.executable, "-m", "pebench", "run", "--pe", "rope,alibi", "--config", cfg, "--results", res,
                 "--lengths", "16,32", "--rope-scaling", "none,yarn", *extra])
        assert r.returncode == 0, r.stderr[-2000:]
        out[mode] = {p.name: json.loads(p.read_text()) for p in (res / "records").rglob("*.json")}
    assert set(out["par"]) == set(out["seq"]) and len(out["par"]) == 6
    for k in out["par"]:
        assert out["par"][k]["metrics"]["ppl"] == pytest.approx(out["seq"][k]["metrics"]["ppl"], rel=1e-4), k


def test_ranks_exit_cleanly_launch_after_launch():
    """Without the teardown fix in pebench.distributed, this exact launch aborted at exit in 11 of 24 tries on
    a 2-core machine (0 of 24 with it): 8 launches miss a regression with probability (13/24)^8 < 1%."""
    helper = os.path.join(os.path.dirname(__file__), "helpers", "ddp_teardown.py")
    for i in range(8):
        r = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", helper])
        assert r.returncode == 0, f"launch {i + 1}: exit {r.returncode}\n{r.stderr[-1500:]}"


def test_sweep_jobs_carry_every_given_option():
    from pebench.config import load_config
    from pebench.sweep import jobs_for, plan_runs

    plan = plan_runs(load_config("tiny"), ["rope", "alibi"], [3])
    opts = {"--config": "tiny", "--overlay": ["a.yaml", "b.yaml"], "--steps": 7, "--data": None,
            "--text-field": None, "--compile": False, "--lengths": "128,256", "--max-tokens": None}
    rope, alibi = jobs_for(plan, "res", opts, ["none", "yarn"], "test", overwrite=False)
    assert rope.train_args == ["train", "--pe", "rope", "--seed", "3", "--config", "tiny", "--overlay", "a.yaml",
                               "--overlay", "b.yaml", "--steps", "7", "--no-compile", "--results", "res", "--resume"]
    assert rope.eval_args == ["eval", "--run", "rope-tiny-s3", "--split", "test", "--lengths", "128,256",
                              "--results", "res", "--rope-scaling", "none,yarn"]
    assert "--rope-scaling" not in alibi.eval_args
