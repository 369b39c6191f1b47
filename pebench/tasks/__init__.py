"""Evaluation tasks and their metrics, in registries like the schemes' (lm-evaluation-harness's ``Task``).

The interface and the registries live in :mod:`pebench.tasks.base`; every other module of this folder is a task
that registers itself, discovered like the schemes. Adding a task is one new module here (or anywhere, calling
:func:`register_task`). Reports read the tasks' metadata and run no model.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import (
    METRICS,
    TASKS,
    EvalContext,
    Metric,
    Task,
    mean_interval,
    metric,
    parse_floats,
    parse_task_opts,
    record_line,
    register_task,
    resolve_tasks,
    task_names,
    task_options,
    unregister_task,
    wilson,
)


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


_discover()

__all__ = [
    "METRICS",
    "TASKS",
    "EvalContext",
    "Metric",
    "Task",
    "mean_interval",
    "metric",
    "parse_floats",
    "record_line",
    "parse_task_opts",
    "register_task",
    "resolve_tasks",
    "task_names",
    "task_options",
    "unregister_task",
    "wilson",
]
