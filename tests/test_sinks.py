"""Attention sinks (GPT-OSS): a learned logit per layer and head, one more always-present term of the softmax with
no value. Checked against the softmax over [scores, sink] written out, on every path the model attends through.
Scalable-Softmax beside it: logits times a learned s_h ln(n), checked the same way."""

import json

import pytest
import torch

from pebench.model.decoder import DecoderLM
from pebench.util.errors import UsageError
from support import invoke, tiny_model_config, write_micro


def _by_hand(attn, m, x, T):
    """softmax([q.k / sqrt(d) + term, s_h]) over the keys and the sink, the sink's value 0."""
    q, k, v, mod = attn.qkv_and_term(x, m.pe, torch.arange(T))
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mod is not None:
        b, h = torch.arange(1).view(-1, 1, 1, 1), torch.arange(4).view(1, -1, 1, 1)
        s = s + mod.bias(b, h, torch.arange(T).view(1, 1, -1, 1), torch.arange(T).view(1, 1, 1, -1))
    s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    sink = attn.sink.view(1, 4, 1, 1).expand(1, 4, T, 1).to(s.dtype)
    w = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :T]
    return attn.proj((w @ v).transpose(1, 2).reshape(1, T, 32))


@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_a_sink_is_one_more_softmax_term_with_no_value(pe):
    torch.manual_seed(0)
    m = DecoderLM(tiny_model_config(pe, n_layers=1, attention_sinks=True)).double().eval()
    attn, T = m.blocks[0].attn, 24
    with torch.no_grad():
        attn.sink.copy_(torch.tensor([-1.0, 0.0, 2.0, 5.0]))
        x = torch.randn(1, T, 32, dtype=torch.float64)
        want = _by_hand(attn, m, x, T)
        assert torch.allclose(attn(x, m.pe, torch.arange(T)), want, atol=1e-12)
        assert torch.allclose(attn.forward_from(x, m.pe, torch.arange(T), None, 10), want[:, 10:], atol=1e-6)
        attn.sink.fill_(-1e4)  # a sink no head can reach: plain attention
        plain = DecoderLM(tiny_model_config(pe, n_layers=1)).double().eval()
        plain.load_state_dict({k: v for k, v in m.state_dict().items() if "sink" not in k})
        assert torch.allclose(attn(x, m.pe, torch.arange(T)), plain.blocks[0].attn(x, plain.pe, torch.arange(T)))


def test_the_sink_learns_and_is_refused_where_a_scheme_owns_attention():
    m = DecoderLM(tiny_model_config("rope", attention_sinks=True))
    x = torch.randint(0, 256, (2, 16))
    m(x, x)[1].backward()
    assert all(b.attn.sink.grad is not None and b.attn.sink.grad.abs().sum() > 0 for b in m.blocks)
    with pytest.raises(UsageError, match="computes its attention itself"):
        DecoderLM(tiny_model_config("stick-breaking", attention_sinks=True))


def test_sinks_train_under_their_own_name_and_label(tmp_path):
    res, cfg = tmp_path / "res", write_micro(tmp_path)
    assert invoke("train", "--pe", "rope", "--config", cfg, "--sinks", "--results", res).exit_code == 0
    assert invoke("train", "--pe", "rope", "--config", cfg, "--results", res).exit_code == 0  # beside, not over
    assert invoke("eval", "--lengths", "16,64", "--rope-scaling", "", "--results", res).exit_code == 0
    labels = {json.loads(p.read_text())["label"] for p in (res / "records").rglob("*.json")}
    assert labels == {"rope", "rope sink"} and (res / "runs" / "rope-micro-sinks-s0").is_dir()


@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_scalable_softmax_multiplies_each_heads_logits_by_s_ln_n(pe):
    """Scalable-Softmax (Nakanishi 2025): softmax(s_h ln(i + 1) (q.k / sqrt(d) + term)), s learned per head."""
    torch.manual_seed(1)
    m = DecoderLM(tiny_model_config(pe, n_layers=1, ssmax=True)).double().eval()
    attn, T = m.blocks[0].attn, 20
    assert torch.allclose(attn.ssmax.detach(), torch.full((4,), 0.43, dtype=torch.float64))  # the start
    with torch.no_grad():
        attn.ssmax.copy_(torch.tensor([0.2, 0.43, 1.0, 2.0]))
        x = torch.randn(1, T, 32, dtype=torch.float64)
        plain = DecoderLM(tiny_model_config(pe, n_layers=1)).double().eval()
        plain.load_state_dict({k: v for k, v in m.state_dict().items() if "ssmax" not in k})
        q, k, v, mod = plain.blocks[0].attn.qkv_and_term(x, plain.pe, torch.arange(T))
        s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        if mod is not None:
            ii = torch.arange(T)
            s = s + mod.bias(
                torch.arange(1).view(-1, 1, 1, 1),
                torch.arange(4).view(1, -1, 1, 1),
                ii.view(1, 1, -1, 1),
                ii.view(1, 1, 1, -1),
            )
        f = attn.ssmax.view(1, 4, 1, 1) * torch.log(torch.arange(1, T + 1, dtype=torch.float64)).view(1, 1, T, 1)
        w = torch.softmax((f * s).masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), dim=-1)
        want = attn.proj((w @ v).transpose(1, 2).reshape(1, T, 32))
        assert torch.allclose(attn(x, m.pe, torch.arange(T)), want, atol=1e-10)
    m2 = DecoderLM(tiny_model_config(pe, ssmax=True))
    xi = torch.randint(0, 256, (2, 16))
    m2(xi, xi)[1].backward()
    assert all(b.attn.ssmax.grad.abs().sum() > 0 for b in m2.blocks)
