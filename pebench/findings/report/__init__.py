"""Reports: records -> pandas -> tables (rich, markdown, CSV, LaTeX, JSON) and plots. Reads records, and for the
learning curves beside the main report every run's training log (``ResultsDir.learning_curves``).

The package by job: ``frame`` (records read into one frame), ``table`` (the table of one training setup's draws),
``formats`` (every format a report writes; ``REPORT_FORMATS``), ``context`` (the context-use and seed-by-seed
tables), ``files`` (what a report writes, where, and the plots). Its public names are here.
"""

from __future__ import annotations

from ...util.errors import PebenchError
from ...util.stats import mean_ci
from .context import by_seed_markdown, context_markdown, context_metrics, effective_tables
from .files import report_destination, report_suffix, suite_report, task_outputs, write_plots, write_reports
from .formats import REPORT_FORMATS, compare_tables, to_frame, to_json, to_latex, to_markdown, to_rich
from .frame import records_frame, records_frame_noting, stale_version
from .table import Table, build_table, chance_text, default_metric, one_setup, seeds_behind, under_trained

__all__ = [
    "REPORT_FORMATS",
    "PebenchError",
    "Table",
    "build_table",
    "by_seed_markdown",
    "chance_text",
    "compare_tables",
    "context_markdown",
    "context_metrics",
    "default_metric",
    "effective_tables",
    "mean_ci",
    "one_setup",
    "records_frame",
    "records_frame_noting",
    "report_destination",
    "report_suffix",
    "seeds_behind",
    "stale_version",
    "suite_report",
    "task_outputs",
    "to_frame",
    "to_json",
    "to_latex",
    "to_markdown",
    "to_rich",
    "under_trained",
    "write_plots",
    "write_reports",
]
