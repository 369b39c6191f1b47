"""Positional encodings: one module per scheme, discovered and registered by name.

Adding a scheme: drop a module in this folder that defines a ``PositionalEncoding`` subclass decorated
with ``@SCHEMES.add``. Nothing else needs to change. A scheme outside the package is named
``path/to/file.py:ClassName`` on the command line, or installed as an entry point in the group
``pebench.schemes``; either registers under the class's ``name``, and a run records where it came from
(``model.pe_source``) so later commands find it again.
"""

from __future__ import annotations

import importlib
import pkgutil

from .resolve import *  # noqa: F403  (the room's names, listed in resolve.__all__)


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):  # noqa: F405  (the package's own path)
        if mod.name not in ("base", "resolve") and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()
