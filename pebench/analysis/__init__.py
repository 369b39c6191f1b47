"""`pebench analyze`: why a scheme breaks, measured on finished runs.

For each run: attention statistics by layer and head at each length (``attention``), the scheme's own encoding
read through its generic hooks (``encodings``); across runs: a drift ranking and which statistic tracks the
perplexity ratio (``summary``); ``run`` does it and writes ``RESULTS/analysis/``: analysis.md (numbers and sentences
built from them), analysis.json (all data), and PNGs (``plots``)."""

from .options import WINDOW_K, AnalyzeOptions

__all__ = ["WINDOW_K", "AnalyzeOptions", "analyze", "analyze_run"]


def __getattr__(name: str):
    """``analyze`` and ``analyze_run`` are imported when first used, so the options stay light to import."""
    if name in ("analyze", "analyze_run"):
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
