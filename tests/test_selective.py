"""Selective attention (Leviathan et al., ICLR 2025, arXiv 2410.02703). The oracle follows the paper's reference
pseudocode line by line in float64 (head 0's causal logits, relu, the first token and the diagonal zeroed, shifted one
query down, summed over queries, subtracted from every head's logits), never pebench's maths; planted wrong forms
(a token masking itself, the first token maskable) are caught; every backend computes the same attention, and a
micro run trains and evaluates with --selective."""

import json

import pytest
import torch

from pebench.model.attention import attend
from pebench.model.decoder import DecoderLM
from pebench.model.selective import selected, selection
from pebench.util.errors import UsageError
from support import invoke, micro_file, tiny_model_config


def oracle(q, k, v, mask_self=False, mask_first=False):
    """softmax(logits - F) v for one batch element, q, k, v [H, T, d] in float64."""
    H, T, d = q.shape
    logits = torch.full((H, T, T), float("-inf"), dtype=torch.float64)
    for h in range(H):
        for i in range(T):
            for j in range(i + 1):
                logits[h, i, j] = q[h, i] @ k[h, j] / d**0.5
    S = torch.relu(logits[0].clone().nan_to_num(neginf=0.0))  # head 0; relu(-inf) = 0 above the diagonal
    if not mask_first:
        S[:, 0] = 0.0  # do not mask <BOS>
    if not mask_self:
        S = S * (1 - torch.eye(T, dtype=torch.float64))  # do not mask self
    S = torch.roll(S, 1, 0)
    S[0] = 0.0  # mask strictly in the future
    F = torch.cumsum(S, 0)
    return torch.softmax(logits - F[None], dim=-1) @ v


def qkv(T=12, H=3, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, H, T, d, generator=g, dtype=torch.float64) * 2 for _ in range(3)]


@pytest.mark.parametrize("backend", ["math", "chunked", "sdpa"])
def test_selective_attention_is_the_papers_pseudocode(backend):
    q, k, v = qkv()
    mod = selected(None, selection(q, k, None, q.shape[-1] ** -0.5))
    got = attend(q.float(), k.float(), v.float(), mod, backend)
    want = oracle(q[0], k[0], v[0])
    assert torch.allclose(got[0].double(), want, atol=1e-4)
    plain = oracle(q[0], k[0], v[0] * 0 + v[0])  # the same function, checked against a planted wrong form:
    assert torch.allclose(plain, want)
    for wrong in (oracle(q[0], k[0], v[0], mask_self=True), oracle(q[0], k[0], v[0], mask_first=True)):
        assert not torch.allclose(got[0].double(), wrong, atol=1e-3)


def test_selection_joins_the_schemes_term_and_gradients_flow():
    """ALiBi's penalty is in head 0's logits that select; the selection's mask reaches q and k by autograd."""
    torch.manual_seed(0)
    model = DecoderLM(tiny_model_config("alibi", selective=True, context=16))
    x = torch.randint(0, 256, (2, 20))
    model(x).float().logsumexp(-1).sum().backward()
    assert model.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    plain = DecoderLM(tiny_model_config("alibi", context=16))
    with torch.no_grad():  # logits large enough that head 0 selects (its relu is 0 at small initial logits)
        for block in model.blocks:
            block.attn.qkv.weight.mul_(8)
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(model(x), plain(x), atol=1e-4)
        assert torch.allclose(model(x)[:, :2], plain(x)[:, :2], atol=1e-5)  # the first two queries mask nothing


def test_selective_with_a_scheme_that_owns_its_attention_is_one_line():
    with pytest.raises(UsageError, match="model.selective .* cannot be combined with the scheme 'stick-breaking'"):
        DecoderLM(tiny_model_config("stick-breaking", selective=True))


def test_train_and_eval_with_selective(tmp_path_factory, tmp_path):
    cfg = micro_file(tmp_path_factory)
    r = invoke("train", "--pe", "rope", "--config", cfg, "--selective", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    r = invoke(
        "eval", "--run", "rope-micro-selective-s0", "--lengths", "1x,2x", "--rope-scaling", "", "--results", tmp_path
    )
    assert r.exit_code == 0, r.output
    recs = [json.loads(p.read_text()) for p in (tmp_path / "records").rglob("*.json")]
    assert {x["label"] for x in recs} == {"rope selective"} and len(recs) == 2
