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


def causal_depthwise_conv(u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """y_t = sum_s weight[:, s] u_{t - K + 1 + s} per channel (u [B, T, C], weight [C, K]; u before 0 is 0): Canon
    layers' convolution, and PaTH's on its directions (``pe.path``)."""
    K = weight.shape[-1]
    w = weight.to(u.dtype).unsqueeze(1)  # [C, 1, K]
    return F.conv1d(F.pad(u.transpose(1, 2), (K - 1, 0)), w, groups=u.shape[-1]).transpose(1, 2)


class Canon(nn.Module):
    """One Canon layer over ``width`` channels: x [B, T, width] -> x + its causal depthwise convolution."""

    def __init__(self, width: int, kernel: int = KERNEL):
        super().__init__()
        # a depthwise convolution's default initialisation: uniform within 1/sqrt(fan-in)
        self.weight = nn.Parameter((torch.rand(width, kernel) * 2 - 1) * kernel**-0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + causal_depthwise_conv(x, self.weight)


def canon_at(points: str, point: str, width: int):
    """A Canon layer at ``point`` if ``points`` holds it, else the identity (so an absent point adds nothing)."""
    return Canon(width) if point in points else nn.Identity()
