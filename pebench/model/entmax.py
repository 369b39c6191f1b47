"""Sparse attention: alpha-entmax in place of softmax (Peters, Niculae & Martins 2019), and ASEntmax, entmax with a
learned, length-scaled temperature (Vasylenko, Pitorro, Martins & Treviso 2025, "Long-Context Generalization with
Sparse Attention", arXiv 2506.16640, ICLR 2026; ``model.normaliser``: softmax | entmax | asentmax, alpha
``model.entmax_alpha``, 1.5 by default).

alpha-entmax(z)_j = [(alpha - 1) z_j - tau]_+ ^ (1 / (alpha - 1)), tau the one threshold that makes the weights sum
to 1: keys far below the best get exactly zero weight, so attention does not spread over a longer context the way
softmax's does. alpha -> 1 is softmax (``alpha: 1`` computes softmax itself), alpha = 2 is sparsemax. alpha = 1.5 has
an exact sort-based threshold; any other alpha is found by bisection. The gradient is the closed form: with
g = p^(2 - alpha) on the support, dz = g * dp - g (g . dp) / sum(g).

ASEntmax (the reference code's ``adapt-softplus-tanh``): each query is multiplied, before the dot product, by
delta + beta_i (log(i + 2))^gamma_i, with beta_i = softplus(x_i W_beta) and gamma_i = 2 tanh(x_i W_gamma) per head
(x_i the attention's input at query i, i its index from 0, delta = 1), so a head learns how much sharper it gets
with distance into the sequence. A scheme's logit term (ALiBi's) is added unscaled, as the reference adds ALiBi's.

Attention is computed one block of queries at a time on the materialised scores (O(block x T) memory at any length);
schemes that compute attention themselves (stick-breaking, PaTH), sinks and value terms (Shaw) are refused where the
model is built."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..util.errors import UsageError

QUERY_BLOCK = 256
BISECT_STEPS = 60  # halvings of the threshold's bracket: below float64 rounding for any row


def _entmax15_forward(z: torch.Tensor) -> torch.Tensor:
    """The exact 1.5-entmax of rows z (-inf where masked; at least one finite entry a row), by sorting."""
    z = (z - z.amax(-1, keepdim=True)) / 2
    zs = torch.sort(z, dim=-1, descending=True).values
    finite = torch.isfinite(zs)
    zs0 = torch.where(finite, zs, torch.zeros_like(zs))
    rho = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    mean = zs0.cumsum(-1) / rho
    mean_sq = (zs0 * zs0).cumsum(-1) / rho
    delta = (1 - rho * (mean_sq - mean * mean)) / rho
    tau = mean - torch.sqrt(delta.clamp(min=0))
    support = ((tau <= zs) & finite).sum(-1, keepdim=True)
    return torch.clamp(z - tau.gather(-1, support - 1), min=0) ** 2


def _bisect_forward(z: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha-entmax of rows z by bisection on tau (any alpha > 1)."""
    x = (alpha - 1) * (z - z.amax(-1, keepdim=True))  # max 0
    n = torch.isfinite(z).sum(-1, keepdim=True).to(z.dtype)
    lo = torch.full_like(n, -1.0)  # at tau = -1 the best key alone has weight 1: the sum is >= 1
    hi = -((1 / n) ** (alpha - 1))  # at tau = max - n^(1-alpha) every weight is <= 1/n: the sum is <= 1
    power = 1 / (alpha - 1)
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        big = torch.clamp(x - mid, min=0).pow(power).sum(-1, keepdim=True) >= 1
        lo, hi = torch.where(big, mid, lo), torch.where(big, hi, mid)
    p = torch.clamp(x - (lo + hi) / 2, min=0).pow(power)
    return p / p.sum(-1, keepdim=True)


class _Entmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z: torch.Tensor, alpha: float):
        p = _entmax15_forward(z) if alpha == 1.5 else _bisect_forward(z, alpha)
        ctx.save_for_backward(p)
        ctx.alpha = alpha
        return p

    @staticmethod
    def backward(ctx, dp: torch.Tensor):
        (p,) = ctx.saved_tensors
        g = torch.where(p > 0, p.pow(2 - ctx.alpha), torch.zeros_like(p))
        gdp = g * dp
        return gdp - g * (gdp.sum(-1, keepdim=True) / g.sum(-1, keepdim=True)), None


