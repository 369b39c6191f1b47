"""alpha-entmax and ASEntmax (Vasylenko et al. 2025, arXiv 2506.16640): the weights against their definition (the
threshold where they sum to 1, by plain bisection), the special cases (alpha 1 is softmax, alpha 2 sparsemax's
projection by hand, exact zeros), the closed-form gradient against finite differences, ASEntmax's temperature by
hand, the model's attention through them (blocked, causal, the tail path) and the combinations refused."""

import math
from dataclasses import replace

import pytest
import torch

from pebench.config import ConfigFlags, resolve_config
from pebench.model.decoder import DecoderLM
from pebench.model.entmax import AdaptiveScale, attend_entmax, entmax, entmax_reference
from pebench.util.errors import UsageError
from support import tiny_model_config


@pytest.mark.parametrize("alpha", [1.5, 1.25, 2.0])
def test_weights_equal_the_definition(alpha):
    torch.manual_seed(0)
    z = torch.randn(5, 9, dtype=torch.float64) * 2
    p = entmax(z, alpha)
    for r in range(5):
        assert torch.allclose(
            p[r], torch.tensor(entmax_reference(z[r].tolist(), alpha), dtype=torch.float64), atol=1e-9
        )
    assert torch.allclose(p.sum(-1), torch.ones(5, dtype=torch.float64)) and (p >= 0).all()


def test_special_cases_softmax_sparsemax_and_exact_zeros():
    z = torch.tensor([[3.0, 0.0, -3.0], [0.5, 0.2, 0.1]], dtype=torch.float64)
    assert torch.equal(entmax(z, 1), torch.softmax(z, -1))
    assert torch.allclose(entmax(z, 1.0001), torch.softmax(z, -1), atol=1e-3)  # alpha -> 1
    # sparsemax, the Euclidean projection onto the simplex, by hand: [0.5, 0.2, 0.1] - tau, tau = (0.8 - 1) / 3
    assert torch.allclose(entmax(z, 2.0)[1], torch.tensor([0.5, 0.2, 0.1], dtype=torch.float64) + (1 - 0.8) / 3)
    assert entmax(z, 1.5)[0].tolist() == [1.0, 0.0, 0.0]  # far below the best: exactly zero
    masked = torch.tensor([[1.0, float("-inf"), 0.9, float("-inf")]], dtype=torch.float64)
    p = entmax(masked, 1.5)
    assert p[0, 1] == 0 and p[0, 3] == 0 and math.isclose(float(p.sum()), 1.0)


@pytest.mark.parametrize("alpha", [1.5, 1.3])
def test_the_closed_form_gradient_matches_finite_differences(alpha):
    torch.manual_seed(1)
    z = (torch.randn(3, 6, dtype=torch.float64) * 0.7).requires_grad_()
    assert torch.autograd.gradcheck(lambda z: entmax(z, alpha), (z,), atol=1e-6)


