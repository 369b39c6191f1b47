"""The one interface between a positional encoding and the model.

A scheme can contribute in five places, and the model calls them for every scheme (the defaults do nothing, or
compute plain attention), so the model never needs to know which scheme it holds:

1. ``embed(x, positions)``       add a term to the token embeddings (sinusoidal, learned);
2. ``rotate(q, k, positions, layer)``  transform queries and keys (RoPE);
3. ``score_mod(q, layer, k, x)`` return a :class:`ScoreMod`, a term added to the attention logits as a
                                 function of (batch, head, query index, key index) (ALiBi, T5, Shaw; CoPE reads
                                 the keys ``k``, FoX the layer's input ``x``);
4. ``attention_scores(q, k, layer, x, start)`` and 5. ``normalise(scores)``: a scheme that computes attention
   itself (``owns_attention``: PaTH's scores, stick-breaking's weights) replaces the scores or the softmax; the
   model then attends through ``attention.attend_normalised``.

``positions`` is the LongTensor 0 .. T-1 (``self.consecutive`` True), except in training with
``train.random_positions`` (Ruoss et al. 2023), where it is a sorted random subset of [0, M) and
``self.consecutive`` is False. Logit terms see the same positions: the model maps a term's query and key
indices through them (:func:`at_positions`), so a term written in indices needs no change.

A ``ScoreMod`` is written with broadcasting torch ops only, so the *same* definition runs inside
FlexAttention (scalar index tensors) and on a materialized index grid (the reference path).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Callable, ClassVar, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ...config import type_matches
from ...util.errors import UsageError
from ...util.registry import Registry
from ..spans import Span


@dataclass
class PEContext:
    """What a scheme may know about the model it sits in."""

    d_model: int
    n_heads: int
    n_layers: int
    context: int  # training context length
    max_position: int = 0  # largest training position + 1 (random positions); 0: the context

    @property
    def positions(self) -> int:
        return max(self.context, self.max_position)

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
    # False for terms that cannot run inside FlexAttention (they need a whole row of scores, or a tensor op
    # per score); ``max_materialize`` caps the length up to which the whole T x T term may be materialized.
    flex_ok: bool = True
    max_materialize: Optional[int] = None
    # False for data-dependent terms that never read positions (FoX, CoPE): random positions leave them alone.
    uses_positions: bool = True
    # If set: the term is the same for every key at distance >= band from the query (Shaw beyond k_max),
    # which lets the "banded" backend split attention into a plain causal part and a narrow band.
    band: Optional[int] = None
    # If set: the logit and value terms are Shaw-style relative vectors (see RelativeVectors).
    relative: Optional[RelativeVectors] = None
    # If set: a function of no arguments giving, as a hashable value, everything the term depends on besides the
    # indices (its scheme's class and parameter values). Equal keys mean equal terms, so CPU inference builds a
    # materialized term once for every layer and batch that share it (``attention._inference_bias``).
    key: Optional[Callable[[], tuple]] = None

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
        """The term added to the attention output, [B, H, T, d_h], from the final logits' row log-sum-exp ``lse``
        [B, H, T]. A row whose ``lse`` is +inf is not needed (``attention.attend_from`` skips it) and must stay
        finite, which exp(s - lse) = 0 gives."""
        raise NotImplementedError


def at_positions(mod: Optional[ScoreMod], positions: torch.Tensor) -> Optional[ScoreMod]:
    """The same term evaluated at ``positions[q_idx]``, ``positions[kv_idx]`` (random training positions)."""
    if mod is None or not mod.uses_positions:
        return mod
    if mod.relative is not None or mod.band is not None or mod.needs_lse:
        raise UsageError(
            "this scheme's attention paths assume consecutive positions; train.random_positions "
            "applies to schemes whose terms are functions of positions (not shaw)"
        )
    fn, bias = mod.fn, mod.bias

    out = ScoreMod(lambda score, b, h, qi, ki: fn(score, b, h, positions[qi], positions[ki]), mod.dtype)
    out.bias = lambda b, h, qi, ki: bias(b, h, positions[qi], positions[ki])
    out.flex_ok, out.max_materialize = mod.flex_ok, mod.max_materialize
    return out


def scaled(mod: Optional[ScoreMod], factors: torch.Tensor) -> Optional[ScoreMod]:
    """The term multiplied by ``factors[q_idx]``, or ``factors[h, q_idx]`` for per-head factors [H, T] (log-n,
    DroPE and Scalable-Softmax multiply whole logits: the model scales q, and this scales the scheme's term)."""
    if mod is None:
        return None
    if mod.needs_lse or mod.relative is not None:
        raise UsageError("logit scaling is not supported with a value term (shaw)")
    fn, bias = mod.fn, mod.bias

    def at(h, qi):
        return factors[qi] if factors.dim() == 1 else factors[h, qi]

    def scaled_fn(score, b, h, qi, ki):
        return score + at(h, qi) * (fn(score, b, h, qi, ki) - score)

    out = ScoreMod(scaled_fn, mod.dtype)
    out.bias = lambda b, h, qi, ki: at(h, qi).to(mod.dtype) * bias(b, h, qi, ki)
    out.flex_ok, out.max_materialize, out.uses_positions = mod.flex_ok, mod.max_materialize, mod.uses_positions
    out.band = mod.band
    return out


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
    # The evaluation-time variant this instance computes ("default": the scheme as trained).
    variant: str = "default"
    # True if the scheme reads positions as numbers, so real-valued ones mean something (Random Float Sampling:
    # train.random_positions_float); a table indexed by position (learned) or a bucketed distance cannot.
    continuous_positions: ClassVar[bool] = False

    def __init__(self, ctx: PEContext, options: Optional[dict[str, Any]] = None):
        super().__init__()
        self.ctx = ctx
        self.options = self.parse_options(options or {})
        self.consecutive = True  # positions are 0 .. T-1 (the model sets False for random positions)

    # -- evaluation-time variants (RoPE's scalings, and those of its subclasses) -----------------
    @classmethod
    def variants(cls) -> list[str]:
        """Names of the evaluation-time variants this scheme can build of itself and evaluates under ``all`` (none
        by default)."""
        return []

    @classmethod
    def named_variants(cls) -> list[str]:
        """The variants ``--rope-scaling`` may name for it: ``variants`` and those evaluated only when named."""
        return cls.variants()

    def with_variant(self, variant: str, factor: Optional[float] = None, **settings) -> "PositionalEncoding":
        raise UsageError(f"scheme {self.name!r} has no evaluation-time variants")

    def describe(self, seq_len: int) -> dict:
        """The scheme's own settings at a sequence length, written into each record as ``pe_state`` (RoPE: its
        variant, factor and attention factor); empty for schemes with nothing to say."""
        return {}

    def frequencies(self, seq_len: int) -> Optional[torch.Tensor]:
        """Rotary inverse frequencies [d_h/2] used at ``seq_len`` (float64), for analysis; None without rotation."""
        return None

    def signature(self, seq_len: int) -> Optional[tuple]:
        """What this scheme computes on sequences of ``seq_len`` tokens, as a key: two variants of the same trained
        scheme with equal keys compute the same function there, bit for bit, so evaluation measures one and copies
        it to the other (RoPE's scalings at 1x, dynamic NTK where it equals NTK). None (the default): never shared."""
        return None

    def after_step(self) -> None:
        """Called after every optimizer step (under no_grad): a scheme may project its parameters back into
        their domain here, so a bound never cuts the gradient (KERPLE)."""

    def with_options(self, **changes) -> "PositionalEncoding":
        """A copy of this scheme (the same class, so a subclass keeps its maths) with some options changed and
        the same learned parameters."""
        from dataclasses import asdict

        new = type(self)(self.ctx, {**asdict(self.options), **changes})
        new.load_state_dict(self.state_dict())
        ref = next(iter(list(self.parameters()) + list(self.buffers())), None)
        return new.to(ref.device) if ref is not None else new

    @classmethod
    def parse_options(cls, options: dict[str, Any]):
        if cls.Options is None:
            if options:
                raise UsageError(f"scheme {cls.name!r} takes no options, got: {', '.join(options)}")
            return None
        allowed = {f.name: f for f in fields(cls.Options)}
        for key, value in options.items():
            if key not in allowed:
                raise UsageError(f"unknown option {key!r} for scheme {cls.name!r}; allowed: {', '.join(allowed)}")
            f = allowed[key]
            default = f.default if f.default is not MISSING else f.default_factory()
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

    # -- per layer (a pattern's ``pe.layered.LayeredPE`` overrides these) -------------------------
    def at_layer(self, layer: int) -> tuple["PositionalEncoding", int]:
        """The scheme layer ``layer`` uses and its index for that layer among the layers it serves."""
        return self, layer

    def span(self, layer: int) -> Optional[Span]:
        """Layer ``layer``'s attention span (a window, a chunk); None: the whole causal span."""
        return None

    # -- the hooks (embed, rotate, score_mod; attention_scores and normalise where owns_attention) ----------
    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, layer: int):
        return q, k

    # A scheme that computes attention itself sets ``owns_attention``: its scores (``attention_scores``: PaTH's
    # transforms between key and query) and its weights (``normalise``: stick-breaking's instead of softmax). The model
    # then attends through ``attention.attend_normalised``, a block of ``query_block`` queries at a time, and the
    # analysis reads the same weights.
    owns_attention: bool = False
    query_block: int = 256

    def attention_scores(self, q, k, layer: int, x, start: int) -> torch.Tensor:
        """Scores [B, H, n, T'] of the queries ``start`` .. ``start + n - 1`` against the keys 0 .. T'-1 (q [B, H, n,
        d_h], k [B, H, T', d_h], ``x`` the layer's input [B, T, d_model]), -inf above the causal diagonal. The
        default is q.k / sqrt(d_h)."""
        qi = torch.arange(start, start + q.shape[2], device=q.device)[:, None]
        ki = torch.arange(k.shape[2], device=q.device)[None, :]
        return ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).masked_fill(ki > qi, float("-inf"))

    def normalise(self, scores: torch.Tensor) -> torch.Tensor:
        """Attention weights from scores [..., Tq, Tk] that are -inf above the causal diagonal (the default:
        softmax, which the attention backends compute fused)."""
        return torch.softmax(scores, dim=-1)

    def score_mod(
        self, q: torch.Tensor, layer: int, k: Optional[torch.Tensor] = None, x: Optional[torch.Tensor] = None
    ) -> Optional[ScoreMod]:
        """The logit term for this layer's queries ``q`` [B, H, T, d_h]; data-dependent schemes also read the
        keys ``k`` (CoPE's gates) or the layer's input ``x`` [B, T, d_model] (FoX's forget gates)."""
        return None


# Every scheme registers here under its name (``@SCHEMES.add``); ``pebench.model.pe`` discovers the modules.
SCHEMES: Registry[type[PositionalEncoding]] = Registry("positional encoding")
