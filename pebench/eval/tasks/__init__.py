"""Evaluation tasks and their metrics, in registries like the schemes' (lm-evaluation-harness's ``Task``).

The interface and the registries live in :mod:`pebench.eval.tasks.base`; every other module of this folder is a task
that registers itself, discovered like the schemes. Adding a task is one new module here (or anywhere, calling
:func:`register_task`). Reports read the tasks' metadata and run no model.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import *  # noqa: F403  (the room's names, listed in base.__all__)


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):  # noqa: F405  (the package's own path)
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()
