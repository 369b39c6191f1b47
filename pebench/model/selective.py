"""Selective attention (Leviathan, Kalman and Matias, ICLR 2025, arXiv 2410.02703): a token may decide that a
earlier one is no longer needed, and every later token then attends to it less. Parameter-free: the selection is
head 0's attention logits, rectified,

    S[i, j] = relu(logit_0[i, j])   for j < i, j > 0 (0 on and above the diagonal, and for the first token),
    F[i, j] = sum over i' < i of S[i', j]   (what the queries strictly before i have masked of key j),

and every head's logit for query i and key j is lowered by F[i, j]. The first token is never masked (the paper's
<BOS>; here the window's first byte) and a token never masks itself. Gradients flow through the selection.

An option on any scheme whose attention goes through the backends (``model.selective``, ``--selective``): the
masking joins the scheme's logit term (``selected``), so every exact path computes it; it is data-dependent, so
never in FlexAttention.
"""

from __future__ import annotations

from typing import Optional

import torch

from .pe.base import ScoreMod


def selection(q: torch.Tensor, k: torch.Tensor, mod: Optional[ScoreMod], scale: float) -> torch.Tensor:
    """F [B, T, T] (fp32) from head 0's logits q_0 k_0^T * scale (+ its scheme's term), as the module's docstring
    defines it."""
    T = q.shape[2]
    with torch.autocast(q.device.type, enabled=False):
        s = (q[:, :1].float() @ k[:, :1].float().transpose(-1, -2)) * scale  # [B, 1, T, T]
        if mod is not None:
            idx = torch.arange(T, device=q.device)
            b = torch.arange(q.shape[0], device=q.device).view(-1, 1, 1, 1)
            s = (
                s
                + mod.bias(
                    b,
                    torch.zeros(1, 1, 1, 1, dtype=torch.long, device=q.device),
                    idx.view(1, 1, -1, 1),
                    idx.view(1, 1, 1, -1),
                ).float()
            )
        s = s[:, 0]
        qi, ki = torch.arange(T, device=q.device)[:, None], torch.arange(T, device=q.device)[None, :]
        keep = (ki < qi) & (ki > 0)  # strictly earlier keys, never the first
        S = torch.relu(s.masked_fill(~keep, 0.0))
        return torch.cumsum(S, dim=1) - S  # F[i] = the rows before i


def selected(mod: Optional[ScoreMod], F: torch.Tensor) -> ScoreMod:
    """The scheme's term (None: none) less the selection's mask F [B, T, T], indexed by absolute query and key."""

    def fn(score, b, h, qi, ki):
        return (score if mod is None else mod(score, b, h, qi, ki)) - F[b, qi, ki].to(score.dtype)

    out = ScoreMod(fn, torch.float32)
    out.bias = lambda b, h, qi, ki: (0.0 if mod is None else mod.bias(b, h, qi, ki).float()) - F[b, qi, ki]
    out.flex_ok = False
    out.uses_positions = False  # computed from the rotated q and k at the positions given
    return out
