"""STRING (An et al., ICLR 2025, arXiv 2410.18745): RoPE's largest relative positions, the least trained ones,
overwritten at inference by shifted small ones. For a query at i and a key at j, d = i - j, the rotation reads the
relative position

    P(d) = d              for d < S    (the diagonal band: positions as trained)
    P(d) = d - S + W      for d >= S   (the rest, shifted down by S - W)

``S`` is the shifted offset (``offset``: a fraction of the window read, as the reference's evaluation scripts set
``shifted_ratio * test length``, 0.33 by default; a value of 1 or more is a number of tokens) and ``W`` the local
window (``local``, 128 as the reference's ``small_local_value``; at most S). The largest position used is
T - 1 - S + W, so the S - W largest ones are never read. Beyond twice the training context that largest position
still exceeds the context: STRING was made for windows within it, and it is offered beyond as published.

It is exact in two passes combined before one softmax, as ReRoPE computes it: the scores of the queries at their
own positions for the band, and of the queries rotated back by S - W (position i - S + W) for the rest; no
position-dependent term is approximated. A variant of ``model.pe.rope`` (``--rope-scaling string``): the
frequencies are the model's own, and the scheme computes its scores (``owns_attention``) while it is set.
"""

from __future__ import annotations

import torch

from ...util.errors import UsageError
from .rope import ROPE_ATTENTION, ROPE_VARIANTS, default_inv_freq, rotate_half

OFFSET = 0.33  # the reference's shifted_ratio: S = 0.33 T
LOCAL = 128  # the reference's small_local_value (tokens)


def string_shift(seq_len: int, offset: float = OFFSET, local: int = LOCAL) -> tuple[int, int]:
    """(S, W) for a window of ``seq_len`` tokens: S the shifted offset (``offset`` times the window below 1, else
    that many tokens), W the local window, at most S."""
    if not offset > 0:
        raise UsageError(f"string: offset must be > 0 (a fraction of the window below 1, else tokens), got {offset:g}")
    if local < 0:
        raise UsageError(f"string: local must be >= 0 tokens, got {local}")
    shift = int(offset * seq_len) if offset < 1 else int(offset)
    return max(shift, 1), min(local, max(shift, 1))


def string_positions(d: torch.Tensor, shift: int, local: int) -> torch.Tensor:
    """STRING's relative position for distances ``d`` (the map in the module's docstring)."""
    return torch.where(d < shift, d, d - shift + local)


@ROPE_VARIANTS.register("string")
def _string(head_dim, base, factor, original_context, offset: float = OFFSET, local: int = LOCAL):
    """STRING: the model's own frequencies; its positions shift in the scores (``string_scores``)."""
    string_shift(original_context, offset, local)  # the settings' checks, at any length
    return default_inv_freq(head_dim, base), 1.0


def string_scores(pe, q: torch.Tensor, k: torch.Tensor, start: int, seq_len: int) -> torch.Tensor:
    """Scores [B, H, n, T'] of queries ``start`` .. (rotated at their positions) against keys 0 .. T'-1 under
    STRING's positions, -inf above the causal diagonal. ``pe`` is the RoPE scheme (its frequencies rotate the
    queries back by S - W); ``seq_len`` the window's length, which sets S."""
    o = pe.options.for_variant("string")
    shift, local = string_shift(seq_len, **o)
    scale = q.shape[-1] ** -0.5
    qi = torch.arange(start, start + q.shape[2], device=q.device)[:, None]
    d = qi - torch.arange(k.shape[2], device=q.device)[None, :]
    near = (q @ k.transpose(-1, -2)) * scale
    if shift - local > 0 and bool((d >= shift).any()):
        back = torch.full((1,), float(local - shift), device=q.device)
        cos, sin = pe._angles(back, seq_len, q.dtype)  # a rotation by -(S - W) positions, the scheme's frequencies
        far = ((q * cos + rotate_half(q) * sin) @ k.transpose(-1, -2)) * scale
        near = torch.where(d >= shift, far, near)
    return near.masked_fill(d < 0, float("-inf"))


ROPE_ATTENTION["string"] = string_scores
