"""Learned absolute positions (GPT-2): a T_max x d table; positions >= T_max are undefined."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...util.errors import PositionOutOfRange
from .base import SCHEMES, PositionalEncoding


@dataclass
class LearnedOptions:
    weight_decay: bool = False  # decay the table with the others (GPT-2 does; docs/findings/baselines.md examines it)


@SCHEMES.add
class Learned(PositionalEncoding):
    name = "learned"
    description = "trained absolute position table (GPT-2); undefined beyond the training context"
    Options = LearnedOptions

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.table = nn.Parameter(torch.randn(ctx.positions, ctx.d_model) * 0.02)

    def decayed(self, name, param):
        return self.options.weight_decay if name == "table" else super().decayed(name, param)

    def position_table(self, length):
        return self.table[:length]

    def max_positions(self):
        return self.table.shape[0]

    def embed(self, x, positions):
        if self.consecutive and positions.shape[0] > self.table.shape[0]:  # positions are 0 .. T-1
            # Never clamp: a made-up position would produce a made-up perplexity.
            raise PositionOutOfRange(
                f"learned positions are defined for 0..{self.table.shape[0] - 1}, got position {positions.shape[0] - 1}"
            )
        return x + self.table[positions].to(x.dtype)
