"""PoPE, polar coordinate position embeddings (Gopalakrishnan, Csordas, Schmidhuber & Mozer 2025,
arXiv:2509.10534): RoPE with the "what" and the "where" decoupled. Each of the d_h components of a query or key
becomes a complex number whose magnitude is the content, mu = softplus(x_c) >= 0, and whose phase is the position
alone, t theta_c, with d_h frequencies theta_c = base^(-c/d_h) (c = 0 .. d_h - 1: RoPE's frequencies for a head of
2 d_h). A key's phase also gets a learned bias delta_c per layer and head, kept in [-2 pi, 0] (projected after
each step; zero at the start). The score is the real part of the Hermitian product,

    a_ts = Re[sum_c q~_tc conj(k~_sc)] / sqrt(d_h) = sum_c mu^q_tc mu^k_sc cos((t - s) theta_c - delta_c) / sqrt(d_h),

so it depends on positions only through t - s, and content can no longer shift a phase. Here q~ and k~ are real
vectors of 2 d_h ([mu cos, mu sin], the halves layout), so every attention backend computes it as a plain dot
product; q~ carries sqrt(2), so the backends' 1 / sqrt(2 d_h) is the paper's 1 / sqrt(d_h). Values keep d_h. The
frequencies come from RoPE's registry, so every RoPE scaling (linear, NTK, YaRN, ...) applies to PoPE too."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import SCHEMES
from .rope import RoPE, RopeOptions


@dataclass
class PopeOptions(RopeOptions):
    phase_bias: bool = True  # the learned key phase bias delta (the paper's PoPE; False: its ablation without)


def pope_scores(q: torch.Tensor, k: torch.Tensor, theta: torch.Tensor, delta=None) -> torch.Tensor:
    """The paper's score, transcribed loop by loop (a reference for tests): q, k [T, d], theta [d], delta [d] ->
    [T, T] with a_ts = sum_c softplus(q_tc) softplus(k_sc) cos((t - s) theta_c - delta_c) / sqrt(d)."""
    T, d = q.shape
    out = torch.zeros(T, T, dtype=torch.float64)
    mq, mk = F.softplus(q.double()), F.softplus(k.double())
    for t in range(T):
        for s in range(T):
            acc = 0.0
            for c in range(d):
                phase = (t - s) * float(theta[c]) - (0.0 if delta is None else float(delta[c]))
                acc += float(mq[t, c]) * float(mk[s, c]) * math.cos(phase)
            out[t, s] = acc / math.sqrt(d)
    return out


@SCHEMES.add
class PoPE(RoPE):
    name = "pope"
    description = "polar RoPE: softplus magnitudes, phases from positions alone, d_h frequencies (Gopalakrishnan 2025)"
    Options = PopeOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        if self.options.phase_bias:
            self.delta = nn.Parameter(torch.zeros(ctx.n_layers, ctx.n_heads, ctx.head_dim))

    def after_step(self) -> None:
        """The phase bias projected back into [-2 pi, 0] after each step (a clamp in the forward would cut its
        gradient at the bounds)."""
        if self.options.phase_bias:
            with torch.no_grad():
                self.delta.clamp_(-2 * math.pi, 0.0)

    @property
    def rotary_dim(self) -> int:
        return 2 * self.ctx.head_dim  # d_h frequencies: one per component, not per pair

    def rotate(self, q, k, positions, layer):
        d = q.shape[-1]
        cos, sin = self._cos_sin(positions, q.dtype)  # [T, 2 d]: the d phases twice (the halves layout)
        cos, sin = cos[:, :d], sin[:, :d]
        mq, mk = F.softplus(q), F.softplus(k)
        q2 = torch.cat([mq * cos, mq * sin], dim=-1) * math.sqrt(2.0)
        if self.options.phase_bias:
            delta = self.delta[layer][None, :, None, :].to(q.dtype)  # [1, H, 1, d], kept in [-2 pi, 0] by after_step
            cd, sd = torch.cos(delta), torch.sin(delta)
            cos, sin = cos * cd - sin * sd, sin * cd + cos * sd  # the key's phase s theta + delta
        return q2, torch.cat([mk * cos, mk * sin], dim=-1)
