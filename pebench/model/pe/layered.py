"""A model whose layers hold different schemes (``model.layers``, ``pebench.model.patterns``): one scheme module per
distinct (scheme, options), each built for the layers that use it, which it numbers 0, 1, ... among themselves (a
scheme with per-layer parameters gets one set per layer it serves).

It is the model's one ``PositionalEncoding``, so the model stays scheme-blind: ``at_layer`` hands the attention of
layer i its scheme and that scheme's own index for it, ``span`` its window or chunk, and ``embed`` adds every
absolute scheme's term once at the input (a pattern with ``learned`` layers learns one table). Evaluation-time
variants (RoPE's scalings) apply to the schemes that have them and leave the others alone. Not registered: a run
names its pattern, and builds this from the expanded list.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Optional

import torch
from torch import nn

from ..spans import Span
from .base import PEContext, PositionalEncoding


class LayeredPE(PositionalEncoding):
    name = "layers"
    description = "a scheme and a span per layer (model.layers)"

    def __init__(self, ctx: PEContext, layers: list, build, pe_options: dict):
        """``layers``: a LayerSpec per layer; ``build(name, ctx, options)`` builds one scheme (``pe.build_pe``)."""
        super().__init__(ctx)
        keys: list[tuple] = []
        members: dict[tuple, list[int]] = {}
        for i, layer in enumerate(layers):
            if layer.scheme_key not in members:
                keys.append(layer.scheme_key)
                members[layer.scheme_key] = []
            members[layer.scheme_key].append(i)
        self.schemes = nn.ModuleList(
            build(pe, replace(ctx, n_layers=len(members[(pe, opts)])), {**(pe_options.get(pe) or {}), **dict(opts)})
            for pe, opts in keys
        )
        index = {k: n for n, k in enumerate(keys)}
        self.slots = []  # layer -> (its scheme, the scheme's own index for it)
        for i, layer in enumerate(layers):
            self.slots.append((index[layer.scheme_key], members[layer.scheme_key].index(i)))
        self.spans = [layer.span for layer in layers]
        self.owns_attention = any(s.owns_attention for s in self.schemes)

    @property
    def consecutive(self) -> bool:
        return self.__dict__.get("_consecutive", True)

    @consecutive.setter
    def consecutive(self, value: bool) -> None:
        self.__dict__["_consecutive"] = value
        for s in self.__dict__.get("_modules", {}).get("schemes", []):
            s.consecutive = value

    def at_layer(self, layer: int) -> tuple[PositionalEncoding, int]:
        s, j = self.slots[layer]
        return self.schemes[s], j

    def span(self, layer: int) -> Span:
        return self.spans[layer]

    def variants(self) -> list[str]:  # an instance's list: the union of its schemes' lists
        out: list[str] = []
        for s in self.schemes:
            out += [v for v in s.variants() if v not in out]
        return out

    def with_variant(self, variant: str, factor: Optional[float] = None, **settings) -> "LayeredPE":
        new = copy.copy(self)  # the same class, its schemes replaced where they have the variant
        new.__dict__["_modules"] = dict(self._modules)
        new.schemes = nn.ModuleList(
            s.with_variant(variant, factor, **settings) if variant in s.variants() else s for s in self.schemes
        )
        new.variant = variant
        return new

    def describe(self, seq_len: int) -> dict:
        out: dict = {}
        for s in self.schemes:
            out = {**s.describe(seq_len), **out}  # the first scheme that says a thing says it
        return out

    def frequencies(self, seq_len: int) -> Optional[torch.Tensor]:
        return next((f for s in self.schemes if (f := s.frequencies(seq_len)) is not None), None)

    def signature(self, seq_len: int) -> Optional[tuple]:
        sigs = tuple(s.signature(seq_len) for s in self.schemes)
        return None if any(g is None for g in sigs) else sigs

    def after_step(self) -> None:
        for s in self.schemes:
            s.after_step()

    def decayed(self, name: str, param: nn.Parameter) -> bool:
        _, i, rest = name.split(".", 2)  # schemes.<i>.<the scheme's own name>
        return self.schemes[int(i)].decayed(rest, param)

    def max_positions(self) -> Optional[int]:
        limits = [m for s in self.schemes if (m := s.max_positions()) is not None]
        return min(limits) if limits else None

    def position_table(self, length: int) -> Optional[torch.Tensor]:
        tables = [t for s in self.schemes if (t := s.position_table(length)) is not None]
        return sum(tables[1:], tables[0]) if tables else None

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        for s in self.schemes:
            x = s.embed(x, positions)
        return x
