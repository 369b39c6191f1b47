"""RoPE with ALiBi: the logit of query i and key j is RoPE's rotated q_i . k_j / sqrt(d_h) minus ALiBi's m_h (i - j),
computed by hand; with every slope zero the scheme is plain RoPE, exactly."""

import math

import torch

from pebench.model.attention import attend
from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.alibi import alibi_slopes
from support import tiny_model_config

CTX = PEContext(32, 4, 2, 16)  # 4 heads, d_h 8


def test_logits_are_ropes_rotation_plus_alibis_penalty_by_hand():
    """softmax over j <= i of (R_i q_i) . (R_j k_j) / sqrt(d_h) - m_h (i - j), with R_t the rotation by t theta_c on
    each pair (c, c + d_h/2) of rotate-half's layout, theta_c = 10000^(-2c/d_h): a double loop against attend."""
    torch.manual_seed(0)
    pe = build_pe("rope-alibi", CTX).double()
    T, dh = 7, 8
    q, k, v = (torch.randn(1, 4, T, dh, dtype=torch.float64) for _ in range(3))
    q2, k2 = pe.rotate(q, k, torch.arange(T), 0)
    got = attend(q2, k2, v, pe.score_mod(q2, 0, k2), "sdpa")

    def rot(x, t):
        half = dh // 2
        out = x.clone()
        for c in range(half):
            a = t * 10000.0 ** (-2 * c / dh)
            out[c] = x[c] * math.cos(a) - x[c + half] * math.sin(a)
            out[c + half] = x[c + half] * math.cos(a) + x[c] * math.sin(a)
        return out

    m = alibi_slopes(4)
    for h in range(4):
        for i in range(T):
            logits = torch.tensor(
                [float(rot(q[0, h, i], i) @ rot(k[0, h, j], j)) / math.sqrt(dh) - m[h] * (i - j) for j in range(i + 1)],
                dtype=torch.float64,
            )
            want = torch.softmax(logits, 0) @ v[0, h, : i + 1]
            assert torch.allclose(got[0, h, i], want, atol=1e-10), (h, i)


def test_with_every_slope_zero_it_is_rope_exactly():
    torch.manual_seed(0)
    both = DecoderLM(tiny_model_config("rope-alibi"))
    rope = DecoderLM(tiny_model_config("rope"))
    rope.load_state_dict(both.state_dict())
    x = torch.randint(0, 256, (2, 16))
    assert not torch.allclose(both(x)[0], rope(x)[0], atol=1e-4)  # the penalty changes the logits
    both.pe.slopes.zero_()
    assert torch.allclose(both(x)[0], rope(x)[0], atol=1e-6)
