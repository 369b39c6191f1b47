"""Options for any scheme: random training positions, log-n and DroPE logit scaling, continuing a run with another
scheme (DroPE), and a user's own scheme from a file or an entry point."""

import json
import math
import subprocess
import sys

import pytest
import torch
import yaml

from pebench.cli import app
from pebench.model.decoder import DecoderLM
from pebench.model.logit_scales import logit_scale_factors
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.alibi import alibi_slopes
from pebench.model.pe.base import at_positions
from pebench.util.errors import UsageError
from support import micro as micro_cfg
from support import runner, tiny_model_config

MICRO = micro_cfg()


@pytest.fixture(autouse=True)
def _forget_user_schemes():
    """Schemes a test registers from a file or an entry point leave the registry with the test."""
    from pebench.model.pe import SCHEMES, SOURCES

    before = set(SCHEMES.names())
    yield
    for name in set(SCHEMES.names()) - before:
        SCHEMES.unregister(name)
        SOURCES.pop(name, None)


@pytest.fixture
def micro(tmp_path):
    p = tmp_path / "micro.yaml"
    p.write_text(yaml.safe_dump(MICRO))
    return p


def test_a_logit_term_at_random_positions_is_the_term_of_those_positions():
    alibi = build_pe("alibi", PEContext(32, 4, 1, 16))
    pos = torch.tensor([0, 3, 7, 20, 41])
    mod = at_positions(alibi.score_mod(torch.zeros(1, 4, 5, 8), 0), pos)
    b, h = torch.zeros(1, 1, 1, 1, dtype=torch.long), torch.arange(4).view(1, 4, 1, 1)
    bias = mod.bias(b, h, torch.arange(5).view(1, 1, 5, 1), torch.arange(5).view(1, 1, 1, 5))
    for hh, m in enumerate(alibi_slopes(4)):
        assert torch.allclose(bias[0, hh], -m * (pos[:, None] - pos[None, :]).float())
    shaw = build_pe("shaw", PEContext(32, 4, 1, 16), {"k_max": 4})
    with pytest.raises(UsageError, match="not shaw"):
        at_positions(shaw.score_mod(torch.zeros(1, 4, 5, 8), 0), pos)


@pytest.mark.parametrize("pe", ["rope", "learned", "kerple", "sinusoidal"])
def test_training_with_random_positions(tmp_path, micro, pe):
    over = tmp_path / "rp.yaml"
    over.write_text("train: {random_positions: 64}")
    res = tmp_path / "res"
    r = runner.invoke(app, ["train", "--pe", pe, "--config", str(micro), "--overlay", str(over), "--results", str(res)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "--lengths", "16,64", "--results", str(res)])
    assert r.exit_code == 0, r.output
    recs = [json.loads(p.read_text()) for p in (res / "records").rglob("*.json")]
    assert {rec["length"] for rec in recs if rec["status"] == "ok"} == {16, 64}  # learned's table holds M = 64
    labels = {rec["label"] for rec in recs}  # RoPE's scalings too (eval's default: each run's own list)
    assert f"{pe} rp64" in labels and all(lab.endswith(" rp64") for lab in labels)  # never mixed with 0..T-1 runs


def test_random_positions_below_the_context_are_refused(tmp_path, micro):
    over = tmp_path / "rp.yaml"
    over.write_text("train: {random_positions: 8}")
    r = runner.invoke(app, ["train", "--config", str(micro), "--overlay", str(over), "--results", str(tmp_path)])
    assert r.exit_code == 2 and "must be >= model.context" in r.output


def test_logit_scale_factors():
    assert logit_scale_factors("none", 64, 16, 0.4, "cpu") is None
    assert logit_scale_factors("logn", 16, 16, 0.4, "cpu") is None  # within the training context: no change
    f = logit_scale_factors("logn", 64, 16, 0.4, "cpu")
    assert f[:16].eq(1).all() and f[63].item() == pytest.approx(math.log(64) / math.log(16))
    d = logit_scale_factors("drope", 64, 16, 0.412, "cpu")
    assert torch.allclose(d, torch.full((64,), 1 + 0.412 * math.log(4)))
    # Llama 4's temperature, floor_scale = the context (16): 1 within it, 1 + 0.1 ln 2 on positions 16-31, ...
    assert logit_scale_factors("llama4", 16, 16, 0.412, "cpu") is None
    t = logit_scale_factors("llama4", 64, 16, 0.412, "cpu")
    assert t[:16].eq(1).all() and t[16].item() == pytest.approx(1 + 0.1 * math.log(2))
    assert t[32].item() == pytest.approx(1 + 0.1 * math.log(3)) and t[63].item() == pytest.approx(1 + 0.1 * math.log(4))