def test_asentmax_temperature_by_hand():
    torch.manual_seed(2)
    scale = AdaptiveScale(8, 2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    got = scale(x)
    for h in range(2):
        for i in range(5):
            beta = math.log1p(math.exp(float(x[0, i] @ scale.beta.weight[h])))
            gamma = 2 * math.tanh(float(x[0, i] @ scale.gamma.weight[h]))
            assert math.isclose(float(got[0, h, i, 0]), 1 + beta * math.log(i + 2) ** gamma, rel_tol=1e-6)


def test_asentmax_projection_bias_is_the_authors_option_and_off_by_default():
    """#81: the authors' reproduction commands set attn_scale_proj_bias=True; model.asentmax_bias adds both
    projections' biases (the factor by hand with them), the default has none (the committed runs' form, whose
    config hash is unchanged), and the option on another normaliser is one line."""
    torch.manual_seed(4)
    scale = AdaptiveScale(8, 2, bias=True).double()
    torch.nn.init.normal_(scale.beta.bias), torch.nn.init.normal_(scale.gamma.bias)
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    got = scale(x)
    for h in range(2):
        for i in range(4):
            beta = math.log1p(math.exp(float(x[0, i] @ scale.beta.weight[h] + scale.beta.bias[h])))
            gamma = 2 * math.tanh(float(x[0, i] @ scale.gamma.weight[h] + scale.gamma.bias[h]))
            assert math.isclose(float(got[0, h, i, 0]), 1 + beta * math.log(i + 2) ** gamma, rel_tol=1e-6)
    plain = DecoderLM(tiny_model_config("rope", normaliser="asentmax")).blocks[0].attn.adaptive
    assert plain.beta.bias is None and plain.gamma.bias is None
    biased = DecoderLM(tiny_model_config("rope", normaliser="asentmax", asentmax_bias=True)).blocks[0].attn.adaptive
    assert biased.beta.bias.shape == (4,) and biased.gamma.bias.shape == (4,)
    base, _ = resolve_config(ConfigFlags(normaliser="asentmax"))
    on = replace(base, model=replace(base.model, asentmax_bias=True))
    assert on.hash() != base.hash()  # a biased run never takes an unbiased one's records (tests/test_config_hash.py
    # proves the default keeps every committed hash)
    with pytest.raises(UsageError, match="model.asentmax_bias applies to model.normaliser asentmax"):
        tiny_model_config("rope", asentmax_bias=True).validate()


@pytest.mark.parametrize("normaliser", ["entmax", "asentmax"])
def test_the_model_attends_through_entmax_causally_and_the_tail_agrees(normaliser):
    torch.manual_seed(3)
    m = DecoderLM(tiny_model_config("alibi", normaliser=normaliser)).double().eval()
    attn, x, pos = m.blocks[0].attn, torch.randn(1, 20, 32, dtype=torch.float64), torch.arange(20)
    with torch.no_grad():
        q, k, v, mod = attn.qkv_and_term(x, m.pe, pos)
        s = q @ k.transpose(-1, -2) / math.sqrt(8) + mod.bias(0, torch.arange(4).view(4, 1, 1), pos[:, None], pos)
        s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        want = entmax(s, 1.5) @ v
        assert torch.allclose(attend_entmax(q, k, v, mod, 1.5), want, atol=1e-12)
        assert torch.allclose(attend_entmax(q, k, v, mod, 1.5, start=7), want[:, :, 7:], atol=1e-12)
        idx = torch.randint(0, 256, (2, 24))
        other = idx.clone()
        other[:, 10] = (idx[:, 10] + 1) % 256
        a, b = m(idx), m(other)
        assert torch.allclose(a[:, :10], b[:, :10], atol=1e-12) and not torch.allclose(a[:, 10:], b[:, 10:])
        assert torch.allclose(m.logits_tail(idx, 15), a[:, 15:], atol=1e-10)
    m.train()
    m(idx, idx)[1].backward()
    if normaliser == "asentmax":
        assert m.blocks[0].attn.adaptive.beta.weight.grad.abs().sum() > 0


def test_what_entmax_cannot_combine_with_is_refused_in_one_line():
    with pytest.raises(UsageError, match="computes its attention itself"):
        DecoderLM(tiny_model_config("stick-breaking", normaliser="entmax"))
    with pytest.raises(UsageError, match="a sink is a softmax term"):
        DecoderLM(tiny_model_config("rope", normaliser="entmax", attention_sinks=True))
    with pytest.raises(UsageError, match="not shaw"):
        DecoderLM(tiny_model_config("shaw", normaliser="entmax"))(torch.randint(0, 256, (1, 8)))
    cfg, _ = resolve_config(ConfigFlags(normaliser="asentmax"))
    assert cfg.name == "tiny-asentmax" and cfg.model.normaliser == "asentmax"
    with pytest.raises(UsageError, match="--normaliser must be one of softmax, entmax, asentmax"):
        resolve_config(ConfigFlags(normaliser="sparsemax"))
