"""Stick-breaking attention (Tan et al. 2024) against a loop-by-loop transcription of its weights (the paper's form,
the default, and the former inclusive form), through the model's own attention path (blocked, at any length), its
gradients, and the order it gives without positions."""

import pytest
import torch

from pebench.model.attention import _causal_scores, attend_normalised
from pebench.model.decoder import DecoderLM
from pebench.model.pe.stick_breaking import StickBreaking, stick_breaking_reference, stick_breaking_weights
from pebench.util.errors import UsageError
from support import tiny_model_config


def _masked(q, k):
    return _causal_scores(q, k, None, q.shape[-1] ** -0.5)


@pytest.mark.parametrize("form", ["paper", "fla", "inclusive"])
def test_weights_equal_the_papers_formula_loop_by_loop(form):
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 11, 8, dtype=torch.float64), torch.randn(1, 2, 11, 8, dtype=torch.float64)
    w = stick_breaking_weights(_masked(q, k), form)
    for h in range(2):
        assert torch.allclose(w[0, h], stick_breaking_reference(q[0, h], k[0, h], form), atol=1e-12)
    assert (w.sum(-1) <= 1 + 1e-12).all() and (w.triu(1) == 0).all()  # at most the whole stick; causal
    if form == "paper":  # the leftover goes to the query's own value: every row is the whole stick
        assert torch.allclose(w.sum(-1), torch.ones(1, 2, 11, dtype=torch.float64), atol=1e-12)
        assert w[0, :, 0, 0].eq(1).all()  # the first token has no earlier key: all of it stays home
    else:  # the inclusive form and fla's drop what is left
        assert (w.sum(-1) < 1 - 1e-6).any()


def test_the_default_is_the_papers_form_and_the_former_one_is_an_option():
    torch.manual_seed(3)
    s = _masked(torch.randn(1, 1, 9, 8, dtype=torch.float64), torch.randn(1, 1, 9, 8, dtype=torch.float64))
    assert torch.equal(StickBreaking(None).normalise(s), stick_breaking_weights(s, "paper"))
    assert torch.equal(StickBreaking(None, {"form": "inclusive"}).normalise(s), stick_breaking_weights(s, "inclusive"))
    assert not torch.allclose(stick_breaking_weights(s, "paper"), stick_breaking_weights(s, "inclusive"))
    with pytest.raises(UsageError, match="form must be one of paper, fla, inclusive"):
        StickBreaking(None, {"form": "both"})


def test_blocked_attention_equals_the_whole_and_the_model_uses_it():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 40, 8, dtype=torch.float64) for _ in range(3))
    whole = stick_breaking_weights(_masked(q, k)) @ v
    pe = StickBreaking(None)
    assert torch.allclose(attend_normalised(q, k, v, pe, chunk=7), whole, atol=1e-12)
    assert torch.allclose(attend_normalised(q, k, v, pe, start=25, chunk=7), whole[:, :, 25:])
    m = DecoderLM(tiny_model_config("stick-breaking", n_layers=1)).double().eval()
    attn, x, pos = m.blocks[0].attn, torch.randn(1, 24, 32, dtype=torch.float64), torch.arange(24)
    with torch.no_grad():
        q, k, v, _ = attn.qkv_and_term(x, m.pe, pos)
        want = attn.proj((stick_breaking_weights(_masked(q, k)) @ v).transpose(1, 2).reshape(1, 24, 32))
        assert torch.allclose(attn(x, m.pe, pos), want, atol=1e-12)
        assert torch.allclose(attn.forward_from(x, m.pe, pos, None, 10), want[:, 10:], atol=1e-12)


@pytest.mark.parametrize("form", ["paper", "inclusive"])
def test_gradients_match_finite_differences(form):
    torch.manual_seed(2)
    q = torch.randn(1, 1, 6, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 6, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: stick_breaking_weights(_masked(q, k), form), (q, k))


def test_the_nearer_of_two_equal_keys_takes_its_share_first():
    """No positions, yet an order: of two identical keys, the farther gets only what the nearer left."""
    k = torch.randn(1, 1, 1, 8, dtype=torch.float64).expand(1, 1, 6, 8)
    q = torch.randn(1, 1, 6, 8, dtype=torch.float64)
    beta = torch.sigmoid(q[0, 0, -1] @ k[0, 0, 0] / 8**0.5)
    w = stick_breaking_weights(_masked(q, k), "inclusive")[0, 0, -1]
    assert torch.allclose(w, beta * (1 - beta) ** torch.arange(5, -1, -1, dtype=torch.float64))
    w = stick_breaking_weights(_masked(q, k))[0, 0, -1]  # the paper's: keys 0..4 break, the rest stays home
    want = torch.cat([beta * (1 - beta) ** torch.arange(4, -1, -1, dtype=torch.float64), (1 - beta).pow(5).view(1)])
    assert torch.allclose(w, want)


def test_a_window_keeps_the_leftover_on_the_querys_own_value():
    """Keys a span hides break nothing; the diagonal is still found (the row's last visible key)."""
    torch.manual_seed(4)
    q, k = torch.randn(1, 1, 8, 4, dtype=torch.float64), torch.randn(1, 1, 8, 4, dtype=torch.float64)
    s = _masked(q, k)
    i, j = torch.arange(8)[:, None], torch.arange(8)[None, :]
    w = stick_breaking_weights(s.masked_fill(i - j >= 3, float("-inf")))  # a window of 3
    for r in range(8):
        lo = max(0, r - 2)
        want = stick_breaking_reference(q[0, 0, lo : r + 1], k[0, 0, lo : r + 1])[-1]
        assert torch.allclose(w[0, 0, r, lo : r + 1], want, atol=1e-12) and w[0, 0, r, :lo].eq(0).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_low_precision_scores_are_weighed_in_float32(dtype):
    s = _masked(torch.randn(1, 1, 64, 8), torch.randn(1, 1, 64, 8)).to(dtype)
    assert stick_breaking_weights(s).dtype == torch.float32 and torch.isfinite(stick_breaking_weights(s)).all()


@pytest.mark.parametrize("window, keep", [(6, 3), (5, 4), (8, 1), (4, 0)])
def test_under_a_window_that_keeps_the_first_tokens_the_weights_are_the_papers_and_rows_sum_to_one(window, keep):
    """A window that keeps the first tokens leaves two runs of visible keys: only the query's own key is its
    diagonal (the last kept token is an earlier key like the others), hidden keys take and break nothing, and every
    row is the whole stick. Checked against the loop-by-loop formula over the visible keys, through the blocked
    attention path with the span, and for the leftover-dropping form of fla."""
    from pebench.model.spans import Span

    torch.manual_seed(7)
    T = 20
    q, k, v = (torch.randn(1, 2, T, 8, dtype=torch.float64) for _ in range(3))
    span = Span(window=window, keep=keep)
    idx = torch.arange(T)
    hidden = ~span.visible(idx[:, None], idx[None, :])
    for form in ("paper", "fla"):
        w = stick_breaking_weights(_masked(q, k).masked_fill(hidden, float("-inf")), form)
        for h in range(2):
            ref = stick_breaking_reference(q[0, h], k[0, h], form, lambda i, j: bool(span.visible(i, j)))
            assert torch.allclose(w[0, h], ref, atol=1e-12), (form, h)
        if form == "paper":
            assert torch.allclose(w.sum(-1), torch.ones(1, 2, T, dtype=torch.float64), atol=1e-12)
            assert w[..., hidden].abs().max() == 0
            got = attend_normalised(q, k, v, StickBreaking(None), chunk=7, span=span)
            assert torch.allclose(got, w @ v, atol=1e-12)