def test_the_log_n_strength_gamma():
    """logn:gamma=G, the strength swept as Chen et al. sweep gamma in gamma log n: 1 + G (log n / log C - 1) beyond
    the context C (n = i + 1), 1 within it; G = 1 is log-n itself, G = 0 no scaling. A planted power form
    (log n / log C)^G, which agrees at G = 1, differs at G = 2."""
    T, C = 256, 16
    one, plain = logit_scale_factors("logn:gamma=1", T, C, 0.0, "cpu"), logit_scale_factors("logn", T, C, 0.0, "cpu")
    assert torch.equal(one, plain) and logit_scale_factors("logn:gamma=0", T, C, 0.0, "cpu") is None
    two = logit_scale_factors("logn:gamma=2", T, C, 0.0, "cpu").double()
    n = torch.arange(1, T + 1, dtype=torch.float64)
    want = torch.where(n > C, 1 + 2 * (n.log() / math.log(C) - 1), torch.ones_like(n))
    assert torch.allclose(two, want, rtol=1e-6) and two[T - 1].item() == pytest.approx(3.0, rel=1e-6)  # n = C^2
    power = torch.where(n > C, (n.log() / math.log(C)) ** 2, torch.ones_like(n))
    assert not torch.allclose(power, want, rtol=1e-3)
    with pytest.raises(UsageError, match="gamma must be >= 0"):
        logit_scale_factors("logn:gamma=-1", T, C, 0.0, "cpu")


@pytest.mark.parametrize("pe", ["alibi", "rope", "none"])
def test_a_logit_scale_multiplies_whole_logits(pe):
    """The layer's output equals softmax(f_i * (q.k / sqrt(d) + term)) v computed by hand, f = log-n factors."""
    torch.manual_seed(0)
    m = DecoderLM(tiny_model_config(pe, n_layers=1)).double().eval()
    attn, T = m.blocks[0].attn, 48
    x = torch.randn(1, T, 32, dtype=torch.float64)
    f = logit_scale_factors("logn", T, 16, 0.412, "cpu").double()
    pos = torch.arange(T)
    with torch.no_grad():
        got = attn(x, m.pe, pos, f)
        q, k, v = attn.qkv(x).view(1, T, 3, 4, 8).permute(2, 0, 3, 1, 4)
        q, k = m.pe.rotate(q, k, pos, 0)
        logits = q @ k.transpose(-1, -2) / math.sqrt(8)
        if pe == "alibi":
            logits = logits - torch.tensor(alibi_slopes(4)).view(1, 4, 1, 1) * (pos[:, None] - pos[None, :])
        logits = logits * f[:, None]
        logits = logits.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        want = attn.proj((torch.softmax(logits, -1) @ v).transpose(1, 2).reshape(1, T, 32))
        plain = attn(x, m.pe, pos, None)
    assert torch.allclose(got, want, atol=1e-10)
    assert not torch.allclose(got, plain, atol=1e-6)


