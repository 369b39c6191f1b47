"""Attention spans: which keys a query may see beyond the causal rule, per layer (a pattern's local layers) or at
evaluation (StreamingLLM's window).

- ``window`` W: sliding-window attention, key j visible from query i when i - W < j <= i (Gemma, SWAN-GPT);
- ``chunk`` C: chunked local attention, j visible when it lies in i's block of C positions (Llama 4's iRoPE);
- ``keep`` K (with a window): the first K tokens stay visible too (StreamingLLM's attention sinks).

Positions are the text's: a kept token keeps its own position (StreamingLLM re-indexes positions within its cache; a
relative scheme here sees the kept tokens at their true distance). The backends (``attention``) enforce a span
exactly, and at long lengths they read only the keys a block of queries can see (``keys``), so no T x T tensor
exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ..util.errors import UsageError


@dataclass(frozen=True)
class Span:
    window: int = 0  # 0: no window
    chunk: int = 0  # 0: no chunks
    keep: int = 0  # the first tokens a window keeps

    def __post_init__(self):
        if min(self.window, self.chunk, self.keep) < 0:
            raise UsageError(f"a window, chunk or kept count must be >= 0, got {self}")
        if self.window and self.chunk:
            raise UsageError("a layer takes a window or a chunk, not both")
        if self.keep and not self.window:
            raise UsageError("keeping the first tokens needs a window")

    def __bool__(self) -> bool:
        return bool(self.window or self.chunk)

    def visible(self, qi: torch.Tensor, ki: torch.Tensor) -> torch.Tensor:
        """Whether key ``ki`` is visible from query ``qi`` (broadcast index tensors), the causal rule included."""
        ok = ki <= qi
        if self.window:
            near = qi - ki < self.window
            ok = ok & (near | (ki < self.keep)) if self.keep else ok & near
        if self.chunk:
            ok = ok & (
                torch.div(qi, self.chunk, rounding_mode="floor") == torch.div(ki, self.chunk, rounding_mode="floor")
            )
        return ok

    def first_key(self, q0: int) -> int:
        """The first key (beyond the kept ones) that any query from ``q0`` on can see."""
        if self.window:
            return max(0, q0 - self.window + 1)
        if self.chunk:
            return q0 // self.chunk * self.chunk
        return 0

    def keys(self, q0: int, q1: int, device) -> torch.Tensor:
        """The indices of the keys the queries ``q0`` .. ``q1 - 1`` can see, ascending: the kept tokens, then the
        run of keys from ``first_key(q0)`` to ``q1 - 1``."""
        lo = self.first_key(q0)
        kept = torch.arange(min(self.keep, lo), device=device)
        return torch.cat([kept, torch.arange(lo, q1, device=device)])

    def counts(self, T: int, device) -> torch.Tensor:
        """How many keys each query 0 .. T-1 sees (float32), Scalable-Softmax's n."""
        i = torch.arange(T, device=device)
        n = i + 1
        if self.window:
            n = torch.minimum(n, torch.full_like(n, self.window)) + torch.clamp(
                torch.clamp(i - self.window + 1, min=0), max=self.keep
            )
        if self.chunk:
            n = i % self.chunk + 1
        return n.float()

    def label(self) -> str:
        """'w32', 'c64', 'w64+k4' ('' without a span)."""
        if self.chunk:
            return f"c{self.chunk}"
        if self.window:
            return f"w{self.window}" + (f"+k{self.keep}" if self.keep else "")
        return ""


def combined(own: Optional[Span], evaluation: Optional[Span]) -> Optional[Span]:
    """A layer's span at evaluation: its own where it has one (a local layer stays local), else the evaluation's."""
    if own:
        return own
    return evaluation if evaluation else None
