"""Commands that measure trained runs: ``eval`` (tasks at several lengths, or an outside model with --hf),
``analyze`` (why schemes break) and ``bench`` (speed and memory)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from ..analysis.options import AnalyzeOptions
from ..config import ConfigFlags
from ..eval.flags import EvalFlags
from ..util.errors import UsageError
from . import console
from .app import app
from .console import handle_errors
from .flags import takes
from .options import DataOpt, DeviceOpt, FigureFormatOpt, HfOpt, OutOpt, ResultsOpt, RunOpt

# the placeholders where cli.flags.takes puts a group's options
NO_EVAL_FLAGS, NO_FLAGS = EvalFlags(), ConfigFlags()


@app.command("eval")
@handle_errors
@takes(EvalFlags, "ev")
def eval_cmd(
    run: Optional[List[str]] = RunOpt,
    ev: EvalFlags = NO_EVAL_FLAGS,  # --lengths, --protocol, --rope-scaling, --task, ... (made by cli.flags.takes)
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
    hf: Optional[str] = HfOpt,
    context: Optional[str] = typer.Option(None, "--context", help="--hf: its context, N or Kx (default: its config's)"),
    dtype: str = typer.Option("float32", "--dtype", help="--hf: float32 | bfloat16 | float16"),
    revision: Optional[str] = typer.Option(None, "--revision", help="--hf: a Hub revision"),
    data: Optional[str] = DataOpt,
):
    """Evaluate runs (or an outside model, --hf) at several lengths; one JSON record per (run, task, variant,
    length)."""
    from ..jobs.plan import eval_request, outside_eval
    from ..jobs.sweep import evaluate_runs
    from ..results import ResultsDir
    from ..util.parsing import parse_list

    console.scaling_notes(ev.rope_scaling)
    outside = {"variants": []} if hf else {}  # --hf parses its own scalings (NAME:key=value, transformers' names)
    req, rd = eval_request(replace(ev, device=device), **outside), ResultsDir(results)
    if hf and run:
        raise UsageError("--hf evaluates an outside model, --run the runs of a results folder: give one of them")
    if ev.stream is not None and not hf:
        raise UsageError("--stream reads an outside model's windows through its KV cache: it needs --hf")
    if hf:
        rd.ensure_writable()
        outside_eval(rd, hf, ev.rope_scaling, req, context, dtype, revision, data, console.reporter())
        return console.next_step(outside_next(ev.task or "ppl"), results, "its rows beside your runs'")
    names = [n for r in run or [] for n in parse_list(r, "--run")] or rd.existing().runs_in(
        "finished"
    )  # repeat or comma list
    if not names:
        raise UsageError(f"no finished runs to evaluate in {rd.runs}; train one first (pebench train)")
    if evaluate_runs(rd.ensure_writable(), names, req, ev.rope_scaling is not None, console.reporter()):
        raise typer.Exit(1)
    console.next_step("report", results, "the table and plots of every record")


def outside_next(task: str) -> str:
    """The report an outside model's evaluation points to: bits per byte where it measured perplexity (tokenizers
    differ), else its first task's headline metric."""
    from ..eval.tasks import TASKS
    from ..util.parsing import parse_list

    names = parse_list(task, "--task")
    return "report --metric " + ("bpb" if "ppl" in names else TASKS.get(names[0]).headline)


@app.command()
@handle_errors
@takes(EvalFlags, "ev", only=("lengths", "logit_scale"))
def analyze(
    run: Optional[List[str]] = RunOpt,
    ev: EvalFlags = NO_EVAL_FLAGS,  # --lengths, --logit-scale (made by cli.flags.takes)
    tokens: int = typer.Option(AnalyzeOptions.tokens, "--tokens", help="validation tokens analysed per length"),
    window_k: float = typer.Option(
        round(AnalyzeOptions.window_k, 3), "--window-k", help="window: distance where a head's bias falls k nats"
    ),
    figure_format: str = FigureFormatOpt,
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
    out: Optional[Path] = OutOpt,
):
    """Why schemes break: attention distance, entropy, far-key share and sink mass per head; encodings' spectra,
    biases and RoPE's decay bound. Writes RESULTS/analysis/ (markdown, JSON, PNGs), never a committed set."""
    from ..analysis import analyze as run_analyze
    from ..results import ResultsDir, committed_set
    from ..util.fsutil import figure_format as figures
    from ..util.parsing import parse_list

    if tokens < 2 or not window_k > 0:
        raise UsageError(f"--tokens must be >= 2 and --window-k > 0, got {tokens} and {window_k}")
    rd = ResultsDir(results).existing()
    if out is None and committed_set(rd.root / "analysis") is not None:
        out = rd.root / "scratch" / "analysis"
        console.warn(f"note: {rd.root / 'analysis'} is a committed result set; writing {out} (--out to choose)")
    out = out or rd.root / "analysis"
    with figures(figure_format):
        data = run_analyze(
            rd,
            [n for r in run for n in parse_list(r, "--run")] if run else None,
            AnalyzeOptions(ev.lengths, tokens, window_k, device, out, ev.logit_scale),
            on_run=lambda a: console.echo(f"analysed {a['run']}"),
        )
    console.echo(console.analysis_table(data["drift"]))
    console.echo(f"wrote {out}/analysis.md, analysis.json and plots")


