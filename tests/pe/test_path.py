"""PaTH (Yang et al. 2025) against one explicit product of Householder-like matrices per (query, key) pair, through
the model's attention path (blocks of queries), its gradients, and what makes it a position encoding: only the
tokens between key and query set the score."""

import pytest
import torch
import torch.nn.functional as F

from pebench.model.attention import attend_normalised
from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.path import householder_factors, path_reference, path_scores, path_scores_ut
from pebench.util.errors import UsageError
from support import invoke, tiny_model_config, write_micro


def _factors(T, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = F.normalize(torch.randn(1, 2, T, d, generator=g, dtype=torch.float64), dim=-1)
    return w, 2 * torch.rand(1, 2, T, generator=g, dtype=torch.float64)


def test_scores_equal_the_product_of_transforms_pair_by_pair():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 10, 4, dtype=torch.float64), torch.randn(1, 2, 10, 4, dtype=torch.float64)
    w, beta = _factors(10, 4)
    s = path_scores(q, k, w, beta, 0)
    for h in range(2):
        ref = path_reference(q[0, h], k[0, h], w[0, h], beta[0, h])
        assert torch.equal(torch.isinf(s[0, h]), torch.isinf(ref))
        assert torch.allclose(s[0, h].nan_to_num(0, 0, 0), ref.nan_to_num(0, 0, 0), atol=1e-12)
    assert torch.allclose(path_scores(q[:, :, 6:], k, w, beta, 6), s[:, :, 6:])  # a block of queries: its rows
    ut = path_scores_ut(q, k, w, beta, 0)  # the UT form: one triangular solve, the same scores
    assert torch.equal(torch.isinf(ut), torch.isinf(s))
    assert torch.allclose(ut.nan_to_num(0, 0, 0), s.nan_to_num(0, 0, 0), atol=1e-12)
    block = path_scores_ut(q[:, :, 6:], k, w, beta, 6)
    assert torch.allclose(block.nan_to_num(0, 0, 0), ut[:, :, 6:].nan_to_num(0, 0, 0))
    # beta = 0 everywhere: every transform is I, and PaTH is attention with no position at all
    plain = (q @ k.transpose(-1, -2)) / 2.0
    for form in (path_scores, path_scores_ut):
        assert torch.allclose(
            form(q, k, w, torch.full_like(beta, 1e-9) if form is path_scores_ut else torch.zeros_like(beta), 0),
            plain.masked_fill(torch.ones(10, 10).triu(1).bool(), float("-inf")),
        )


def test_only_the_tokens_between_key_and_query_matter():
    """Change the transform of a token outside (j, i]: s_ij stays; change one inside: it moves."""
    torch.manual_seed(1)
    q, k = torch.randn(1, 2, 8, 4, dtype=torch.float64), torch.randn(1, 2, 8, 4, dtype=torch.float64)
    w, beta = _factors(8, 4)
    s = path_scores(q, k, w, beta, 0)
    w2 = w.clone()
    w2[:, :, 2] = F.normalize(torch.randn(1, 2, 4, dtype=torch.float64), dim=-1)  # token 2's transform
    s2 = path_scores(q, k, w2, beta, 0)
    assert torch.allclose(s2[:, :, 6, 2], s[:, :, 6, 2]) and torch.allclose(s2[:, :, 1, 0], s[:, :, 1, 0])  # outside
    assert not torch.allclose(s2[:, :, 6, 1], s[:, :, 6, 1])  # token 2 lies between key 1 and query 6


def test_gradients_match_finite_differences_and_reach_the_transforms():
    torch.manual_seed(2)
    ctx = PEContext(8, 2, 1, 16)
    pe = build_pe("path", ctx).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    q = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)

    def f(q, k):
        return pe.attention_scores(q, k, 0, x, 0).nan_to_num(0, 0, 0)

    assert torch.autograd.gradcheck(f, (q, k))
    f(q, k).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in pe.parameters())
    assert {n for n, _ in pe.named_parameters()} == {"w_down", "w_up", "w_conv", "b_proj", "b_bias"}
    w, beta = householder_factors(x, pe.directions(x, 0), pe.b_proj[0], pe.b_bias[0])
    assert (
        torch.allclose(w.norm(dim=-1), torch.ones(1, 2, 5, dtype=torch.float64))
        and (0 < beta).all()
        and (beta < 2).all()
    )


