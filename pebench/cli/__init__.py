"""The command line: one module per command family, each command parsing its options, calling one library
function per step (``jobs.plan``, ``jobs.sweep``, ``train``, ``evaluate``, ``findings.report``) and printing
(``console``). Nothing here decides anything a test would want to check; nothing below imports this package."""

from __future__ import annotations

import os

from . import evaluation, findings, job, outside, reference, training  # noqa: F401  (commands; the docs' reference)
from .app import app, one_line_helps

__all__ = ["app", "main"]
one_line_helps(app)


def main() -> None:
    from ..model.device import tune_cpu_allocator  # freed tensor memory stays in the process (docs/manual/speed.md)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tune_cpu_allocator()
    app()