def entmax(z: torch.Tensor, alpha: float = 1.5) -> torch.Tensor:
    """alpha-entmax over the last dimension (computed in float32 or wider); alpha 1 is softmax."""
    z = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    if alpha == 1:
        return torch.softmax(z, dim=-1)
    return _Entmax.apply(z, float(alpha))


def entmax_reference(z: list[float], alpha: float) -> list[float]:
    """One row's alpha-entmax from its definition, for tests: the tau in [max - 1, max] where the weights sum to 1,
    by plain bisection in Python floats."""
    x = [(alpha - 1) * v for v in z]
    top = max(x)

    def total(tau):
        return sum(max(v - tau, 0.0) ** (1 / (alpha - 1)) for v in x)

    lo, hi = top - 1, top
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) >= 1 else (lo, mid)
    return [max(v - lo, 0.0) ** (1 / (alpha - 1)) for v in x]


class AdaptiveScale(nn.Module):
    """ASEntmax's per-query, per-head factor delta + softplus(x W_beta + b_beta) (log(i + 2))^(2 tanh(x W_gamma +
    b_gamma)); the biases only with ``bias`` (``model.asentmax_bias``: the authors' reproduction commands set
    attn_scale_proj_bias=True; pebench's default, and its committed runs, have none)."""

    def __init__(self, d_model: int, n_heads: int, delta: float = 1.0, gamma_range: float = 2.0, bias: bool = False):
        super().__init__()
        self.beta = nn.Linear(d_model, n_heads, bias=bias)
        self.gamma = nn.Linear(d_model, n_heads, bias=bias)
        self.delta, self.gamma_range = delta, gamma_range

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, d_model] -> the factors [B, H, T, 1] for queries 0 .. T-1."""
        T = x.shape[1]
        log_i = torch.log(torch.arange(2, T + 2, device=x.device, dtype=torch.float32)).view(1, 1, T)
        beta = F.softplus(self.beta(x).float()).transpose(1, 2)
        gamma = self.gamma_range * torch.tanh(self.gamma(x).float()).transpose(1, 2)
        return (self.delta + beta * log_i**gamma).unsqueeze(-1)


def attend_entmax(q, k, v, mod, alpha: float, span=None, start: int = 0) -> torch.Tensor:
    """Causal attention with alpha-entmax weights for queries ``start`` .. T-1 ([B, H, T, d_h] in, [B, H, T - start,
    d_h] out), the scheme's logit term ``mod`` materialised and any span's hidden keys at -inf; in float32 or wider, a
    block of queries at a time."""
    if mod is not None and (mod.needs_lse or mod.relative is not None):
        raise UsageError("entmax attention needs a logit term without a value term (not shaw)")
    dt = q.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v = (t.float() if t.dtype in (torch.bfloat16, torch.float16) else t for t in (q, k, v))
        scale = q.shape[-1] ** -0.5
        ki = torch.arange(k.shape[2], device=q.device)[None, :]
        outs = []
        for s0 in range(start, q.shape[2], QUERY_BLOCK):
            e = min(q.shape[2], s0 + QUERY_BLOCK)
            s = (q[:, :, s0:e] @ k[:, :, :e].transpose(-1, -2)) * scale
            qi = torch.arange(s0, e, device=q.device)[:, None]
            if mod is not None:
                b = torch.arange(q.shape[0], device=q.device).view(-1, 1, 1, 1)
                h = torch.arange(q.shape[1], device=q.device).view(1, -1, 1, 1)
                s = s + mod.bias(b, h, qi, ki[:, :e]).to(s.dtype)
            hidden = ~span.visible(qi, ki[:, :e]) if span else ki[:, :e] > qi
            outs.append(entmax(s.masked_fill(hidden, float("-inf")), alpha).to(v.dtype) @ v[:, :, :e])
    return torch.cat(outs, dim=2).to(dt)


def check_normaliser(normaliser: str, owns_attention: bool, sinks: bool) -> None:
    """Refuse what entmax attention cannot combine with, in one line (a value term, Shaw's, is refused where it is
    met: ``attend_entmax``)."""
    if normaliser == "softmax":
        return
    if owns_attention:
        raise UsageError(f"model.normaliser {normaliser} replaces softmax; this scheme computes its attention itself")
    if sinks:
        raise UsageError(f"model.normaliser {normaliser} and model.attention_sinks: a sink is a softmax term")