def test_drope_continues_a_rope_run_without_positions_and_names_what_it_did_not_load(tmp_path, micro):
    res = tmp_path / "res"
    assert (
        runner.invoke(app, ["train", "--pe", "rope,learned", "--config", str(micro), "--results", str(res)]).exit_code
        == 0
    )
    r = runner.invoke(
        app, ["train", "--pe", "none", "--init-from", "rope-micro-s0", "--steps", "2", "--results", str(res)]
    )
    assert r.exit_code == 0, r.output
    assert "not loaded" not in r.output and "left at initialisation" not in r.output  # rope has no weights
    child = torch.load(res / "runs" / "rope-micro-s0-to-none" / "checkpoint.pt", weights_only=True)
    cfg = yaml.safe_load((res / "runs" / "rope-micro-s0-to-none" / "config.yaml").read_text())
    assert cfg["model"]["pe"] == "none" and cfg["run"]["parent"] == "rope-micro-s0"
    assert cfg["run"]["recalibration"] == {"from_scheme": "rope", "to_scheme": "none"}
    assert set(child["model"]) == set(
        torch.load(res / "runs" / "rope-micro-s0" / "checkpoint.pt", weights_only=True)["model"]
    )
    r = runner.invoke(
        app, ["train", "--pe", "none", "--init-from", "learned-micro-s0", "--steps", "1", "--results", str(res)]
    )
    assert r.exit_code == 0 and "not loaded (no place in this model): pe.table" in r.output
    r = runner.invoke(
        app,
        [
            "eval",
            "--run",
            "rope-micro-s0-to-none",
            "--lengths",
            "16,32",
            "--logit-scale",
            "drope",
            "--results",
            str(res),
        ],
    )
    assert r.exit_code == 0, r.output
    labels = {json.loads(p.read_text())["label"] for p in (res / "records" / "rope-micro-s0-to-none").glob("*.json")}
    assert labels == {"none+drope from-rope"}
    r = runner.invoke(app, ["eval", "--run", "rope-micro-s0", "--logit-scale", "bogus", "--results", str(res)])
    assert r.exit_code == 2 and "unknown logit scale 'bogus'; valid: none, logn, drope, llama4" in r.output


USER_SCHEME = """
import torch
from pebench.model.pe.base import PositionalEncoding, ScoreMod


class HalfAlibi(PositionalEncoding):
    name = "half-alibi"
    description = "a user's scheme: ALiBi with one slope"
    static_bias = True

    def score_mod(self, q, layer, k=None, x=None):
        return ScoreMod(lambda s, b, h, qi, ki: s - 0.5 * (qi - ki), q.dtype)
"""


def test_a_users_scheme_from_a_file_runs_through_train_eval_report_and_a_new_process(tmp_path, micro):
    f = tmp_path / "my_scheme.py"
    f.write_text(USER_SCHEME)
    res = tmp_path / "res"
    r = runner.invoke(app, ["train", "--pe", f"{f}:HalfAlibi", "--config", str(micro), "--results", str(res)])
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load((res / "runs" / "half-alibi-micro-s0" / "config.yaml").read_text())
    assert cfg["model"]["pe"] == "half-alibi" and cfg["model"]["pe_source"].endswith("my_scheme.py:HalfAlibi")
    out = subprocess.run(
        [sys.executable, "-m", "pebench", "eval", "--lengths", "16,32", "--results", str(res)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr  # a fresh process finds the scheme from the run's config
    r = runner.invoke(app, ["report", "--format", "md", "--results", str(res)])
    assert r.exit_code == 0 and "half-alibi" in r.output
    for bad, msg in (
        (f"{f}:Nope", "defines no 'Nope'"),
        (f"{tmp_path}/none.py:X", "file not found"),
        ("x.txt:Y", "path/to/file.py:ClassName"),
    ):
        r = runner.invoke(app, ["train", "--pe", bad, "--config", str(micro), "--results", str(res)])
        assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_an_installed_entry_point_registers_a_scheme(monkeypatch, tmp_path):
    import importlib.metadata as md

    from pebench.model import pe as pe_pkg

    f = tmp_path / "ep_scheme.py"
    f.write_text(USER_SCHEME.replace("half-alibi", "ep-alibi"))
    sys.path.insert(0, str(tmp_path))
    try:
        ep = md.EntryPoint(name="ep-alibi", value="ep_scheme:HalfAlibi", group="pebench.schemes")
        monkeypatch.setattr(md, "entry_points", lambda group=None: [ep] if group == "pebench.schemes" else [])
        assert pe_pkg.resolve_schemes("ep-alibi") == ["ep-alibi"]
        assert pe_pkg.SOURCES["ep-alibi"] == "entry-point:ep-alibi"
        m = DecoderLM(tiny_model_config("ep-alibi", pe_source="entry-point:ep-alibi"))
        assert torch.isfinite(m(torch.randint(0, 256, (1, 8)))).all()
    finally:
        sys.path.remove(str(tmp_path))
