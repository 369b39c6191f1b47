"""KERPLE (Chi et al. 2022): a learned conditionally positive definite kernel of the distance as a logit term,
-p_h log(1 + a_h r) (``kind: log``, the paper's best) or -a_h r^p_h (``kind: power``), r = i - j, with two
positive scalars per head shared by all layers. As in the reference code, a parameter that an optimizer step takes
below 0.01 is reset to 0.01 (and p above 2 to 2 for the power kernel) after the step (``after_step``), so it keeps
its gradient and can move back; clamping inside the forward pass instead would give it zero gradient forever.
Added to the scaled logits as they are, like ALiBi."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding, ScoreMod

EPS = 0.01


@dataclass
class KerpleOptions:
    kind: str = "log"  # log | power

    def validate(self):
        if self.kind not in ("log", "power"):
            raise UsageError(f"kerple kind must be log or power, got {self.kind!r}")


def kerple_bias(r: torch.Tensor, p: torch.Tensor, a: torch.Tensor, kind: str) -> torch.Tensor:
    """The kernel at distance r >= 0 (broadcasting)."""
    r = r.clamp(min=0).to(p.dtype)
    if kind == "log":
        return -p * torch.log1p(a * r)
    safe = torch.where(r > 0, r, torch.ones_like(r))  # 0^p = 0, with a finite gradient in p
    return torch.where(r > 0, -a * safe**p, torch.zeros_like(r))


@SCHEMES.add
class Kerple(PositionalEncoding):
    name = "kerple"
    description = "learned log (or power) kernel of the distance per head on the logits (Chi 2022)"
    Options = KerpleOptions
    static_bias = True

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.p = nn.Parameter(torch.rand(ctx.n_heads) * 2)
        self.a = nn.Parameter(torch.rand(ctx.n_heads))
        with torch.no_grad():
            self.after_step()

    def after_step(self) -> None:
        """Project the parameters back into their domain (the reference code's reset to the bound)."""
        self.p.clamp_(min=EPS, max=2.0 if self.options.kind == "power" else None)
        self.a.clamp_(min=EPS)

    def params(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The kernel's parameters, clamped to their domain as a guard. ``after_step`` keeps the stored values in the
        domain, where the clamp is the identity and passes the gradient (at the bound too)."""
        p = self.p.clamp(min=EPS, max=2.0) if self.options.kind == "power" else self.p.clamp(min=EPS)
        return p, self.a.clamp(min=EPS)

    def score_mod(self, q, layer, k=None, x=None):
        p, a = (t.to(q.dtype) for t in self.params())
        kind = self.options.kind

        def fn(score, b, h, q_idx, kv_idx):
            return score + kerple_bias(q_idx - kv_idx, p[h], a[h], kind)

        mod = ScoreMod(fn, q.dtype)
        mod.key = lambda: (type(self), kind, tuple(p.tolist()), tuple(a.tolist()))  # shared by every layer
        return mod
