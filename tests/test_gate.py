"""Gated attention's output gate (Qiu et al. 2025, arXiv 2505.06708): Y' = Y * sigmoid(X W_g), X the block's normed
input at the query, a gate per channel of each head (elementwise) or one per head (headwise)."""

from dataclasses import replace

import pytest
import torch

from pebench.config import ConfigFlags, load_config, resolve_config
from pebench.model.decoder import DecoderLM
from pebench.util.errors import UsageError
from support import tiny_model_config


def _attn(gate: str):
    torch.manual_seed(0)
    return DecoderLM(tiny_model_config("rope", output_gate=gate)).blocks[0].attn


def test_elementwise_gate_is_the_papers_formula_by_hand():
    """Channel c of head h is multiplied by sigmoid(sum_i x_i W[h * d_h + c, i]): computed element by element."""
    attn = _attn("elementwise")
    B, H, T, dh, C = 2, 4, 5, 8, 32
    y, x = torch.randn(B, H, T, dh), torch.randn(B, T, C)
    W = attn.gate.weight
    want = torch.empty_like(y)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for c in range(dh):
                    z = sum(float(x[b, t, i]) * float(W[h * dh + c, i]) for i in range(C))
                    want[b, h, t, c] = y[b, h, t, c] / (1 + torch.exp(torch.tensor(-z)))
    assert torch.allclose(attn.gated(y, x), want, atol=1e-5)


def test_headwise_gate_is_one_scalar_per_head_and_query():
    attn = _attn("headwise")
    y, x = torch.randn(2, 4, 5, 8), torch.randn(2, 5, 32)
    g = torch.sigmoid(x @ attn.gate.weight.T)  # [B, T, H]
    assert attn.gate.weight.shape == (4, 32)
    assert torch.allclose(attn.gated(y, x), y * g.permute(0, 2, 1)[..., None], atol=1e-6)


def test_a_constant_gate_only_scales_the_output_so_a_gate_of_one_is_no_gate():
    """With W_g = 0 every gate is sigmoid(0) = 1/2 exactly: the gated model equals the ungated one whose output
    projections are halved, so the gate adds nothing but its sigmoid(x W_g)."""
    torch.manual_seed(0)
    gated = DecoderLM(tiny_model_config("rope", output_gate="elementwise"))
    plain = DecoderLM(tiny_model_config("rope"))
    state = {k: v for k, v in gated.state_dict().items() if ".gate." not in k}
    plain.load_state_dict({k: v / 2 if k.endswith("attn.proj.weight") else v for k, v in state.items()})
    with torch.no_grad():
        for block in gated.blocks:
            block.attn.gate.weight.zero_()
    x = torch.randint(0, 256, (2, 16))
    assert torch.allclose(gated(x)[0], plain(x)[0], atol=1e-5)
    with torch.no_grad():
        gated.blocks[0].attn.gate.weight.normal_()
    assert not torch.allclose(gated(x)[0], plain(x)[0], atol=1e-3)  # a learned gate does change the output


def test_the_gate_flag_joins_the_name_and_refuses_an_unknown_gate():
    cfg, _ = resolve_config(ConfigFlags(gate="elementwise"))
    assert cfg.model.output_gate == "elementwise" and cfg.name == "tiny-gate"
    assert resolve_config(ConfigFlags(gate="headwise"))[0].name == "tiny-gate-headwise"
    with pytest.raises(UsageError, match="--gate must be one of"):
        resolve_config(ConfigFlags(gate="sigmoid"))
    plain = load_config("tiny")
    assert plain.hash() == replace(plain, model=replace(plain.model, output_gate="")).hash()
    assert plain.hash() != cfg.hash()
