"""Scale-invariant attention (Anson, Wang and Aitchison, NeurIPS 2025, arXiv 2505.17083): a position-dependent
transform of every attention logit, so that the attention a query gives the keys 1-10, 10-100, 100-1,000 ... tokens
back stays the same at every scale, and stays as sparse. For a key t = i - j tokens before the query, the logit l
becomes

    a_t l + m_t,   a_t = sqrt(1 + 2 log(1 + t / tau)),   m_t = -2 log(1 + t / tau),

with tau (``model.scale_invariant_tau``) the scale below which the logits stay nearly as they are (a_0 = 1,
m_0 = 0). Under the paper's Gaussian assumption (unit-variance logits) the expected weight of a key is
E exp(a_t l + m_t) = exp(m_t + a_t^2 / 2) = e^(1/2) / (1 + t / tau), so the total over distances [t, 2t] tends to
tau log 2 at every t (scale-invariant total attention); and a_t grows as sqrt(2 log t), as the largest of t
unit Gaussians does, so within a range the largest logits keep dominating (scale-invariant sparsity). The paper
pairs it with p-RoPE; here it is an option on any scheme whose attention goes through the backends.

Exact, a block of queries at a time (O(block x T) memory, differentiable, any device): the transform multiplies
the scheme's logit term too, so no additive-bias path can carry it.
"""

from __future__ import annotations

from typing import Optional

import torch

from .pe.base import ScoreMod
from .spans import Span

BLOCK = 256


def si_coefficients(t: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(a_t, m_t) for distances ``t`` >= 0 (negative distances, above the diagonal, read as 0)."""
    g = torch.log1p(t.clamp(min=0).double() / tau)
    return torch.sqrt(1.0 + 2.0 * g), -2.0 * g


def attend_scale_invariant(
    q, k, v, mod: Optional[ScoreMod], tau: float, span: Optional[Span] = None, start: int = 0, block: int = BLOCK
) -> torch.Tensor:
    """Causal attention of the queries ``start`` .. T-1 with every logit (the scheme's term included) transformed
    as the module's docstring says; q, k, v [B, H, T, d_h]; computed in fp32, returned in v's dtype."""
    T, scale, dt = q.shape[2], q.shape[-1] ** -0.5, v.dtype
    outs = []
    with torch.autocast(q.device.type, enabled=False):
        qf, kf, vf = q.float(), k.float(), v.float()
        for s0 in range(start, T, block):
            e = min(T, s0 + block)
            qi = torch.arange(s0, e, device=q.device)[:, None]
            ki = torch.arange(e, device=q.device)[None, :]
            s = (qf[:, :, s0:e] @ kf[:, :, :e].transpose(-1, -2)) * scale
            if mod is not None:
                b = torch.arange(q.shape[0], device=q.device).view(-1, 1, 1, 1)
                h = torch.arange(q.shape[1], device=q.device).view(1, -1, 1, 1)
                s = s + mod.bias(b, h, qi[None, None], ki[None, None]).float()
            a, m = si_coefficients(qi - ki, tau)
            s = s * a.float() + m.float()
            hidden = ki > qi
            if span:
                hidden = hidden | ~span.visible(qi, ki)
            outs.append(torch.softmax(s.masked_fill(hidden, float("-inf")), dim=-1) @ vf[:, :, :e])
    return torch.cat(outs, dim=2).to(dt)
