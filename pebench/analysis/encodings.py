"""The position encodings themselves, as numbers: a table's spectrum and principal components, RoPE's long-term
decay bound under each frequency scaling, and logit terms (or relative vectors) against distance.

Everything here reads a scheme through its generic hooks (``position_table``, ``score_mod``), never by name,
except the RoPE bound, which is about RoPE's frequencies by definition."""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch


def _power(x: torch.Tensor) -> torch.Tensor:
    """[..., T, d] -> [..., T//2 + 1, d]: each dimension's power spectrum along position, centred, its DC bin 0."""
    power = torch.fft.rfft(x - x.mean(-2, keepdim=True), dim=-2).abs() ** 2
    power[..., 0, :] = 0.0
    return power


def _dim_concentration(power: torch.Tensor) -> torch.Tensor:
    """[..., bins, d] -> [..., d]: each dimension's share of its power in its strongest bin and the two next to it."""
    total = power.sum(-2).clamp(min=1e-300)
    padded = torch.nn.functional.pad(power.transpose(-1, -2), (1, 1))  # [..., d, bins + 2], a zero bin either side
    peak = power.argmax(-2)  # [..., d]
    near = sum(padded.gather(-1, (peak + j).unsqueeze(-1)).squeeze(-1) for j in range(3))
    return near / total


def table_spectrum(table: torch.Tensor) -> dict:
    """Per-dimension power spectrum of a [T, d] position table along position (each column centred).

    Returns the frequencies (cycles per position), the power averaged over dimensions, each dimension's
    dominant frequency, and the concentration: the mean over dimensions of the share of its (non-DC) power in
    its strongest bin and the two next to it (about 1 for a sinusoid, about 3 / (T / 2) for white noise)."""
    power = _power(table.double())
    freqs = torch.fft.rfftfreq(table.shape[0])
    total = power.sum(0).clamp(min=1e-300)
    return {
        "freqs": freqs.tolist(),
        "power": (power / total).mean(1).tolist(),
        "dominant": freqs[power.argmax(0)].tolist(),
        "concentration": float(_dim_concentration(power).mean()),
    }


def sinusoid_like(table: torch.Tensor, shuffles: int = 200, level: float = 0.95, seed: int = 0) -> dict:
    """Which of a [T, d] table's dimensions are sinusoid-like, told from low rank: a dimension is when its spectral
    concentration is above the ``level`` quantile of the same dimension's in ``shuffles`` copies of the table with its
    positions (rows) permuted. A permutation keeps every value, the covariance between dimensions and so the rank and
    the principal components' shares; it destroys only the order along position, which a frequency needs. So by
    chance ``1 - level`` of the dimensions pass, of any table. Returns that share (``fraction``), the chance share
    (``chance``) and the spread of the passing dimensions' dominant frequencies in octaves (``octaves``: from their
    10th to their 90th percentile, so a few chance passes do not stretch it; 0 with fewer than two): a sinusoidal
    table's spans several octaves, smooth curves of one scale none."""
    x = table.double()
    T = x.shape[0]
    gen = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(T, generator=gen) for _ in range(shuffles)])  # [S, T]
    null = _dim_concentration(_power(x[perms]))  # [S, d]
    power = _power(x)
    passing = _dim_concentration(power) > torch.quantile(null, level, dim=0)
    logf = torch.log2(torch.fft.rfftfreq(T, dtype=torch.float64)[power.argmax(0)][passing])
    octaves = float(torch.quantile(logf, 0.9) - torch.quantile(logf, 0.1)) if logf.numel() > 1 else 0.0
    return {"fraction": float(passing.double().mean()), "chance": 1 - level, "octaves": octaves}


def table_components(table: torch.Tensor, k: int = 3) -> dict:
    """The top-k principal components of a [T, d] table as curves against position, and their variance shares."""
    x = table.double() - table.double().mean(0, keepdim=True)
    u, s, _ = torch.linalg.svd(x, full_matrices=False)
    var = s**2
    return {"curves": (u[:, :k] * s[:k]).T.tolist(), "explained": (var[:k] / var.sum()).tolist()}


