"""What `pebench analyze` measures, with its defaults declared once: the command's options are made from these
fields' defaults, and ``run`` reads the object. Light on purpose (no torch), so the command line imports it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

WINDOW_K = math.log(100)  # a key's weight falls to 1% of an equally scored key at distance 0


@dataclass
class AnalyzeOptions:
    lengths: Optional[list[int]] = None  # default: the run's evaluation multiples
    tokens: int = 8192  # validation tokens per length
    window_k: float = WINDOW_K
    device: str = "auto"
    out: Optional[Path] = None  # where the files go (default: RESULTS/analysis)
    logit_scale: Optional[str] = None  # eval's --logit-scale, the logits scaled as evaluated (default: the run's own)
