"""RoPE-ID (Wertheimer et al. 2026): the frequencies by hand at the tiny shape, its special cases (all channels and no
raise is RoPE, no channels is NoPE), and the claim it rests on: no rotated channel turns further at 16x than a full
turn already showed in training."""

import math

import torch

from pebench.model.pe import PEContext, build_pe

CTX = PEContext(128, 4, 4, 128)  # d_h 32: 16 frequencies, context 128


def test_the_frequencies_by_hand():
    """Half of the 16 pairs rotate at 10000^(-2c/32), c < 8, each raised to at least 2 pi / 128; the rest are 0."""
    inv = build_pe("rope-id", CTX).frequencies(128)
    for c in range(16):
        want = max(10000.0 ** (-2 * c / 32), 2 * math.pi / 128) if c < 8 else 0.0
        assert math.isclose(float(inv[c]), want, rel_tol=1e-12), c
    assert [c for c in range(8) if 10000.0 ** (-2 * c / 32) < 2 * math.pi / 128] == [6, 7]  # two are raised


def test_all_channels_without_the_raise_is_rope_and_no_channels_is_nope():
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 20, 32, dtype=torch.float64), torch.randn(1, 4, 20, 32, dtype=torch.float64)
    pos = torch.arange(20)
    full = build_pe("rope-id", CTX, {"fraction": 1.0, "in_distribution": False}).double()
    rope = build_pe("rope", CTX).double()
    for a, b in zip(full.rotate(q, k, pos, 0), rope.rotate(q, k, pos, 0)):
        assert torch.equal(a, b)
    none = build_pe("rope-id", CTX, {"fraction": 0.0}).double()
    for a, b in zip(none.rotate(q, k, pos, 0), (q, k)):
        assert torch.allclose(a, b, atol=1e-15)


def test_every_rotated_channel_has_turned_a_full_circle_within_the_context():
    inv = build_pe("rope-id", CTX).frequencies(2048)
    rotated = inv[inv > 0]
    assert len(rotated) == 8 and (rotated * 128 >= 2 * math.pi - 1e-12).all()
    assert (build_pe("p-rope", CTX, {"fraction": 0.5}).frequencies(2048)[6:8] * 128 < 2 * math.pi).all()
