"""Evaluation's precision (``--eval-precision``): how auto resolves, the logit term kept in fp32 under bf16 on the
CPU, the precision each record names, and a bad value refused before anything runs."""

from types import SimpleNamespace

import pytest
import torch

from pebench.model import attention, device
from pebench.model.attention import attend
from pebench.model.pe import PEContext, build_pe
from pebench.util.errors import UsageError


def test_auto_is_bf16_on_cuda_and_on_cpus_with_native_bf16(monkeypatch):
    cpu, cuda = torch.device("cpu"), SimpleNamespace(type="cuda")
    for native, want in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(device, "native_bf16_cpu", lambda native=native: native)
        assert device.eval_precision(cpu) == want and device.eval_precision(cuda) == "bf16"
        assert device.eval_precision(cpu, "fp32") == "fp32" and device.eval_precision(cpu, "bf16") == "bf16"
    with pytest.raises(UsageError, match="--eval-precision must be one of auto, fp32, bf16"):
        device.eval_precision(cpu, "fp16")


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_cpu_bf16_inference_keeps_the_logit_term_in_fp32(name):
    """Under bf16 autocast on the CPU the fused kernel gets the term in fp32 (rounded to bf16 a term moves by up to
    1/256 of its size, whole units for a term of hundreds), and the output matches an fp32 computation on the same
    rounded inputs to within its own rounding."""
    torch.manual_seed(0)
    pe = build_pe(name, PEContext(128, 4, 1, 16)).float()
    qb, kb, vb = (torch.randn(1, 4, 600, 32).bfloat16() for _ in range(3))
    attention._BIAS_CACHE.clear()
    with torch.no_grad():
        q, k, v = (t.float() for t in (qb, kb, vb))  # the same rounded inputs in fp32: the reference
        ref = attend(q, k, v, pe.score_mod(q, 0, k, None), "math")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = attend(qb, kb, vb, pe.score_mod(qb, 0, kb, None), "sdpa")
    assert out.dtype == torch.bfloat16
    assert [b.dtype for b in attention._BIAS_CACHE.values()] == [torch.float32]
    assert (out.float() - ref).abs().max() < 0.03  # the output's own rounding to bf16 (and the kernel's weights')
    attention._BIAS_CACHE.clear()


def test_records_name_the_precision_they_were_evaluated_in(tmp_path):
    """fp32 and bf16 evaluations of one run: each record says which; bf16's perplexity within 0.5% of fp32's (the
    tolerance results/speed/eval-precision.md holds the main job's models to)."""
    from dataclasses import replace

    from pebench.config import config_from_dict
    from pebench.eval.evaluate import EvalRequest, evaluate_run
    from pebench.results import ResultsDir
    from pebench.train import TrainJob, train
    from support import micro

    cfg = config_from_dict(micro(train={"steps": 8}), name="micro")
    cfg = replace(cfg, model=replace(cfg.model, pe="alibi"))
    rd = ResultsDir(tmp_path / "res")
    train(TrainJob(cfg, rd, "r", device="cpu"))
    got = {}
    for p in ("fp32", "bf16"):
        req = EvalRequest(lengths=[16, 64], device="cpu", tasks=[], max_tokens=300, eval_precision=p)
        got[p] = {r["length"]: r for r in evaluate_run(ResultsDir(tmp_path / "res"), "r", req)}
        assert {r["provenance"]["eval_precision"] for r in got[p].values()} == {p}
    for L, r in got["fp32"].items():
        assert abs(got["bf16"][L]["metrics"]["ppl"] / r["metrics"]["ppl"] - 1) < 0.005, L


def test_a_bad_precision_is_one_line_before_training(tmp_path):
    from support import invoke, write_micro

    res = invoke(
        "run",
        "--config",
        str(write_micro(tmp_path)),
        "--pe",
        "rope",
        "--eval-precision",
        "fp16",
        "--results",
        str(tmp_path / "res"),
    )
    assert res.exit_code != 0 and "--eval-precision must be one of auto, fp32, bf16, got 'fp16'" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "res" / "runs").exists()
