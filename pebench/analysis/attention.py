"""Attention statistics of a trained model on real text, computed one block of queries at a time.

For every layer and head, over the queries of the evaluation windows: the mean attention distance
sum_j p_ij (i - j), the entropy -sum_j p_ij log p_ij, the share of mass on keys at distance >= the training
context (keys no training window ever held), the sink mass (the weight on the first token, key 0, over the queries
after it), and the mass by distance in log2 bins (0, 1, 2-3, 4-7, ...).
The probabilities are recomputed from the model's own q, k and logit term (the exact chunked path), so no
T x T tensor exists: memory is one block of queries x T per head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..model.attention import _causal_scores

CHUNK = 256


def distance_bin(d: torch.Tensor) -> torch.Tensor:
    """Log2 bin of a distance: 0 -> 0, 1 -> 1, 2-3 -> 2, 4-7 -> 3, ..."""
    d = d.clamp(min=0)
    return torch.where(d == 0, torch.zeros_like(d), torch.floor(torch.log2(d.clamp(min=1).double())).long() + 1)


def n_bins(length: int) -> int:
    return int(distance_bin(torch.tensor(max(length - 1, 0)))) + 1


def bin_edges(length: int) -> list[int]:
    """Smallest distance of each bin."""
    return [0] + [2 ** (b - 1) for b in range(1, n_bins(length))]


def query_stats(p: torch.Tensor, q_offset: int, far: int):
    """Per query of a block: (mean distance, entropy, mass at distance >= far, mass on key 0, mass per log2 bin).

    ``p`` [B, H, n, K] are attention probabilities of queries q_offset .. q_offset + n - 1 over keys 0 .. K-1
    (zero on masked keys). Returns tensors [B, H, n] (four; the first query's mass on key 0, its only key, counts
    as 0 there and ``AttentionStats`` leaves it out of the sink's mean) and [B, H, n, bins]."""
    n, K = p.shape[-2:]
    i = torch.arange(q_offset, q_offset + n, device=p.device)[:, None]
    d = (i - torch.arange(K, device=p.device)[None, :]).clamp(min=0)
    p64 = p.double()
    mean_d = (p64 * d).sum(-1)
    entropy = -torch.special.xlogy(p64, p64).sum(-1)
    far_mass = (p64 * (d >= far)).sum(-1)
    sink = p64[..., 0] * (i[:, 0] > 0)
    bins = distance_bin(d).expand_as(p64)
    mass = torch.zeros(*p64.shape[:-1], n_bins(max(K, q_offset + n)), dtype=torch.float64, device=p.device)
    mass.scatter_add_(-1, bins, p64)
    return mean_d, entropy, far_mass, sink, mass


KEYS = ("distance", "entropy", "far", "sink", "bins")


@dataclass
class AttentionStats:
    """Sums over queries, per layer and head; ``summary`` turns them into means."""

    length: int
    far: int
    n_layers: int
    n_heads: int
    queries: int = 0
    sink_queries: int = 0  # the queries after the first token (the first's only key is itself)
    sums: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        nb = (n_bins(self.length),)
        self.sums = {k: np.zeros((self.n_layers, self.n_heads) + (nb if k == "bins" else ())) for k in KEYS}

    def add(self, layer: int, p: torch.Tensor, q_offset: int) -> None:
        for key, value in zip(KEYS, query_stats(p, q_offset, self.far)):
            v = value.sum((0, 2)).cpu().numpy()
            if key == "bins":
                self.sums[key][layer, :, : v.shape[1]] += v
            else:
                self.sums[key][layer] += v
        if layer == 0:
            self.queries += p.shape[0] * p.shape[2]
            self.sink_queries += p.shape[0] * (p.shape[2] - (q_offset == 0))

    def summary(self) -> dict:
        """Means per query, as lists [layer][head] (and [layer][head][bin] for the mass by distance)."""
        out = {"length": self.length, "far": self.far, "queries": self.queries, "bin_edges": bin_edges(self.length)}
        out.update({k: (self.sums[k] / (self.sink_queries if k == "sink" else self.queries)).tolist() for k in KEYS})
        return out


def _hook(stats: AttentionStats, layer: int, chunk: int):
    def pre_hook(module, args):
        q, k, _, mod = module.qkv_and_term(*args)
        T = q.shape[2]
        scale = q.shape[-1] ** -0.5
        x, pe = args[0], args[1]
        span = module.span(pe)  # a layer's window or chunk (a pattern's local layers): keys outside get no weight
        for start in range(0, T, chunk):
            end = min(T, start + chunk)
            if pe.owns_attention:  # its own scores and weights (stick-breaking, PaTH)
                s = pe.attention_scores(q[:, :, start:end], k[:, :, :end], layer, x, start).float()
            else:
                s = _causal_scores(q[:, :, start:end], k[:, :, :end], mod, scale, q_offset=start, materialize=True)
            if span:
                qi, ki = torch.arange(start, end)[:, None], torch.arange(end)[None, :]
                s = s.float().masked_fill(~span.visible(qi.to(s.device), ki.to(s.device)), float("-inf"))
            w = pe.normalise(s.float()) if pe.owns_attention else torch.softmax(s.float(), dim=-1)
            stats.add(layer, w, start)

    return pre_hook


@torch.no_grad()
def attention_stats(model, windows: torch.Tensor, far: int, batch: int = 1, chunk: int = CHUNK) -> dict:
    """Attention statistics of ``model`` over ``windows`` [N, L] (token ids), ``batch`` windows at a time."""
    cfg = model.cfg
    stats = AttentionStats(windows.shape[1], far, cfg.n_layers, cfg.n_heads)
    handles = [b.attn.register_forward_pre_hook(_hook(stats, i, chunk)) for i, b in enumerate(model.blocks)]
    try:
        for start in range(0, windows.shape[0], batch):
            model(windows[start : start + batch])
    finally:
        for h in handles:
            h.remove()
    return stats.summary()


def windows_of(stream: np.ndarray, length: int, tokens: int) -> torch.Tensor:
    """Non-overlapping windows of ``length`` from the start of the stream, as many as fit ``tokens`` (at least 1)."""
    n = max(1, min(tokens, len(stream)) // length)
    if n * length > len(stream):
        raise ValueError(f"the stream has {len(stream)} tokens, fewer than one window of {length}")
    return torch.from_numpy(np.asarray(stream[: n * length], dtype=np.int64).reshape(n, length))


def head_means(summary: dict, key: str) -> float:
    vals = [v for layer in summary[key] for v in layer]
    return float(sum(vals) / len(vals))


def uniform_sink(length: int) -> float:
    """The sink mass of uniform causal attention over a window of ``length``: the mean of 1 / (i + 1) over the
    queries i = 1 .. length - 1 after the first (a model with no sink puts about this much on the first token)."""
    return sum(1.0 / (i + 1) for i in range(1, length)) / (length - 1)


def entropy_ceiling(length: int) -> float:
    """Mean over queries i = 0..L-1 of log(i + 1): the entropy of uniform causal attention."""
    return math.lgamma(length + 1) / length
