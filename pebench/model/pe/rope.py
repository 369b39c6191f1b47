"""Rotary position embedding (Su et al. 2021) and its length-extension family.

Each frequency variant is a pure function ``(head_dim, base, factor, original_context, **options) ->
(inv_freq, attention_factor)`` kept in a registry, following Hugging Face ``modeling_rope_utils``
(computed here in float64). ``attention_factor`` multiplies cos and sin, i.e. both q and k, so the
logits scale by its square (YaRN's temperature).

Rotation uses the "halves" pairing (k, k + d_h/2) of GPT-NeoX / Llama; the frequencies are the same
as with interleaved pairs.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional

import torch

from ...config import type_matches
from ...util.errors import UsageError
from ...util.registry import Registry
from .base import SCHEMES, PositionalEncoding

RopeFn = Callable[..., tuple[torch.Tensor, float]]
ROPE_VARIANTS: Registry[RopeFn] = Registry("RoPE scaling")
# A variant that changes the scores, not only the frequencies (STRING's shifted positions, ``rope_string``): its name
# -> ``fn(pe, q, k, start, seq_len)``, the scores of the queries from ``start`` against the keys; while such a variant
# is set the scheme computes its attention itself (``owns_attention``).
ROPE_ATTENTION: dict[str, Callable[..., torch.Tensor]] = {}
# Every variant takes these; its other keyword parameters (with defaults) are its options, set in
# ``pe_options.rope`` by name. A variant with a ``seq_len`` parameter is dynamic: its frequencies follow the actual
# sequence length rather than a fixed factor.
COMMON_ARGS = ("head_dim", "base", "factor", "original_context")
SEQ_LEN = "seq_len"


def variant_options(variant: str) -> dict[str, Any]:
    """A variant's own options and their defaults, read from its function's signature."""
    fn = ROPE_VARIANTS.get(canonical_variant(variant))
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if n not in COMMON_ARGS + (SEQ_LEN,)}


def is_dynamic(variant: str) -> bool:
    return SEQ_LEN in inspect.signature(ROPE_VARIANTS.get(canonical_variant(variant))).parameters


def default_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))


def _check(head_dim: int, base: float, factor: float, original_context: int) -> None:
    if head_dim <= 0 or head_dim % 2:
        raise UsageError(f"RoPE needs an even, positive head dimension, got {head_dim}")
    if not base > 1:
        raise UsageError(f"RoPE base must be > 1, got {base}")
    if not factor >= 1:
        raise UsageError(f"RoPE scaling factor must be >= 1, got {factor}")
    if original_context < 1:
        raise UsageError(f"original context must be >= 1, got {original_context}")


@ROPE_VARIANTS.register("default")
def _default(head_dim, base, factor, original_context):
    return default_inv_freq(head_dim, base), 1.0


@ROPE_VARIANTS.register("linear")
def _linear(head_dim, base, factor, original_context):
    """Position Interpolation (Chen 2023): positions / s, i.e. every frequency / s."""
    return default_inv_freq(head_dim, base) / factor, 1.0


@ROPE_VARIANTS.register("ntk")
def _ntk(head_dim, base, factor, original_context):
    """NTK-aware: keep the highest frequency, stretch the lowest by s: base' = base s^(D/(D-2))."""
    return default_inv_freq(head_dim, base * factor ** (head_dim / (head_dim - 2))), 1.0


@ROPE_VARIANTS.register("dynamic-ntk")
def _dynamic_ntk(head_dim, base, factor, original_context, seq_len: Optional[int] = None):
    """Hugging Face's dynamic NTK: base' = base ((f L / T) - (f - 1))^(D/(D-2)) once L > T."""
    seq_len = original_context if seq_len is None else seq_len
    if seq_len <= original_context:
        return default_inv_freq(head_dim, base), 1.0
    scale = factor * seq_len / original_context - (factor - 1)
    return default_inv_freq(head_dim, base * scale ** (head_dim / (head_dim - 2))), 1.0


