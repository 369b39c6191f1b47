"""Stick-breaking attention (Tan, Yang, Courville, Panda & Shen 2024, "Scaling Stick-Breaking Attention", ICLR 2025):
no positional encoding and no softmax. Each earlier key, from the nearest back, breaks off a share of the stick that
the nearer keys left: with z_ij = q_i . k_j / sqrt(d_h) and beta_ij = sigmoid(z_ij),

    A_ij = beta_ij * prod_{j < m < i} (1 - beta_im)        for j < i,
    A_ii = prod_{m < i} (1 - beta_im)                       (what no earlier key took: the query's own value),

so a near key that matches takes the mass before a far one can, an order that needs no positions, and every row sums
to 1: the stick breaks over the keys strictly before the query, and the leftover goes to the query's own value (the
first token attends to itself alone), as the original repository's test computes it; the default (``form: paper``).
The reference implementations differ on the leftover: flash-linear-attention's layer drops it (``form: fla``: the
same shares of the earlier keys, nothing on the query's own value), and IBM's released model adds a learned vector
per head in its place (not offered). ``form: inclusive`` is the form pebench used before (records of
results/patterns): the query's own key breaks the stick like the others (m and j run up to i) and the leftover is
dropped (attention to nothing; up to 0.77 of a row at T = 100), ``stick-breaking:form=inclusive``.

Computed in log space, log A_ij = log sigmoid(z_ij) + sum_{j < m} log sigmoid(-z_im), the sum a cumulative sum from
the diagonal back (keys above the diagonal have z = -inf and add log sigmoid(+inf) = 0), one block of queries at a
time (``attention.attend_normalised``; the scheme ``owns_attention`` and overrides ``normalise``). A row's own key is
found by position (the rows are the last queries of the keys), never by where its finite scores end: a window that
keeps the first tokens leaves two runs of visible keys, and a hidden key takes nothing and breaks nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...util.errors import UsageError
from .base import SCHEMES, PositionalEncoding

FORMS = ("paper", "fla", "inclusive")


@dataclass
class StickBreakingOptions:
    form: str = "paper"

    def validate(self):
        if self.form not in FORMS:
            raise UsageError(f"stick-breaking form must be one of {', '.join(FORMS)}, got {self.form!r}")


def _diagonal(scores: torch.Tensor) -> torch.Tensor:
    """True at each row's own key: rows are the last Tq queries of the Tk keys (a block of queries against every
    key up to the block's end, as the attention paths call it), so row r's own key is column Tk - Tq + r, whatever
    a span hides (a window that keeps the first tokens leaves two runs of visible keys; only the later one ends at
    the query)."""
    tq, tk = scores.shape[-2:]
    rows = torch.arange(tq, device=scores.device)[:, None] + (tk - tq)
    return rows == torch.arange(tk, device=scores.device)[None, :]


def stick_breaking_weights(scores: torch.Tensor, form: str = "paper") -> torch.Tensor:
    """A [..., Tq, Tk] from scores that are -inf above the causal diagonal (computed in float32 or wider)."""
    s = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    rest = F.logsigmoid(-s)  # log(1 - beta); 0 where masked
    if form == "inclusive":
        after = torch.flip(torch.cumsum(torch.flip(rest, [-1]), -1), [-1]) - rest  # sum over keys m > j of the row
        return torch.exp(F.logsigmoid(s) + after)
    diag = _diagonal(s)
    rest = rest.masked_fill(diag, 0.0)  # the query's own key breaks nothing
    after = torch.flip(torch.cumsum(torch.flip(rest, [-1]), -1), [-1]) - rest  # sum over j < m < i
    earlier = torch.exp(F.logsigmoid(s) + after).masked_fill(diag, 0.0)
    if form == "fla":
        return earlier  # the leftover dropped
    return earlier + diag * torch.exp(rest.sum(-1, keepdim=True))  # the leftover on the query's own value


def stick_breaking_reference(q: torch.Tensor, k: torch.Tensor, form: str = "paper", visible=None) -> torch.Tensor:
    """The paper's weights (or the inclusive form's), transcribed loop by loop (tests): q, k [T, d] -> A [T, T];
    ``visible(i, j)`` (default: every j <= i) the keys a span lets query i see: a hidden key takes nothing and
    breaks nothing."""
    T, d = q.shape
    seen = visible or (lambda i, j: j <= i)

    def beta(i, j):
        return 1 / (1 + math.exp(-float(q[i] @ k[j]) / math.sqrt(d))) if seen(i, j) else 0.0

    A = torch.zeros(T, T, dtype=torch.float64)
    last = 1 if form == "inclusive" else 0  # the paper (and fla) break over m < i, the inclusive form over m <= i
    for i in range(T):
        for j in range(i + last):
            w = beta(i, j)
            for m in range(j + 1, i + last):
                w *= 1 - beta(i, m)
            A[i, j] = w
        if form == "paper":
            A[i, i] = math.prod(1 - beta(i, m) for m in range(i))
    return A


@SCHEMES.add
class StickBreaking(PositionalEncoding):
    name = "stick-breaking"
    description = "stick-breaking attention: sigmoid shares of what nearer keys left, no positions (Tan 2024)"
    Options = StickBreakingOptions
    owns_attention = True

    def normalise(self, scores: torch.Tensor) -> torch.Tensor:
        return stick_breaking_weights(scores, self.options.form)
