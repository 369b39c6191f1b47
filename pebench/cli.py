"""The command line: parse, call one library function per step (``plan``, ``sweep``, ``train``, ``evaluate``,
``report``), print (``console``). Nothing here decides anything a test would want to check."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from . import console
from .console import OneLineErrors, handle_errors
from .cli_options import (AttnOpt, CompileOpt, DataOpt, DeviceOpt, EmitSbatchOpt, GroupPeOpt, LauncherOpt,
                          LauncherOptOpt, LengthsOpt, MaxTokensOpt, NeedlesOpt, OverlayOpt, PrecisionOpt, ResultsOpt,
                          SeedOpt, SeedsOpt, SplitOpt, StepsOpt, TaskOptOpt, TextFieldOpt, TrialsOpt)
from .cli_options import config_flags as _flags
from .cli_more import register as register_more
from .errors import UsageError

app = typer.Typer(cls=OneLineErrors, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Benchmark positional encodings for length extrapolation of tiny decoder LMs.")


@app.callback()
def main_callback(debug: bool = typer.Option(False, "--debug", help="show tracebacks (anywhere on the line)")):
    """--debug is taken off the line before parsing (OneLineErrors); declared here for --help."""


def _notes(notes: list[str]) -> None:
    for n in notes:
        console.warn(f"note: {n}")


@app.command()
@handle_errors
def train(
    pe: str = typer.Option("rope", "--pe", help="positional encoding, or a comma list"),
    config: str = typer.Option("tiny", "--config", help="tiny | small | PATH.yaml"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = StepsOpt,
    seed: Optional[int] = SeedOpt,
    seeds: Optional[str] = SeedsOpt,
    data: Optional[str] = DataOpt,
    text_field: Optional[str] = TextFieldOpt,
    device: str = DeviceOpt,
    name: Optional[str] = typer.Option(None, "--name", help="run name (default: PE-CONFIG-sSEED)"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace a finished run"),
    init_from: Optional[str] = typer.Option(None, "--init-from", help="fine-tune or continue a finished run"),
    context: Optional[str] = typer.Option(None, "--context", help="with --init-from: N or Kx"),
    rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling", help="with --init-from: scaling to bake in"),
    rope_factor: Optional[float] = typer.Option(None, "--rope-factor"),
    compile_: Optional[bool] = CompileOpt,
    precision: Optional[str] = PrecisionOpt,
    needles: Optional[float] = NeedlesOpt,
    results: Path = ResultsOpt,
):
    """Train one model per scheme and seed (or continue a finished run with --init-from)."""
    from . import plan
    from .pe import resolve_schemes
    from .results import ResultsDir

    rd = ResultsDir(results)
    if init_from is not None:
        p = plan.continuation_plan(rd, plan.Continuation(init_from, pe, steps, context, rope_scaling, rope_factor,
                                                         tuple(overlay or ()), needles, compile_, name))
        console.train_with_progress(p.cfg, rd, p.name, device=device, resume=resume, overwrite=overwrite,
                                    init_from=init_from, parent_meta=p.meta)
        return
    if context or rope_scaling or rope_factor:
        raise UsageError("--context, --rope-scaling and --rope-factor need --init-from RUN")
    flags = _flags(config, overlay, steps, data, text_field, compile_, needles, precision=precision)
    base, notes = plan.resolve_config(flags)
    runs = plan.plan_runs(base, resolve_schemes(pe), plan.parse_seeds(seed, seeds, base.train.seed))
    if name and len(runs) > 1:
        raise UsageError("--name names one run; omit it when training several schemes or seeds")
    for run_name, cfg in runs:
        console.train_with_progress(cfg, rd, name or run_name, device=device, resume=resume, overwrite=overwrite)
    _notes(notes)


@app.command("eval")
@handle_errors
def eval_cmd(
    run: Optional[List[str]] = typer.Option(None, "--run", help="run name (repeatable; default: every run)"),
    lengths: Optional[str] = LengthsOpt,
    max_tokens: Optional[int] = MaxTokensOpt,
    protocol: str = typer.Option("nonoverlap", "--protocol", help="nonoverlap | sliding | fixed"),
    stride: Optional[int] = typer.Option(None, "--stride", help="sliding: tokens scored per window"),
    targets: Optional[int] = typer.Option(None, "--targets", help="fixed: number of target tokens"),
    rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling", help="variants (pebench list), or all"),
    rope_factor: Optional[float] = typer.Option(None, "--rope-factor", help="fix the factor (default L/context)"),
    split: str = SplitOpt,
    logit_scale: Optional[str] = typer.Option(None, "--logit-scale", help="none | logn | drope"),
    task: str = typer.Option("ppl", "--task", help="comma list of tasks (pebench list shows them)"),
    trials: Optional[int] = TrialsOpt,
    task_opt: Optional[List[str]] = TaskOptOpt,
    device: str = DeviceOpt,
    attention: str = AttnOpt,
    results: Path = ResultsOpt,
    hf: Optional[str] = typer.Option(None, "--hf", help="a Hugging Face causal LM (folder or Hub id) instead of runs"),
    context: Optional[int] = typer.Option(None, "--context", help="--hf: its context (default: from its config)"),
    dtype: str = typer.Option("float32", "--dtype", help="--hf: float32 | bfloat16 | float16"),
    revision: Optional[str] = typer.Option(None, "--revision", help="--hf: a Hub revision"),
    data: Optional[str] = typer.Option(None, "--data", help="--hf: corpus to evaluate on (default sotu)"),
):
    """Evaluate runs (or an outside model, --hf) at several lengths; one JSON record per (run, task, variant,
    length)."""
    from .plan import eval_request, outside_eval
    from .progress import for_stream
    from .results import ResultsDir
    from .scoring import Protocol
    from .sweep import evaluate_runs

    req = eval_request(None if hf else lengths, Protocol(protocol, stride, targets), None if hf else rope_scaling,
                       task, task_opt, trials, rope_factor=rope_factor, max_tokens=max_tokens, split=split,
                       logit_scale=logit_scale, device=device, backend=attention)
    rd = ResultsDir(results)
    if hf:
        rd.ensure_writable()
        outside_eval(rd, hf, lengths, rope_scaling, req, context, dtype, revision, data, console.echo_record,
                     for_stream())
        return
    names = run or rd.runs_in("finished")
    if not names:
        raise UsageError(f"no finished runs to evaluate in {rd.runs}; train one first (pebench train)")
    rd.ensure_writable()
    if evaluate_runs(rd, names, req, bool(run), lambda m: console.warn(f"error: {m}"), console.echo_record,
                     for_stream()):
        raise typer.Exit(1)


@app.command()
@handle_errors
def report(
    format: str = typer.Option("table", "--format", help="table | md | csv | latex | json"),
    metric: str = typer.Option("ppl", "--metric", help="a metric of a task, or ratio (pebench list shows them)"),
    protocol: Optional[str] = typer.Option(None, "--protocol", help="e.g. nonoverlap, sliding-s64, fixed-k256"),
    pe: Optional[str] = typer.Option(None, "--pe", help="comma list of schemes or row labels"),
    compare: Optional[List[Path]] = typer.Option(None, "--compare", help="two result folders: A then B"),
    html: bool = typer.Option(False, "--html", help="also write report.html: one self-contained page"),
    split: str = SplitOpt,
    results: Path = ResultsOpt,
):
    """Tables and plots from every record; writes report.md/.csv/.tex/.json and PNG plots."""
    from . import report as rp
    from .parsing import parse_list
    from .results import ResultsDir

    fmt, schemes = rp.REPORT_FORMATS.get(format), parse_list(pe, "--pe")
    if compare:
        if len(compare) != 2:
            raise UsageError("--compare takes exactly two result folders: --compare A --compare B")
        a, b = (rp.build_table(console.records_frame(ResultsDir(d)), metric, protocol, schemes, split) for d in compare)
        console.echo(rp.compare_tables(a, b).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return
    rd = ResultsDir(results)
    df = console.records_frame(rd)
    for r in rd.runs_in("failed"):
        console.warn(f"note: run {r!r} failed during training and is left out")
    t = rp.build_table(df, metric, protocol, schemes, split)
    rd.ensure_writable()
    paths = rp.write_reports(rd, t, df, schemes)
    if html:
        from .html import write_html

        paths.append(write_html(rd.root))
    console.show(fmt(t))
    console.warn("wrote " + ", ".join(str(p) for p in paths))


@app.command()
@handle_errors
def run(
    pe: Optional[str] = typer.Option(None, "--pe", help="default: the suite's (classic), or modern, all, a list"),
    suite: Optional[str] = typer.Option(None, "--suite", help="default (the README's main job) | context"),
    config: Optional[str] = typer.Option(None, "--config", help="default: the suite's"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = StepsOpt,
    seeds: Optional[str] = SeedsOpt,
    data: Optional[str] = DataOpt,
    text_field: Optional[str] = TextFieldOpt,
    lengths: Optional[str] = LengthsOpt,
    max_tokens: Optional[int] = MaxTokensOpt,
    task: Optional[str] = typer.Option(None, "--task", help="evaluation tasks (default: the suite's)"),
    trials: Optional[int] = TrialsOpt,
    task_opt: Optional[List[str]] = TaskOptOpt,
    needles: Optional[float] = NeedlesOpt,
    rope_scaling: str = typer.Option("all", "--rope-scaling", help="variants of schemes that have them ('': none)"),
    device: str = DeviceOpt,
    devices: Optional[str] = typer.Option(None, "--devices", help="jobs: local (default) | auto | 0,1,2 | cpu:N"),
    launcher: Optional[str] = LauncherOpt,
    launcher_opt: Optional[List[str]] = LauncherOptOpt,
    emit_sbatch: Optional[Path] = EmitSbatchOpt,
    overwrite: bool = typer.Option(False, "--overwrite"),
    compile_: Optional[bool] = CompileOpt,
    precision: Optional[str] = PrecisionOpt,
    final: bool = typer.Option(False, "--final", help="evaluate and report on the test split"),
    results: Optional[Path] = typer.Option(None, "--results", help="results folder (default: the suite's)"),
):
    """Train, evaluate and report in one go (resumes what was interrupted, skips what is finished)."""
    from . import launch, profile
    from .plan import suite_plan
    from .progress import for_stream
    from .report import suite_report
    from .results import ResultsDir

    clock = profile.Clock()
    sp = suite_plan(suite, pe, _flags(config, overlay, steps, data, text_field, compile_, needles, None, precision),
                    seeds, results, dict(lengths=lengths, max_tokens=max_tokens, task=task, trials=trials,
                    task_opts=task_opt, rope_scaling=rope_scaling, overwrite=overwrite, device=device), final, devices)
    sp.launch = launch.launch_plan(launcher, launcher_opt, emit_sbatch, sp.config, devices)
    rd = ResultsDir(sp.results).ensure_writable()
    clock.measure_peak(sp.request.device, sp.runs)
    clock.lap("setup")
    if launch.run_jobs(rd, sp, overwrite, console, for_stream(), sys.stdout.isatty()):
        raise typer.Exit(1)
    if sp.launch and sp.launch.emit:
        return
    clock.lap("jobs")
    t, context_md, paths = suite_report(rd, console.records_frame(rd), [n for n, _ in sp.runs], sp.request)
    console.print_table(t)
    console.echo(context_md or "")
    prof = profile.finish(rd, sp.runs, clock, sp.devices, sp.request.device)
    console.echo("wrote " + ", ".join(str(p) for p in paths + [rd.root / "profile.md"]) + "\n" + profile.summary(prof))
    _notes(sp.notes)


@app.command()
@handle_errors
def tune(
    pe: str = GroupPeOpt,
    lr: str = typer.Option("1e-3,3e-3,1e-2", "--lr", help="comma list of learning rates"),
    option: Optional[List[str]] = typer.Option(None, "--option", help="a scheme option to tune, NAME=V1,V2"),
    config: str = typer.Option("tiny", "--config"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = StepsOpt,
    seed: Optional[int] = SeedOpt,
    data: Optional[str] = DataOpt,
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
):
    """Per-scheme learning rate (and options) by 1x validation loss; writes RESULTS/tune/tuned.yaml for --overlay."""
    import math

    from .parsing import parse_list
    from .pe import resolve_schemes
    from .plan import resolve_config
    from .results import ResultsDir
    from .tune import parse_option_grid
    from .tune import tune as run_tune

    lrs = parse_list(lr, "--lr", float, lo=1e-12)
    grid = parse_option_grid(option or [])
    base, notes = resolve_config(_flags(config, overlay, steps, data, seed=seed))

    def line(scheme, x, opts, loss):
        label = "".join(f" {k}={v}" for k, v in opts)
        console.echo(f"{scheme:<11} lr {x:<8g}{label} " + ("diverged" if loss is None else f"ppl 1x {math.exp(loss):.3f}"))

    res = run_tune(base, resolve_schemes(pe), lrs, ResultsDir(results), device, on_result=line, options=grid)
    console.echo(res.table.read_text())
    console.echo(f"wrote {res.overlay} (use: pebench run --overlay {res.overlay}) and {res.table}")
    _notes(notes)


@app.command()
@handle_errors
def analyze(
    run: Optional[str] = typer.Option(None, "--run", help="comma list of runs (default: every finished run)"),
    lengths: Optional[str] = LengthsOpt,
    tokens: int = typer.Option(8192, "--tokens", help="validation tokens analysed per length"),
    window_k: float = typer.Option(4.605, "--window-k", help="window: distance where a head's bias falls k nats"),
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
):
    """Why schemes break: attention distance, entropy and far-key share per head; encodings' spectra, biases and
    RoPE's decay bound. Writes RESULTS/analysis/ (markdown, JSON, PNGs)."""
    from .analysis import AnalyzeOptions
    from .analysis import analyze as run_analyze
    from .evaluate import parse_lengths
    from .parsing import parse_list
    from .results import ResultsDir

    if tokens < 2 or not window_k > 0:
        raise UsageError(f"--tokens must be >= 2 and --window-k > 0, got {tokens} and {window_k}")
    rd = ResultsDir(results)
    data = run_analyze(rd, parse_list(run, "--run"), AnalyzeOptions(parse_lengths(lengths), tokens, window_k, device),
                       on_run=lambda a: console.echo(f"analysed {a['run']}"))
    console.echo(console.analysis_table(data["drift"]))
    console.echo(f"wrote {rd.root / 'analysis'}/analysis.md, analysis.json and plots")