@app.command()
@handle_errors
@takes(ConfigFlags, "cf", only=("config", "pe", "precision"))
@takes(EvalFlags, "ev", only=("lengths",))
def bench(
    cf: ConfigFlags = NO_FLAGS,  # --config (default tiny), --pe (default classic), --precision (made by takes)
    ev: EvalFlags = NO_EVAL_FLAGS,  # --lengths (default 1x,4x,16x)
    multiples: Optional[str] = typer.Option(None, "--multiples", hidden=True, help="the old name of --lengths"),
    repeats: int = typer.Option(3, "--repeats", help="timed repeats after warm-up (median reported)"),
    device: str = DeviceOpt,
    compile_: bool = typer.Option(True, "--compile/--no-compile", help="also measure torch.compile training"),
    reference: bool = typer.Option(True, "--reference/--no-reference", help="also measure the eager reference"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="also time x-transformers if installed"),
    estimate: Optional[str] = typer.Option(
        None,
        "--estimate",
        help="CONFIG (name or .yaml): print its parameters, FLOPs, memory and predicted time; "
        "trains and measures nothing",
    ),
    peak_tflops: Optional[float] = typer.Option(
        None, "--peak-tflops", help="with --estimate: the device's peak (default: the presets cpu2, a100, h100)"
    ),
    mfu: Optional[float] = typer.Option(None, "--mfu", help="with --estimate: the utilisation assumed, 0..1"),
    results: Path = ResultsOpt,
):
    """Training and evaluation tokens/s, peak memory and MFU: fast path vs eager reference (or, with --estimate,
    a config's cost on paper)."""
    from ..config import load_config
    from ..model.device import resolve_device
    from ..model.pe import resolve_schemes
    from ..perf import bench as bm
    from ..results import ResultsDir
    from ..util.parsing import resolve_lengths

    if multiples is not None:
        raise UsageError(f"--multiples is now --lengths, in tokens or Kx: --lengths {multiples.replace(',', 'x,')}x")
    if estimate is not None:
        return console.echo(on_paper(estimate, cf, ev.lengths, peak_tflops, mfu))
    if repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {repeats}")
    rd = ResultsDir(results)
    rd.ensure_writable()
    cfg, schemes, dev = (
        load_config(cf.config or "tiny"),
        resolve_schemes(cf.pe or ["classic"]),
        str(resolve_device(device)),
    )
    Ls = resolve_lengths(ev.lengths or ["1x", "4x", "16x"], cfg.model.context)
    rows, peak = bm.run_bench(
        cfg, schemes, Ls, dev, repeats, compile_, reference, on_row=console.bench_row, baseline=baseline
    )
    console.echo(bm.write_bench(rd.root, rows, peak, dev, bm.floor_markdown(cfg, schemes, peak, rd.root)))
    console.echo(f"wrote {rd.root / 'bench.md'}, {rd.root / 'bench.csv'}")


def on_paper(spec: str, cf: ConfigFlags, lengths: Optional[list], peak_tflops, mfu) -> str:
    """``bench --estimate``: the config's scheme (or the one scheme --pe names) costed by ``pebench.perf.estimate``
    at the lengths given (default: the estimate's own), in the training precision given (default: the config's;
    auto is bf16)."""
    from dataclasses import replace

    from ..config import check_precision, load_config
    from ..perf import estimate as es
    from ..util.parsing import resolve_lengths

    cfg = load_config(spec)
    if cf.pe is not None:  # not given: the config's own scheme
        if len(cf.pe) > 1:
            raise UsageError(f"--estimate costs one scheme; --pe names several: {','.join(cf.pe)}")
        cfg = replace(cfg, model=replace(cfg.model, pe=cf.pe[0], layers=[])).validate()
    if mfu is not None and not 0 < mfu <= 1:
        raise UsageError(f"--mfu must be in (0, 1], got {mfu}")
    precision = check_precision(cf.precision or cfg.train.precision, "--precision")
    Ls = resolve_lengths(lengths, cfg.model.context)
    est = es.estimate(cfg, "bf16" if precision == "auto" else precision, Ls)
    return es.estimate_markdown(est, es.custom_preset(peak_tflops, mfu))
