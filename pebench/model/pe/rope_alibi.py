"""RoPE with ALiBi: q and k rotated as RoPE rotates them, and ALiBi's per-head penalty -m_h (i - j) added to the
logits, both at their defaults (the pair a 2026 byte-level study of WikiText-103 finds strongest overall). With every
slope zero it is ``rope`` exactly, and ALiBi's term is the same one ``alibi`` adds (tests/pe/test_rope_alibi.py);
every RoPE scaling applies to the rotation, the penalty is left as trained."""

from __future__ import annotations

from .alibi import ALiBi, add_slopes
from .base import SCHEMES
from .rope import RoPE


@SCHEMES.add
class RoPEALiBi(RoPE):
    name = "rope-alibi"
    description = "RoPE's rotation and ALiBi's linear distance penalty together (2026 byte-level study)"
    static_bias = True

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        add_slopes(self, ctx.n_heads)

    score_mod = ALiBi.score_mod  # the same term, read from this scheme's slopes