def rope_bound(inv_freq: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """Su et al.'s long-term decay bound (RoFormer, section 3.4.3): the relative size
    (1 / (d/2)) * sum_{j=1}^{d/2} |S_j|, with S_j = sum_{k<j} exp(i r theta_k), at each distance r."""
    phase = distances.double()[:, None] * inv_freq.double()[None, :]  # [R, d/2]
    s = torch.cumsum(torch.polar(torch.ones_like(phase), phase), dim=1)
    return s.abs().mean(1)


def rope_bound_curves(
    head_dim: int, base: float, context: int, factor: float, distances: torch.Tensor, variants=None
) -> dict:
    """The bound against distance for each frequency scaling at ``factor`` (default: unscaled): by default every
    registered scaling with a fixed factor (dynamic ones depend on the sequence, not a factor)."""
    from ..model.pe.rope import ROPE_VARIANTS, is_dynamic, rope_frequencies

    out = {}
    for v in variants or [v for v in ROPE_VARIANTS.names() if not is_dynamic(v)]:
        inv, _ = rope_frequencies(v, head_dim, base, factor if v != "default" else 1.0, context)
        out[v] = rope_bound(inv, distances).tolist()
    return out


def _probe(pe, layer: int, n: int = 1):
    """The scheme's term for content-free queries, keys and input (zeros): what position alone contributes."""
    H, dh = pe.ctx.n_heads, pe.ctx.head_dim
    zeros = torch.zeros(1, H, n, dh)
    return pe.score_mod(zeros, layer, zeros, torch.zeros(1, n, pe.ctx.d_model))


def bias_by_distance(pe, max_distance: int, layer: int = 0) -> Optional[np.ndarray]:
    """A logit term that depends on head and distance only (``pe.static_bias``), per head, at distances
    0 .. max_distance: [H, max_distance + 1]; None for schemes whose term depends on the content."""
    if not getattr(pe, "static_bias", False):
        return None
    H = pe.ctx.n_heads
    mod = _probe(pe, layer)
    if mod is None:
        return None
    d = torch.arange(max_distance + 1)
    qi = torch.tensor(max_distance).view(1, 1, 1, 1)
    with torch.no_grad():
        bias = mod.bias(
            torch.zeros(1, 1, 1, 1, dtype=torch.long),
            torch.arange(H).view(1, H, 1, 1),
            qi,
            (max_distance - d).view(1, 1, 1, -1),
        )
    return bias.expand(1, H, 1, max_distance + 1)[0, :, 0].double().numpy()


def effective_window(bias: np.ndarray, k: float) -> list[Optional[int]]:
    """Per head, the first distance at which the logit term has fallen k nats below its value at distance 0
    (None: never within the distances given)."""
    out = []
    for row in bias:
        hit = np.nonzero(row - row[0] <= -k)[0]
        out.append(int(hit[0]) if len(hit) else None)
    return out


def relative_vector_norms(pe, layer: int) -> Optional[dict]:
    """Norms of learned relative key/value vectors by clipped distance (Shaw-style schemes), else None."""
    mod = _probe(pe, layer)
    rel = getattr(mod, "relative", None) if mod is not None else None
    if rel is None:
        return None
    return {"key": rel.key.detach().norm(dim=-1).tolist(), "value": rel.value.detach().norm(dim=-1).tolist()}


def learned_vs_reference(pe, length: int) -> Optional[dict]:
    """The scheme's position table (``pe.position_table``), its spectrum and components, else None."""
    table = pe.position_table(length)
    if table is None:
        return None
    t = table.detach()
    return {"spectrum": table_spectrum(t), "components": table_components(t), "sinusoid_like": sinusoid_like(t)}