@app.command()
@handle_errors
def bench(
    config: str = typer.Option("tiny", "--config"),
    pe: str = GroupPeOpt,
    multiples: str = typer.Option("1,4,16", "--multiples", help="evaluation lengths as multiples of the context"),
    repeats: int = typer.Option(3, "--repeats", help="timed repeats after warm-up (median reported)"),
    device: str = DeviceOpt,
    compile_: bool = typer.Option(True, "--compile/--no-compile", help="also measure torch.compile training"),
    reference: bool = typer.Option(True, "--reference/--no-reference", help="also measure the eager reference"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="also time x-transformers if installed"),
    results: Path = ResultsOpt,
):
    """Training and evaluation tokens/s, peak memory and MFU: fast path vs eager reference."""
    from . import bench as bm
    from .config import load_config
    from .device import resolve_device
    from .parsing import parse_list
    from .pe import resolve_schemes
    from .results import ResultsDir

    mults = parse_list(multiples, "--multiples", int, lo=1)
    if repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {repeats}")
    rd = ResultsDir(results)
    rd.ensure_writable()
    cfg, schemes, dev = load_config(config), resolve_schemes(pe), str(resolve_device(device))
    rows, peak = bm.run_bench(cfg, schemes, mults, dev, repeats, compile_, reference, on_row=console.bench_row,
                              baseline=baseline)
    console.echo(bm.write_bench(rd.root, rows, peak, dev, bm.floor_markdown(cfg, schemes, peak, rd.root)))
    console.echo(f"wrote {rd.root / 'bench.md'}, {rd.root / 'bench.csv'}")


@app.command("list")
@handle_errors
def list_cmd(results: Path = ResultsOpt):
    """Schemes, RoPE scalings, tasks, corpora, configs and the runs in the results folder."""
    from .results import ResultsDir

    for line in console.list_text(ResultsDir(results)):
        console.echo(line)


register_more(app)  # check, docs, pack, compare and the hidden job


def main() -> None:
    from .device import tune_cpu_allocator  # freed tensor memory stays in the process (docs/speed.md)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tune_cpu_allocator()
    app()
