"""`pebench analyze`: why a scheme breaks, measured on finished runs.

For each run: attention statistics by layer and head at each length (``attention``), the scheme's own encoding
read through its generic hooks (``encodings``); across runs: a drift ranking and which statistic tracks the
perplexity ratio (``summary``); ``run`` does it and writes ``RESULTS/analysis/``: analysis.md (numbers and sentences
built from them), analysis.json (all data), and PNGs (``plots``)."""

from .run import WINDOW_K, AnalyzeOptions, analyze, analyze_run

__all__ = ["WINDOW_K", "AnalyzeOptions", "analyze", "analyze_run"]
