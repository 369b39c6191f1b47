"""The one interface between a positional encoding and the model.

A scheme can contribute in three places, and the model calls all three for every scheme
(the defaults do nothing), so the model never needs to know which scheme it holds:

1. ``embed(x, positions)``       add a term to the token embeddings (sinusoidal, learned);
2. ``rotate(q, k, positions, layer)``  transform queries and keys (RoPE);
3. ``score_mod(q, layer)``       return a :class:`ScoreMod`, a term added to the attention logits as a
                                 function of (batch, head, query index, key index) (ALiBi, T5, Shaw).

``positions`` is always the LongTensor 0 .. T-1; schemes may rely on that (and read T from its shape).

A ``ScoreMod`` is written with broadcasting torch ops only, so the *same* definition runs inside
FlexAttention (scalar index tensors) and on a materialized index grid (the reference path).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..config import type_matches
from ..errors import UsageError


@dataclass
class PEContext:
    """What a scheme may know about the model it sits in."""

    d_model: int
    n_heads: int
    n_layers: int
    context: int  # training context length

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class RelativeVectors:
    """Shaw-style terms that depend on the distance d = i - j only through learned vectors, clipped at
    ``band = len(key) - 1``: logit += q_i . key[min(d, band)] * scale, output += sum_j p_ij value[min(d, band)].

    A scheme that declares this structure lets the ``relative`` backend compute both terms with a few
    small matmuls on the diagonals of the score matrix, and differentiate them by hand."""

    key: torch.Tensor  # [band + 1, d_h]
    value: torch.Tensor  # [band + 1, d_h]


class ScoreMod:
    """A logit term ``score + f(b, h, q_idx, kv_idx)``.

    ``fn(score, b, h, q_idx, kv_idx)`` must broadcast. ``value_term`` is optional: schemes that also
    change the attention output (Shaw's value vectors) compute it from the row log-sum-exp of the
    final logits, which every backend can provide, so no T x T probability matrix is needed.
    """

    needs_lse: bool = False
    # If set: the term is the same for every key at distance >= band from the query (Shaw beyond k_max),
    # which lets the "banded" backend split attention into a plain causal part and a narrow band.
    band: Optional[int] = None
    # If set: the logit and value terms are Shaw-style relative vectors (see RelativeVectors).
    relative: Optional[RelativeVectors] = None

    def __init__(self, fn: Callable[..., torch.Tensor], dtype: torch.dtype = torch.float32):
        self.fn = fn
        self.dtype = dtype

    def __call__(self, score, b, h, q_idx, kv_idx):
        return self.fn(score, b, h, q_idx, kv_idx)

    def bias(self, b, h, q_idx, kv_idx) -> torch.Tensor:
        """The logit term alone on a broadcast index grid (the materialized paths add it to q.k).
        A scheme may override this with a faster equivalent; tests pin it to ``fn``."""
        return self.fn(torch.zeros((), dtype=self.dtype), b, h, q_idx, kv_idx)

    def value_term(self, q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float) -> torch.Tensor:
        raise NotImplementedError


# Band helpers for logit terms with a ``band`` (Shaw's value term, the ``banded`` attention backend).
def band_scores(q: torch.Tensor, k: torch.Tensor, band: int) -> torch.Tensor:
    """s[b, h, i, d] = q_i . k_{i-d} for d < band (garbage where i - d < 0), in O(T * band) memory.

    Queries go in blocks of ``band``; each block meets the 2*band keys that can lie within ``band``
    of it (one matmul per block), and the band's diagonals are gathered from that small product.
    """
    B, H, T, D = q.shape
    C = band
    nb = -(-T // C)
    pad = nb * C - T
    qb = F.pad(q, (0, 0, 0, pad)).view(B, H, nb, C, D)
    kw = F.pad(k, (0, 0, C, pad)).unfold(2, 2 * C, C)  # [B, H, nb, D, 2C]: keys blk*C - C .. blk*C + C - 1
    s = qb @ kw  # [B, H, nb, C, 2C]
    # query r of a block is global i = blk*C + r; key i - d sits at window index r + C - d
    idx = torch.arange(C, device=q.device)[:, None] + C - torch.arange(band, device=q.device)[None, :]
    s = s.gather(-1, idx.expand(B, H, nb, C, band))
    return s.reshape(B, H, nb * C, band)[:, :, :T]


def band_values(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out[b, h, i] = sum_d p[b, h, i, d] v_{i-d} (p must be 0 where i - d < 0), blockwise like band_scores."""
    B, H, T, D = v.shape
    C = p.shape[-1]
    nb = -(-T // C)
    pad = nb * C - T
    pb = F.pad(p, (0, 0, 0, pad)).view(B, H, nb, C, C)
    idx = torch.arange(C, device=v.device)[:, None] + C - torch.arange(C, device=v.device)[None, :]
    win = torch.zeros(B, H, nb, C, 2 * C, dtype=p.dtype, device=v.device).scatter_(-1, idx.expand(B, H, nb, C, C), pb)
    vw = F.pad(v, (0, 0, C, pad)).unfold(2, 2 * C, C)  # [B, H, nb, D, 2C]
    return (win @ vw.transpose(-1, -2)).reshape(B, H, nb * C, D)[:, :, :T]


class PositionalEncoding(nn.Module):
    """Base class: every hook is a no-op. Subclasses override what they need."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Dataclass describing the scheme's options (with defaults); None means no options.
    Options: ClassVar[Optional[type]] = None
    # True if the logit term depends on the head and the distance i - j only (not on the content): analysis
    # then plots it per head against distance (ALiBi, T5).
    static_bias: ClassVar[bool] = False

    def __init__(self, ctx: PEContext, options: Optional[dict[str, Any]] = None):
        super().__init__()
        self.ctx = ctx
        self.options = self.parse_options(options or {})

    @classmethod
    def parse_options(cls, options: dict[str, Any]):
        if cls.Options is None:
            if options:
                raise UsageError(f"scheme {cls.name!r} takes no options, got: {', '.join(options)}")
            return None
        allowed = {f.name: f for f in fields(cls.Options)}
        for key, value in options.items():
            if key not in allowed:
                raise UsageError(
                    f"unknown option {key!r} for scheme {cls.name!r}; allowed: {', '.join(allowed)}"
                )
            default = allowed[key].default
            if not type_matches(value, default):
                raise UsageError(
                    f"option {key!r} of scheme {cls.name!r} must be {type(default).__name__}, got {value!r}"
                )
        opts = cls.Options(**options)
        validate = getattr(opts, "validate", None)
        if validate is not None:
            validate()
        return opts

    def decayed(self, name: str, param: nn.Parameter) -> bool:
        """Whether the optimizer applies weight decay to the scheme's parameter ``name``: matrices yes, scalars
        and vectors no, and position tables named ``table`` (learned rows, T5's bias values) no by default."""
        return param.dim() >= 2 and name != "table"

    def position_table(self, length: int) -> Optional[torch.Tensor]:
        """The [length, d_model] term ``embed`` adds for positions 0 .. length-1, for absolute schemes (analysis
        reads it); None for schemes without one."""
        return None

    def max_positions(self) -> Optional[int]:
        """Longest sequence the scheme can represent (None: unlimited)."""
        return None

    # -- the three hooks -------------------------------------------------------------------
    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, layer: int):
        return q, k

    def score_mod(self, q: torch.Tensor, layer: int) -> Optional[ScoreMod]:
        return None
