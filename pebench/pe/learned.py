"""Learned absolute positions (GPT-2): a T_max x d table; positions >= T_max are undefined."""
from __future__ import annotations

import torch
from torch import nn

from ..errors import PositionOutOfRange
from . import SCHEMES
from .base import PositionalEncoding


@SCHEMES.register("learned")
class Learned(PositionalEncoding):
    name = "learned"
    description = "trained absolute position table (GPT-2); undefined beyond the training context"

    def __init__(self, ctx, options=None):
        super().__init__(ctx, options)
        self.table = nn.Parameter(torch.randn(ctx.context, ctx.d_model) * 0.02)

    def max_positions(self):
        return self.table.shape[0]

    def embed(self, x, positions):
        if positions.shape[0] > self.table.shape[0]:  # positions are 0 .. T-1
            # Never clamp: a made-up position would produce a made-up perplexity.
            raise PositionOutOfRange(
                f"learned positions are defined for 0..{self.table.shape[0] - 1}, "
                f"got position {positions.shape[0] - 1}"
            )
        return x + self.table[positions].to(x.dtype)