def yarn_correction_range(head_dim, base, original_context, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """Dimension indices where a frequency makes beta_fast / beta_slow rotations within the context."""

    def dim(rotations):
        return head_dim * math.log(original_context / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim(beta_fast), dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, head_dim - 1)


@ROPE_VARIANTS.register("yarn")
def _yarn(head_dim, base, factor, original_context, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """YaRN (Peng 2023): NTK-by-parts ramp between original and interpolated frequencies,
    plus attention temperature 0.1 ln s + 1 on q and k."""
    if not beta_fast > beta_slow > 0:
        raise UsageError(f"yarn needs beta_fast > beta_slow > 0, got {beta_fast}, {beta_slow}")
    orig = default_inv_freq(head_dim, base)
    low, high = yarn_correction_range(head_dim, base, original_context, beta_fast, beta_slow, truncate)
    if low == high:
        high += 0.001  # avoid a zero-width ramp, as Hugging Face does
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    inv = (orig / factor) * ramp + orig * (1 - ramp)
    attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv, attention_factor


@ROPE_VARIANTS.register("llama3")
def _llama3(head_dim, base, factor, original_context, low_freq_factor=1.0, high_freq_factor=4.0):
    """Llama 3: wavelengths above T/low_freq_factor divided by s, below T/high_freq_factor kept,
    a smooth blend in between."""
    if not high_freq_factor > low_freq_factor > 0:
        raise UsageError("llama3 needs high_freq_factor > low_freq_factor > 0")
    inv = default_inv_freq(head_dim, base)
    wavelen = 2 * math.pi / inv
    low_wl, high_wl = original_context / low_freq_factor, original_context / high_freq_factor
    scaled = torch.where(wavelen > low_wl, inv / factor, inv)
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wl) & (wavelen <= low_wl)
    return torch.where(medium, smoothed, scaled), 1.0


def long_period_count(inv_freq: torch.Tensor, original_context: int) -> int:
    """How many components turn less than once within the training context (period 2 pi / theta above it): the
    ones that never completed a turn in training."""
    return int((2 * math.pi / inv_freq > original_context).sum())


def _clipped(head_dim, base, original_context, n: int) -> tuple[torch.Tensor, int]:
    inv = default_inv_freq(head_dim, base)
    if n < 0:
        raise UsageError(f"clip-soft/clip-hard: n is a number of components >= 0 (0: by period), got {n}")
    return inv, min(n or long_period_count(inv, original_context), len(inv))


@ROPE_VARIANTS.register("clip-soft")
def _clip_soft(head_dim, base, factor, original_context, n: int = 0):
    """CoPE (Li et al. 2026, arXiv 2602.05258): the ``n`` lowest frequencies (0: those whose period exceeds the
    training context) tapered by a half Hann window, 0.5 (1 + cos t) for t from 0 to pi across them: the highest of
    them kept, the lowest set to 0, no sharp edge (a hard cut rings). The same at every length."""
    inv, k = _clipped(head_dim, base, original_context, n)
    if k:
        inv[-k:] = inv[-k:] * 0.5 * (1.0 + torch.cos(torch.linspace(0.0, math.pi, k, dtype=torch.float64)))
    return inv, 1.0


@ROPE_VARIANTS.register("clip-hard")
def _clip_hard(head_dim, base, factor, original_context, n: int = 0):
    """The hard clip CoPE compares against: the ``n`` lowest frequencies (0: by period, as clip-soft) set to 0."""
    inv, k = _clipped(head_dim, base, original_context, n)
    if k:
        inv[-k:] = 0.0
    return inv, 1.0


# evaluated only when named (--rope-scaling clip-soft), never under a run's ``all``: the main job's cost and the
# records of the committed sets stay as they were
NAMED_ONLY = ("clip-soft", "clip-hard", "string")


def canonical_variant(variant: str) -> str:
    return "default" if variant in ("none", "default", None, "") else variant


def rope_frequencies(
    variant: str, head_dim: int, base: float = 10000.0, factor: float = 1.0, original_context: int = 2048, **options
) -> tuple[torch.Tensor, float]:
    """Public entry point: float64 inverse frequencies [head_dim/2] and the attention factor."""
    fn = ROPE_VARIANTS.get(canonical_variant(variant))
    _check(head_dim, base, factor, original_context)
    allowed = set(inspect.signature(fn).parameters) - set(COMMON_ARGS)
    unknown = set(options) - allowed
    if unknown:
        raise UsageError(f"RoPE scaling {variant!r} takes options {sorted(allowed) or 'none'}, got {sorted(unknown)}")
    return fn(head_dim, base, factor, original_context, **options)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


@dataclass
class RopeOptions:
    base: float = 10000.0
    scaling: str = "none"  # a ROPE_VARIANTS name ("none" = "default")
    factor: float = 0.0  # 0: automatic, max(1, sequence length / original_context)
    original_context: int = 0  # 0: the model's training context
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    # Options of variants that the fields above do not name (a variant registered from another module), by name.
    params: dict[str, Any] = field(default_factory=dict)

    def validate(self):
        ROPE_VARIANTS.get(canonical_variant(self.scaling))
        if self.factor != 0 and self.factor < 1:
            raise UsageError(f"rope factor must be >= 1 (or 0 for automatic), got {self.factor}")

    def for_variant(self, variant: str) -> dict:
        """The keyword options the variant's function takes: set here by name (a field or ``params``), else its
        own defaults."""
        out = {}
        for name in variant_options(variant):
            if name in self.params:
                out[name] = self.params[name]
            elif hasattr(self, name) and name != "params":
                out[name] = getattr(self, name)
        return out


@SCHEMES.add
class RoPE(PositionalEncoding):
    name = "rope"
    continuous_positions = True  # positions as numbers: real-valued ones too
    description = "rotary embedding of q and k (Su 2021); scalings: linear, ntk, dynamic-ntk, yarn, llama3"
    Options = RopeOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self._cache: dict = {}

    @property
    def variant(self) -> str:
        return canonical_variant(self.options.scaling)

    @classmethod
    def parse_options(cls, options: dict):
        """Options of any registered variant that the options dataclass does not name go to ``params``, checked
        against the type of the variant function's default."""
        own = {f.name for f in fields(cls.Options)}
        extra = {k: v for k, v in options.items() if k not in own}
        known = {n: d for v in ROPE_VARIANTS.names() for n, d in variant_options(v).items()}
        for k, v in extra.items():
            if k not in known:
                raise UsageError(
                    f"unknown option {k!r} for scheme {cls.name!r}; allowed: {', '.join(sorted(own - {'params'}))}"
                    f", or a scaling's own: {', '.join(sorted(set(known) - own)) or 'none'}"
                )
            if not type_matches(v, known[k]):
                raise UsageError(f"option {k!r} of scheme {cls.name!r} must be {type(known[k]).__name__}, got {v!r}")
        rest = {k: v for k, v in options.items() if k in own}
        if extra:
            rest["params"] = {**rest.get("params", {}), **extra}
        return super().parse_options(rest)

    @property
    def rotary_dim(self) -> int:
        """The dimension the frequencies are laid out for (d_h: d_h/2 frequencies, one per pair; PoPE: 2 d_h)."""
        return self.ctx.head_dim

    def resolved(self, seq_len: int) -> tuple[torch.Tensor, float, float]:
        """(inv_freq, attention_factor, factor) used for a sequence of ``seq_len`` tokens."""
        o = self.options
        orig = o.original_context or self.ctx.context
        extra = o.for_variant(self.variant)
        if self.variant == "default":
            factor = 1.0
        elif is_dynamic(self.variant):
            extra[SEQ_LEN] = seq_len
            factor = o.factor or 1.0
        else:
            factor = o.factor if o.factor else max(1.0, seq_len / orig)
        inv, att = rope_frequencies(self.variant, self.rotary_dim, o.base, factor, orig, **extra)
        return inv, att, factor

    def describe(self, seq_len: int) -> dict:
        _, att, factor = self.resolved(seq_len)
        return {
            "variant": "none" if self.variant == "default" else self.variant,
            "factor": factor,
            "attention_factor": att,
            "base": self.options.base,
        }

    def frequencies(self, seq_len: int) -> torch.Tensor:
        return self.resolved(seq_len)[0]

    def signature(self, seq_len: int) -> tuple:
        """The class and the exact float64 frequencies and attention factor its forward uses at ``seq_len``
        (``_angles`` is a function of these alone; a subclass's own terms do not depend on the variant)."""
        inv, att, _ = self.resolved(seq_len)
        return type(self).__qualname__, inv.numpy().tobytes(), float(att)

    def _cos_sin(self, positions: torch.Tensor, dtype: torch.dtype):
        seq_len = positions.shape[0]  # positions are 0 .. T-1 (a Python int keeps torch.compile graphs whole)
        if not self.consecutive:  # random training positions: new every step, never cached
            return self._angles(positions, seq_len, dtype)
        key = (seq_len, positions.device, dtype)
        if key not in self._cache:  # computed once per forward length, reused by every layer
            self._cache = {key: self._angles(positions, seq_len, dtype)}
        return self._cache[key]

    def _angles(self, positions: torch.Tensor, seq_len: int, dtype: torch.dtype):
        inv, att, _ = self.resolved(seq_len)
        angles = positions.to(torch.float64)[:, None] * inv.to(positions.device)[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        return (angles.cos() * att).to(dtype), (angles.sin() * att).to(dtype)

    @classmethod
    def variants(cls) -> list[str]:
        return ["none" if v == "default" else v for v in ROPE_VARIANTS.names() if v not in NAMED_ONLY]

    @classmethod
    def named_variants(cls) -> list[str]:
        return ["none" if v == "default" else v for v in ROPE_VARIANTS.names()]

    def with_variant(self, variant: str, factor: Optional[float] = None, **settings) -> "RoPE":
        """The same rotation with another scaling (evaluation-time extension); factor None = automatic, and
        ``settings`` the scaling's own options (``beta_fast``). Built with ``type(self)``, so a subclass (xPos,
        p-RoPE) keeps its own maths under every scaling."""
        ROPE_VARIANTS.get(canonical_variant(variant))
        return self.with_options(scaling=variant, factor=float(factor or 0.0), **settings)

    def rotate(self, q, k, positions, layer):
        self._seq_len = positions.shape[0]  # the window's length (a variant's scores may depend on it: STRING's)
        cos, sin = self._cos_sin(positions, q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    @property
    def owns_attention(self) -> bool:
        """True while a variant that computes the scores is set (``ROPE_ATTENTION``: STRING)."""
        return self.variant in ROPE_ATTENTION

    def attention_scores(self, q, k, layer, x, start):
        if type(self).rotate is not RoPE.rotate or type(self).score_mod is not RoPE.score_mod:
            raise UsageError(f"--rope-scaling {self.variant} applies to rope and p-rope, not {self.name!r}")
        return ROPE_ATTENTION[self.variant](self, q, k, start, getattr(self, "_seq_len", k.shape[2]))
