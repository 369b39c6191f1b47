"""RoPE-ID, "RoPE In Distribution" (Wertheimer, Zhang, Liu, Yin & Wang 2026, "Frayed RoPE and Long Inputs: A Geometric
Perspective", arXiv 2603.18017, ICLR 2026): beyond the training length RoPE's slow channels rotate to angles training
never showed, which breaks the separation of the query and key clusters that lets heads park attention on a sink
token; the fix rotates only a subset of the channels, and only with high frequencies.

pebench's reading, a preset next to p-RoPE: the highest ``fraction`` of the frequencies rotate (0.5: half the channel
pairs, as the paper's main setting), the rest stay unrotated, and with ``in_distribution`` (the default) every rotated
frequency completes at least one full turn within the training context (one below 2 pi / context is raised to it), so
no rotated channel meets an angle at 16x that it did not meet at 1x. ``fraction: 1`` with ``in_distribution: false`` is
``rope`` exactly, ``fraction: 0`` is ``none``. The RoPE scalings apply to the rotated part, before the raise."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import SCHEMES
from .p_rope import PRoPE, PRopeOptions, kept_frequencies


@dataclass
class RopeIdOptions(PRopeOptions):
    fraction: float = 0.5
    in_distribution: bool = True


def in_distribution(inv, kept: int, positions: int):
    """The inverse frequencies with each of the first ``kept`` raised to at least one turn over ``positions``."""
    out = inv.clone()
    out[:kept] = out[:kept].clamp(min=2 * math.pi / positions)
    return out


@SCHEMES.add
class RoPEID(PRoPE):
    name = "rope-id"
    description = "RoPE on half the channels, every rotated frequency a full turn within the context (Wertheimer 2026)"
    Options = RopeIdOptions

    def resolved(self, seq_len):
        inv, att, factor = super().resolved(seq_len)
        if self.options.in_distribution:
            inv = in_distribution(inv, kept_frequencies(len(inv), self.options.fraction), self.ctx.positions)
        return inv, att, factor
