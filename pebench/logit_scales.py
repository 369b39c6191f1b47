"""Evaluation-time logit scales, a registry of pure functions: ``fn(T, context, c, device)`` -> per-query logit
multipliers [T], or None where every factor is 1. Adding one is one function registered here (or from any module).

- ``none``: no scaling.
- ``logn``: log(i+1) / log(context) beyond the training context (log-n attention, scalable softmax).
- ``drope``: 1 + c ln(T / context) for a sequence of T tokens (DroPE's evaluation scaling).
- ``llama4``: Llama 4's attention temperature, 1 + 0.1 ln(floor(i / T) + 1) at position i (0-based), T the
  training context as its ``floor_scale`` (0.1 its ``attn_scale``). Llama 4 counts ``i + 1``, so its last training
  position already gets 1 + 0.1 ln 2; counting ``i`` keeps every factor 1 within the context, as every scale here
  does. Llama 4 applies it to its NoPE layers; here it applies to every layer (a NoPE model: ``--pe none``).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch

from .registry import Registry

ScaleFn = Callable[[int, int, float, torch.device], Optional[torch.Tensor]]
LOGIT_SCALES: Registry[ScaleFn] = Registry("logit scale")


@LOGIT_SCALES.register("none")
def _none(T: int, context: int, c: float, device) -> None:
    return None


@LOGIT_SCALES.register("logn")
def _logn(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None
    n = torch.arange(1, T + 1, device=device, dtype=torch.float32)
    return (torch.log(n) / math.log(context)).clamp(min=1.0)


@LOGIT_SCALES.register("drope")
def _drope(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None
    return torch.full((T,), 1.0 + c * math.log(T / context), device=device)


LLAMA4_ATTN_SCALE = 0.1  # Llama 4's attn_scale


@LOGIT_SCALES.register("llama4")
def _llama4(T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    if T <= context:
        return None  # floor(i / T) = 0 within the context: every factor 1
    i = torch.arange(T, device=device, dtype=torch.float32)
    return 1.0 + LLAMA4_ATTN_SCALE * torch.log(torch.floor(i / context) + 1.0)


def logit_scale_factors(kind: str, T: int, context: int, c: float, device) -> Optional[torch.Tensor]:
    """The multipliers of the registered scale ``kind`` (an unknown name: one line with the valid ones)."""
    return LOGIT_SCALES.get(kind)(T, context, c, device)
