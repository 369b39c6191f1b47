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

    dtype = torch.float32

    def value_term(self, q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float) -> torch.Tensor:
        raise NotImplementedError


class PositionalEncoding(nn.Module):
    """Base class: every hook is a no-op. Subclasses override what they need."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Dataclass describing the scheme's options (with defaults); None means no options.
    Options: ClassVar[Optional[type]] = None

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
