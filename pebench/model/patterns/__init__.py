"""Layer patterns: a positional scheme and an attention span for each layer (``model.layers``).

A layer is a :class:`LayerSpec`: its scheme and options, a sliding ``window`` or a ``chunk`` of local attention, a
logit scale of its own (Llama 4's temperature on its NoPE layers) and Scalable-Softmax. The command line writes one
as ``SCHEME[:key=value...][@wN|@cN]`` (``rope@w32``, ``rope:base=1000000``, ``none``), a list of them comma-separated,
one per layer. A named pattern is a function of the model's depth and training context registered in ``PATTERNS``,
one module each in this folder (``irope``, ``local-global``, ``swan``, ``nope-rope-alt``), with its own settings
(``swan:window=16``). A config stores the expanded list, so a run's record says what each layer was.

``layers_of(model_cfg)`` is every layer's spec: the list, or the model's one scheme in every layer (a uniform model,
built exactly as before).
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import *  # noqa: F403  (the room's names, listed in base.__all__)
from .base import PATTERNS


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):  # noqa: F405  (the package's own path)
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()


def described() -> dict[str, str]:
    """Pattern name -> the first line of its function's docstring (``pebench list``)."""
    return {n: (PATTERNS.get(n).__doc__ or "").strip().splitlines()[0] for n in PATTERNS.names()}
