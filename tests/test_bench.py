"""`pebench bench` end to end on a micro config: every row measured, files written (no timing asserts)."""
import pandas as pd
import yaml
from typer.testing import CliRunner

from pebench.bench import matmul_peak, measure
from pebench.cli import app


def test_measure_train_and_eval_in_process():
    cfg = {"vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16, "pe": "t5"}
    tr = measure(cfg, "train", "fast", 16, 4, 1, "cpu")
    ev = measure(cfg, "eval", "reference", 64, 2, 1, "cpu")
    assert tr["tokens_per_s"] > 0 and tr["flops"] > 0 and ev["flops"] is None and ev["peak_mem_mb"] > 0
    assert matmul_peak("cpu", n=256, repeats=1) > 0


def test_bench_cli_writes_table_and_csv(tmp_path):
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(yaml.safe_dump({"model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16},
                                   "train": {"batch_size": 4}, "eval": {"batch_tokens": 64}}))
    r = CliRunner().invoke(app, ["bench", "--config", str(cfg), "--pe", "learned,alibi", "--multiples", "1,4",
                                 "--repeats", "1", "--no-compile", "--no-baseline", "--results", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "r" / "bench.csv")
    # learned cannot represent 4x: no eval row there; alibi has fast and reference at both lengths
    assert set(df[df.scheme == "learned"]["length"]) == {16}
    assert len(df[(df.scheme == "alibi") & (df.phase == "eval")]) == 4
    md = (tmp_path / "r" / "bench.md").read_text()
    assert "| alibi | train | fast | 16 |" in md and "MFU" in md
