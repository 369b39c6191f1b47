"""Evaluation tasks and their metrics, in registries like the schemes' (lm-evaluation-harness's ``Task``).

A task measures one finished model at one evaluation length and returns the measured part of a record: its
``metrics`` (name -> value), their ``intervals`` (name -> [lo, hi], 95%) and task-specific ``details``. It declares:
- ``metrics``: each a :class:`Metric` that knows whether higher is better (reports bold and rank by it);
- ``fields``: the keys of its ``details`` (documented in the README with the record's fields);
- ``options``: its settings with defaults (``pebench eval --trials 20 --depths 0,0.5,1 ...``);
- ``protocol(options, protocol)``: the key that keeps records of different settings apart.

Adding a task is one module that subclasses :class:`Task` and calls :func:`register_task`; ``pebench eval
--task NAME``, ``report --metric NAME`` and ``run`` then know it. This module is torch-free (reports use it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import UsageError
from ..registry import Registry, unknown_name_message


@dataclass(frozen=True)
class Metric:
    name: str
    task: str
    higher_is_better: bool
    description: str
    digits: int = 2

    def best(self, values: list[float]) -> float:
        return max(values) if self.higher_is_better else min(values)


METRICS: dict[str, Metric] = {}
TASKS: Registry["Task"] = Registry("evaluation task")


class Task:
    """One evaluation task. Subclasses set the class attributes and implement :meth:`measure`."""

    name: str = ""
    description: str = ""
    metrics: tuple[Metric, ...] = ()
    fields: dict[str, str] = {}  # details key -> description
    options: dict[str, Any] = {}  # option -> default
    headline: str = ""  # the metric of the task in the context-use table

    def protocol(self, options: dict, protocol) -> tuple[str, dict]:
        """(protocol name, params) written into the record: settings that change the measurement."""
        return protocol.name, protocol.params()

    def check(self, options: dict, lengths: list[int], context: int, n_tokens: int, protocol) -> None:
        """Raise UsageError for settings this task cannot measure (at these lengths, on an evaluation stream of
        ``n_tokens`` tokens, under ``protocol``), before anything runs."""

    def prepare(self, ctx) -> None:
        """Once per run and variant, before the lengths (e.g. marking the stream)."""

    def measure(self, ctx, length: int) -> dict:
        """{status, reason, metrics, intervals, details} at one length; ``ctx`` is evaluate.EvalContext."""
        raise NotImplementedError

    def outputs(self, df, root, suffix: str = "") -> list:
        """Extra report files from this task's records (a pandas frame); none by default."""
        return []

    def undefined(self, reason: str) -> dict:
        return {"status": "undefined", "reason": reason, "metrics": {m.name: None for m in self.metrics},
                "intervals": {}, "details": {}}


def register_task(task: Task) -> Task:
    """Register a task instance and its metrics (metric names are unique across tasks)."""
    for m in task.metrics:
        if m.name in METRICS and METRICS[m.name].task != task.name:
            raise ValueError(f"metric {m.name!r} of task {task.name!r} is already a metric of {METRICS[m.name].task!r}")
    TASKS.register(task.name)(task)
    for m in task.metrics:
        METRICS[m.name] = m
    return task


def unregister_task(name: str) -> None:
    """Remove a task and its metrics (tests that register their own)."""
    for m in [m for m in METRICS.values() if m.task == name]:
        METRICS.pop(m.name)
    TASKS.unregister(name)


def resolve_tasks(spec: Optional[str]) -> list[Task]:
    """``--task``: a comma list of task names (default ``ppl``)."""
    names = [p.strip() for p in (spec or "ppl").split(",")]
    if not all(names):
        raise UsageError(f"--task must be a comma-separated list of tasks, got {spec!r}; tasks: {', '.join(TASKS)}")
    if len(set(names)) != len(names):
        raise UsageError(f"--task lists a task twice: {spec}")
    return [TASKS.get(n) for n in names]


def metric(name: str) -> Metric:
    if name not in METRICS:
        raise UsageError(unknown_name_message("metric", name, list(METRICS) + ["ratio"]))
    return METRICS[name]


def task_options(tasks: list[Task], given: dict) -> dict:
    """Each task's options: its defaults, overridden by the given ones (None = not given). An option that none
    of the tasks takes is an error, so a setting is never silently ignored."""
    given = {k: v for k, v in given.items() if v is not None}
    known = {k for t in tasks for k in t.options}
    for k in given:
        if k not in known:
            takes = [n for n in TASKS if k in TASKS.get(n).options]
            raise UsageError(f"--{k.replace('_', '-')} is an option of the task(s) {', '.join(takes) or 'none'}, "
                             f"not of {', '.join(t.name for t in tasks)}")
    return {t.name: {k: given.get(k, d) for k, d in t.options.items()} for t in tasks}


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95% normal interval over independent trials (per-trial accuracies)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, m, m
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = 1.959964 * sd / math.sqrt(n)
    return m, max(0.0, m - half), min(1.0, m + half)


def parse_floats(spec: Any, what: str, lo: float, hi: float) -> list[float]:
    """A comma list (or list) of numbers in [lo, hi], without duplicates."""
    parts = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"--{what} must be comma-separated numbers, got {spec!r}")
    if not vals or any(not lo <= v <= hi for v in vals) or len(set(vals)) != len(vals):
        raise UsageError(f"--{what} must be distinct numbers in [{lo:g}, {hi:g}], got {spec!r}")
    return vals


from . import copying, passkey, ppl  # noqa: E402,F401  (the built-in tasks register themselves)