def test_the_model_attends_through_the_schemes_own_scores():
    torch.manual_seed(3)
    m = DecoderLM(tiny_model_config("path", n_layers=1)).double().eval()
    attn, x, pos = m.blocks[0].attn, torch.randn(1, 20, 32, dtype=torch.float64), torch.arange(20)
    with torch.no_grad():
        q, k, v, _ = attn.qkv_and_term(x, m.pe, pos)
        s = m.pe.attention_scores(q, k, 0, x, 0)
        want = attn.proj((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(1, 20, 32))
        assert torch.allclose(attn(x, m.pe, pos), want, atol=1e-12)
        assert torch.allclose(attend_normalised(q, k, v, m.pe, 0, x, chunk=6), torch.softmax(s, -1) @ v, atol=1e-12)
        assert torch.allclose(attn.forward_from(x, m.pe, pos, None, 12), want[:, 12:], atol=1e-12)
        m.pe.ut_max_eval = 8  # past it, the naive form: the same output
        assert torch.allclose(attn(x, m.pe, pos), want, atol=1e-12)


def test_the_ut_form_keeps_the_naive_forms_gradients():
    torch.manual_seed(4)
    q, k = (torch.randn(2, 2, 12, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    w, beta = _factors(12, 4)
    w, beta = w.expand(2, -1, -1, -1).requires_grad_(), beta.expand(2, -1, -1).requires_grad_()
    grads = []
    for form in (path_scores, path_scores_ut):
        torch.manual_seed(5)
        loss = (form(q, k, w, beta, 0).nan_to_num(0, 0, 0) * torch.randn(2, 2, 12, 12, dtype=torch.float64)).sum()
        grads.append(torch.autograd.grad(loss, (q, k, w, beta)))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("pe", ["path", "stick-breaking"])
def test_the_schemes_that_own_attention_train_and_evaluate_to_16x(tmp_path, pe):
    res = tmp_path / "res"
    assert invoke("train", "--pe", pe, "--config", write_micro(tmp_path), "--results", res).exit_code == 0
    r = invoke("eval", "--lengths", "1x,16x", "--results", res)
    assert r.exit_code == 0, r.output
    recs = list((res / "records" / f"{pe}-micro-s0").glob("*.json"))
    assert len(recs) == 2 and all('"status": "ok"' in p.read_text() for p in recs)


def test_the_directions_follow_the_reference_layer_and_the_former_form_is_an_option():
    """w_t = SiLU(causal depthwise conv of x W_down W_up over the last 3 tokens), by hand for one token; with
    rank=0 and conv=0, x W as before."""
    torch.manual_seed(6)
    ctx = PEContext(8, 2, 2, 16)
    pe = build_pe("path", ctx).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    u = x @ pe.w_down[1] @ pe.w_up[1]  # [1, 5, 8]
    t, c = 3, 6
    by_hand = sum(pe.w_conv[1, c, s] * u[0, t - 2 + s, c] for s in range(3))
    got = pe.directions(x, 1)
    assert torch.allclose(got[0, t, c], F.silu(by_hand))
    want0 = F.silu(pe.w_conv[1, :, 2] * u[0, 0])  # the first token sees no earlier one
    assert torch.allclose(got[0, 0], want0)
    old = build_pe("path", ctx, {"rank": 0, "conv": 0}).double()
    assert {n for n, _ in old.named_parameters()} == {"w_proj", "b_proj", "b_bias"}
    assert torch.allclose(old.directions(x, 0), x @ old.w_proj[0])
    with pytest.raises(UsageError, match="path rank must be >= 0"):
        build_pe("path", ctx, {"rank": -1})
