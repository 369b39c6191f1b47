"""`pebench analyze` on finished runs: each run's attention statistics and encoding at each length, the drift
ranking across runs, and the files under ``RESULTS/analysis/`` (markdown, JSON, PNGs)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Optional

import torch

from ..results import ResultsDir, guard_target
from ..util.errors import PebenchError, UsageError
from ..util.fsutil import atomic_write_text
from . import plots, summary
from .attention import attention_stats, windows_of
from .encodings import (
    bias_by_distance,
    effective_window,
    learned_vs_reference,
    relative_vector_norms,
    rope_bound_curves,
    table_spectrum,
)
from .options import AnalyzeOptions


def ppl_by_length(results: ResultsDir, run: str, variant: str = "none") -> dict:
    """Validation perplexity of the run's own records (nonoverlap, the variant analysed: by default no RoPE
    scaling), by length."""
    out = {}
    for rec in results.iter_records([]):
        if (
            rec["run"] == run
            and rec["task"] == "ppl"
            and rec["protocol"] == "nonoverlap"
            and rec["variant"] == variant
            and rec.get("split", "validation") == "validation"
            and rec["status"] == "ok"
        ):
            out[str(rec["length"])] = rec["metrics"]["ppl"]
    return out


def _encoding(pe, context: int, longest: int, k: float) -> dict:
    out: dict = {}
    table = learned_vs_reference(pe, context)
    if table is not None:
        out["table"] = table
    bias = bias_by_distance(pe, longest)
    if bias is not None:
        out["bias"] = {"bias": bias.tolist(), "windows": effective_window(bias, k), "context": context}
    norms = [relative_vector_norms(pe, layer) for layer in range(pe.ctx.n_layers)]
    if norms[0] is not None:
        out["relative"] = {"key": [n["key"] for n in norms], "value": [n["value"] for n in norms]}
    return out


def _share(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def analyze_run(results: ResultsDir, run: str, opts: AnalyzeOptions) -> dict:
    """Attention statistics at each length and the encoding's own numbers for one finished run."""
    from ..data import prepare_corpus
    from ..eval.evaluate import eval_lengths, variant_label
    from ..model.checkpoint import load_run_model
    from ..model.device import resolve_device
    from ..model.logit_scales import check_logit_scale

    dev = resolve_device(opts.device)
    cfg, meta, model = load_run_model(results, run, dev)
    if opts.logit_scale is not None:
        check_logit_scale(opts.logit_scale)  # one line naming the valid ones
        model.logit_scale = opts.logit_scale  # the attention analysed is the one eval --logit-scale scores
    T = cfg.model.context
    lengths = sorted(set(eval_lengths(cfg, opts.lengths)) | {T})
    stream = prepare_corpus(cfg.train.data, results.cache, cfg.train.text_field).tokens("validation")
    if len(stream) < max(lengths):
        raise PebenchError(f"the validation split has {len(stream)} tokens, fewer than one window of {max(lengths)}")
    limit = model.pe.max_positions()
    stats = {}
    for L in lengths:
        if limit is not None and L > limit:
            stats[str(L)] = None  # undefined, as in the evaluation
            continue
        win = windows_of(stream, L, opts.tokens).to(dev)
        stats[str(L)] = attention_stats(model, win, far=T, batch=max(1, cfg.eval.batch_tokens // L))
    variant, label = variant_label(cfg, model.pe, meta, opts.logit_scale)
    return {
        "run": run,
        "scheme": cfg.model.pe,
        "label": label,
        "logit_scale": model.logit_scale,
        "context": T,
        "lengths": lengths,
        "head_dim": cfg.model.d_model // cfg.model.n_heads,
        "rope_base": model.pe.describe(T).get("base"),  # the scheme's rotary base; None without rotation
        "stats": stats,
        "ppl": ppl_by_length(results, run, variant),
        "encoding": _encoding(model.pe, T, max(lengths), opts.window_k),
    }


def _reference_tables(context: int, d_model: int) -> tuple[dict, float]:
    from ..model.pe.sinusoidal import sinusoidal_table

    sinus = sinusoidal_table(torch.arange(context), d_model)
    gen = torch.Generator().manual_seed(0)
    noise = table_spectrum(torch.randn(context, d_model, generator=gen, dtype=torch.float64))["concentration"]
    return {"spectrum": table_spectrum(sinus), "label": "sinusoidal"}, noise


def analyze(
    results: ResultsDir,
    runs: Optional[list[str]] = None,
    opts: Optional[AnalyzeOptions] = None,
    on_run: Callable[[dict], None] = lambda a: None,
) -> dict:
    """Analyse the runs (default: every finished run) and write the folder of the options' ``out`` (default
    RESULTS/analysis/; never a committed result set). Returns the data."""
    opts = opts or AnalyzeOptions()
    finished = results.runs_in("finished")
    runs = runs or finished
    if not runs:
        raise PebenchError(f"no finished runs in {results.root}; train some first (pebench run)")
    for r in runs:
        if r not in results.run_names():
            from ..util.registry import unknown_name_message

            raise UsageError(unknown_name_message("run", r, results.run_names()))
    out_dir = guard_target(opts.out or results.root / "analysis", "--out")
    out_dir.mkdir(parents=True, exist_ok=True)
    analyses = []
    for r in runs:
        analyses.append(analyze_run(results, r, opts))
        on_run(analyses[-1])
    data = {"runs": analyses, "window_k": opts.window_k, "tokens": opts.tokens}
    _global(data, analyses)
    md = _markdown(data)
    _plots(data, out_dir)
    atomic_write_text(out_dir / "analysis.json", json.dumps(_rounded(data)) + "\n")
    atomic_write_text(out_dir / "analysis.md", md)
    data["markdown"] = md
    return data


def _rounded(x, digits: int = 5):
    """Floats to ``digits`` significant digits (the JSON holds measurements, not bits)."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v, digits) for v in x]
    return x


def _global(data: dict, analyses: list[dict]) -> None:
    a0 = next((a for a in analyses if a["rope_base"] is not None), analyses[0])  # a rotary run, if any
    T, longest = a0["context"], max(max(a["lengths"]) for a in analyses)
    factor = longest / T
    curves = rope_bound_curves(a0["head_dim"], a0["rope_base"] or 10000.0, T, factor, torch.arange(longest + 1))
    data["rope_bound"] = {"context": T, "longest": longest, "factor": factor, "curves": curves}
    tables = [a for a in analyses if "table" in a["encoding"]]
    if tables:
        d_model = len(tables[0]["encoding"]["table"]["spectrum"]["dominant"])
        ref, noise = _reference_tables(T, d_model)
        data["table_reference"] = {**ref, "noise_concentration": noise}
    data["drift"] = summary.drift_table(analyses).to_dict("records")
    data["predictors"] = summary.predictors(analyses)


def _markdown(data: dict) -> str:
    analyses, k = data["runs"], data["window_k"]
    lines = [
        "# Why schemes break: attention and encoding analysis",
        "",
        f"Written by `pebench analyze` from {len(analyses)} runs; attention statistics over the first "
        f"{data['tokens']} validation tokens at each length (mean over layers and heads).",
        "",
        "## Attention drift from 1x to the longest length",
        "",
    ]
    drift = data["drift"]
    if drift:
        lines += [
            "| rank | run | length | entropy 1x | entropy long | mean abs entropy change | share beyond context "
            "| mean distance 1x | mean distance long | sink mass 1x | sink mass long | ppl ratio |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in drift:
            ratio = f"{r['ppl_ratio']:.2f}" if summary.has_ratio(r) else "-"
            lines.append(
                f"| {r['rank']} | {r['run']} | {r['length']} | {r['entropy_1x']:.2f} | {r['entropy_long']:.2f} "
                f"| {r['entropy_drift']:.2f} | {r['far_share']:.1%} | {r['distance_1x']:.1f} "
                f"| {r['distance_long']:.1f} | {_share(r['sink_1x'])} | {_share(r['sink_long'])} | {ratio} |"
            )
        context = {a["run"]: a["context"] for a in analyses}
        lines += [""] + [f"- {summary.attention_sentence(r, context[r['run']])}" for r in drift]
        lines += [f"- {s}" for s in map(summary.undefined_sentence, analyses) if s]
        lines += ["", summary.predictor_sentence(data["predictors"]), ""]
    lines += ["## The encodings themselves", ""]
    rb = data["rope_bound"]
    lines.append("- " + summary.rope_sentence(rb["curves"], rb["context"], rb["longest"]))
    ref = data.get("table_reference")
    for a in analyses:
        enc = a["encoding"]
        if "table" in enc and ref:
            lines.append(
                "- "
                + summary.table_sentence(
                    a["run"],
                    enc["table"]["spectrum"]["concentration"],
                    ref["spectrum"]["concentration"],
                    ref["noise_concentration"],
                )
            )
        if "bias" in enc:
            lines.append(
                "- " + summary.window_sentence(a["run"], enc["bias"]["windows"], k, a["context"], max(a["lengths"]))
            )
        if "relative" in enc:
            lines.append("- " + summary.relative_sentence(a["run"], enc["relative"]))
    lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in plot_names(data)), ""]
    return "\n".join(lines)


def plot_names(data: dict) -> list[str]:
    names = [f"attention_{a['run']}.png" for a in data["runs"] if _plottable(a)]
    names.append("rope_bound.png")
    if any("table" in a["encoding"] for a in data["runs"]):
        names.append("tables.png")
    if any("bias" in a["encoding"] for a in data["runs"]):
        names.append("biases.png")
    if any("relative" in a["encoding"] for a in data["runs"]):
        names.append("relative.png")
    from ..util.fsutil import figure_suffix

    return [n.removesuffix(".png") + figure_suffix() for n in names]  # as written: png, pdf or svg


def _plottable(a: dict) -> bool:
    return sum(1 for v in a["stats"].values() if v is not None) >= 1


def _plots(data: dict, out: Path) -> None:
    runs = data["runs"]
    for a in runs:
        if _plottable(a):
            plots.plot_attention(a, out / f"attention_{a['run']}.png")
    rb = data["rope_bound"]
    plots.plot_rope_bound(rb["curves"], rb["context"], rb["factor"], out / "rope_bound.png")
    tables = {a["run"]: {**a["encoding"]["table"], "label": a["label"]} for a in runs if "table" in a["encoding"]}
    if tables:
        plots.plot_tables(tables, data["table_reference"], out / "tables.png")
    biases = {a["run"]: a["encoding"]["bias"] for a in runs if "bias" in a["encoding"]}
    if biases:
        plots.plot_biases(biases, data["window_k"], out / "biases.png")
    rel = {a["run"]: a["encoding"]["relative"] for a in runs if "relative" in a["encoding"]}
    if rel:
        plots.plot_relative_norms(rel, out / "relative.png")
