"""Canon layers (Allen-Zhu 2025, "Physics of Language Models: Part 4.1, Architecture Design and the Magic of Canon
Layers", arXiv 2512.17351): a residual causal depthwise convolution over the last ``K`` tokens (4),

    h'_t = h_t + sum_{s=0}^{K-1} w[:, s] * h_{t-K+1+s}      (per channel; tokens before 0 are 0),

at up to four points of a block (``model.canon``, a subset of ``ABCD``): A on the attention's normed input, B on its
q, k and v (after the projection, before any rotation), C on the MLP's normed input, D on the MLP's hidden layer
(before the activation). The paper's claim: the horizontal mixing lets NoPE reach RoPE. The model applies them; a
scheme never sees them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

KERNEL = 4


class Canon(nn.Module):
    """One Canon layer over ``width`` channels: x [B, T, width] -> x + its causal depthwise convolution."""

    def __init__(self, width: int, kernel: int = KERNEL):
        super().__init__()
        # a depthwise convolution's default initialisation: uniform within 1/sqrt(fan-in)
        self.weight = nn.Parameter((torch.rand(width, kernel) * 2 - 1) * kernel**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = self.weight.shape[-1]
        w = self.weight.to(x.dtype).unsqueeze(1)  # [width, 1, K]
        return x + F.conv1d(F.pad(x.transpose(1, 2), (K - 1, 0)), w, groups=x.shape[-1]).transpose(1, 2)


def canon_at(points: str, point: str, width: int):
    """A Canon layer at ``point`` if ``points`` holds it, else the identity (so an absent point adds nothing)."""
    return Canon(width) if point in points else nn.Identity()
