"""Stick-breaking attention (Tan, Shen, Peng, Courville & others 2024, "Scaling Stick-Breaking Attention", ICLR 2025):
no positional encoding and no softmax. Each key, from the nearest back, breaks off a share of the stick that the
nearer keys left: with z_ij = q_i . k_j / sqrt(d_h) and beta_ij = sigmoid(z_ij),

    A_ij = beta_ij * prod_{j < k <= i} (1 - beta_ik),

so a near key that matches takes the mass before a far one can, an order that needs no positions (the weights
of a row sum to at most 1; the rest is attention to nothing). Computed in log space, log A_ij = log sigmoid(z_ij)
+ sum_{k > j} log sigmoid(-z_ik), the sum a cumulative sum from the diagonal back (keys above the diagonal have
z = -inf and add log sigmoid(+inf) = 0), one block of queries at a time (``attention.attend_normalised``; the
scheme ``owns_attention`` and overrides ``normalise``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import SCHEMES, PositionalEncoding


def stick_breaking_weights(scores: torch.Tensor) -> torch.Tensor:
    """A [..., Tq, Tk] from scores that are -inf above the causal diagonal (float32 or wider)."""
    s = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    rest = F.logsigmoid(-s)  # log(1 - beta); 0 where masked
    after = torch.flip(torch.cumsum(torch.flip(rest, [-1]), -1), [-1]) - rest  # sum over keys k > j of the row
    return torch.exp(F.logsigmoid(s) + after)


def stick_breaking_reference(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The paper's weights, transcribed loop by loop (tests): q, k [T, d] -> A [T, T]."""
    T, d = q.shape
    A = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            w = 1 / (1 + math.exp(-float(q[i] @ k[j]) / math.sqrt(d)))
            for m in range(j + 1, i + 1):
                w *= 1 - 1 / (1 + math.exp(-float(q[i] @ k[m]) / math.sqrt(d)))
            A[i, j] = w
    return A


@SCHEMES.add
class StickBreaking(PositionalEncoding):
    name = "stick-breaking"
    description = "stick-breaking attention: sigmoid shares of what nearer keys left, no positions (Tan 2024)"
    owns_attention = True

    def normalise(self, scores: torch.Tensor) -> torch.Tensor:
        return stick_breaking_weights(scores)
