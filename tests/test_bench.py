"""`pebench bench` end to end on a micro config: every row measured, files written (no timing asserts)."""

from dataclasses import replace

import pandas as pd
import yaml

from pebench.cli import app
from pebench.perf.bench import matmul_peak, measure
from support import runner


def test_measure_train_and_eval_in_process():
    cfg = {"vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16, "pe": "t5"}
    tr = measure(cfg, "train", "fast", 16, 4, 1, "cpu")
    ev = measure(cfg, "eval", "reference", 64, 2, 1, "cpu")
    assert tr["tokens_per_s"] > 0 and tr["flops"] > 0 and ev["flops"] is None and ev["peak_mem_mb"] > 0
    assert matmul_peak("cpu", n=256, runs=1, seconds=0.01) > 0


def micro_config(tmp_path):
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16},
                "train": {"batch_size": 4},
                "eval": {"batch_tokens": 64},
            }
        )
    )
    return cfg


def test_bench_cli_writes_table_and_csv(tmp_path):
    """The command end to end, each measurement and both peaks in a worker process of its own (as on any CPU)."""
    cfg = micro_config(tmp_path)
    args = ["--pe", "alibi", "--lengths", "4x", "--repeats", "1", "--no-compile", "--no-reference", "--no-baseline"]
    r = runner.invoke(app, ["bench", "--config", str(cfg), *args, "--results", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "r" / "bench.csv")
    assert list(zip(df.phase, df.path, df.length)) == [("train", "fast", 16), ("eval", "fast", 64)]
    assert (df.tokens_per_s > 0).all() and (df.peak_mem_mb > 0).all()
    md = (tmp_path / "r" / "bench.md").read_text()
    assert "| alibi | train | fast | 16 |" in md and "MFU" in md
    assert "best of 7 runs of >= 0.3 s" in md and "before and" in md
    gflops = df["matmul_peak_gflops"].unique()
    assert len(gflops) == 1 and gflops[0] > 1 and df["threads"].iloc[0] >= 1  # recorded with the table
    from pebench.config import load_config
    from pebench.model.checkpoint import train_flops

    base = load_config(str(cfg))
    flops = train_flops(replace(base, model=replace(base.model, pe="alibi")))
    assert f"Training floor of `pebench run --pe alibi` on this config: {flops:.2e} FLOPs" in md


def test_every_path_is_measured_at_every_length_a_scheme_can_represent(tmp_path, monkeypatch):
    """The plan of measurements (in this process, to keep it quick): training on each path at the context,
    evaluation on the fast path and the reference at each length, none past the learned table's last position."""
    from pebench.config import load_config
    from pebench.perf import bench

    monkeypatch.setattr(bench, "_isolated", lambda fn, device, **kw: getattr(bench, fn)(device=device, **kw))
    tiny_peak = {"n": 128, "runs": 1, "seconds": 0.01}
    rows, peak = bench.run_bench(
        load_config(str(micro_config(tmp_path))),
        ["learned", "alibi"],
        [16, 64],
        "cpu",
        1,
        False,
        True,
        None,
        False,
        tiny_peak,
    )
    got = {(m.scheme, m.phase, m.path, m.length) for m in rows}
    assert len(got) == len(rows) == 10
    for s in ("learned", "alibi"):
        assert {(s, "train", p, 16) for p in ("fast", "reference")} <= got
    # learned cannot represent 4x: no eval row there; alibi has fast and reference at both lengths
    assert {(p, L) for s, ph, p, L in got if s == "learned" and ph == "eval"} == {("fast", 16), ("reference", 16)}
    assert {(p, L) for s, ph, p, L in got if s == "alibi" and ph == "eval"} == {
        (p, L) for p in ("fast", "reference") for L in (16, 64)
    }
    assert peak.before > 0 and all(m.mfu is not None for m in rows if m.phase == "train")


def test_summary_ratios_are_side_by_side_and_the_table_is_contiguous():
    from pebench.perf.bench import Measurement, Peak, summary_markdown

    rows = [
        Measurement("rope", "train", "fast", 16, 1000.0, 100.0, 10.0, 0.4),
        Measurement("rope", "train", "fast+compile", 16, 1250.0, 80.0, 10.0, 0.5),
        Measurement("rope", "train", "x-transformers", 16, 500.0, 200.0, 10.0, 0.2),
        Measurement("shaw", "train", "fast", 16, 800.0, 120.0, 10.0, 0.3),
        Measurement("shaw", "train", "fast+compile", 16, 1000.0, 100.0, 10.0, 0.4),
        Measurement("shaw", "eval", "fast", 64, 900.0, 1.0, 10.0),
        Measurement("shaw", "eval", "reference", 64, 100.0, 9.0, 10.0),
    ]
    lines = summary_markdown(rows, Peak(1e12, 1e12, 2), "cpu").splitlines()
    head = lines.index(
        "| scheme | train step vs rope | compiled, vs rope compiled | eval speedup fast/reference at longest length |"
    )
    assert lines[head + 2] == "| rope | 1.00x | 1.00x |  |"
    assert lines[head + 3] == "| shaw | 1.20x | 1.25x | 9.0x |"
    assert lines[head + 4] == ""
    assert lines[head + 5].endswith("1,250 tok/s (fast+compile) vs 500 tok/s = 2.50x")


def test_mfu_is_over_the_higher_peak_and_an_implausible_one_is_flagged():
    from pebench.perf.bench import Measurement, Peak, apply_peak, summary_markdown

    rows = [
        Measurement("rope", "train", "fast", 16, 1000.0, 100.0, 10.0, model_flops=0.6e12),
        Measurement("alibi", "train", "fast", 16, 1000.0, 100.0, 10.0, model_flops=1.1e12),
        Measurement("alibi", "eval", "fast", 64, 1000.0, 100.0, 10.0),
    ]
    peak = Peak(before=1.0e12, after=1.2e12, threads=2)
    apply_peak(rows, peak)
    assert rows[0].mfu == 0.5 and rows[1].mfu == 1.1e12 / 1.2e12 and rows[2].mfu is None
    md = summary_markdown(rows, peak, "cpu")
    assert "matmul peak 1,200 GFLOP/s" in md and "1,000 before and 1,200 after" in md
    assert "MFU up to 92% (alibi, fast) is implausibly high" in md
    apply_peak(rows[:1], peak)
    assert "implausibly" not in summary_markdown(rows[:1], peak, "cpu")


def test_a_failed_worker_is_one_line_naming_what_it_measured_and_its_error_not_a_warning():
    """A worker killed without a traceback (its last stderr line a compiler warning) and one that raised: the line
    names the scheme, phase, path and length, the signal or exit code, and the exception, never the warning."""
    from pebench.perf.bench import worker_failure

    kw = {"model_cfg": {"pe": "xpos"}, "phase": "train", "path": "fast+compile", "length": 128}
    warning = "W1205 13:15:49.401000 9471 torch/_dynamo/variables/tensor.py:1759] [0/0] Graph break"
    line = worker_failure(-9, f"{warning}\n", kw)
    assert line.startswith("bench: the worker measuring scheme=xpos phase=train path=fast+compile length=128")
    assert "killed by signal 9" in line and "without an error message" in line and "W1205" not in line
    raised = worker_failure(1, f"Traceback (most recent call last):\nRuntimeError: bad shape\n{warning}\n", kw)
    assert "exited with code 1: RuntimeError: bad shape" in raised and "W1205" not in raised
    assert worker_failure(1, "", {}).startswith("bench: the worker measuring the matmul peak exited with code 1")
