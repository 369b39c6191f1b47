"""Commands that train: ``train`` (one model per scheme and seed, or a continuation), ``run`` (a whole suite:
train, evaluate, report), ``tune`` (a learning-rate grid) and ``list`` (what there is to train and what was)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UsageError
from . import console
from .app import app, notes_of
from .console import handle_errors
from .options import (CompileOpt, DataOpt, DeviceOpt, EmitSbatchOpt, GroupPeOpt, LauncherOpt, LauncherOptOpt, LengthsOpt,
                      MaxTokensOpt, NeedlesOpt, OverlayOpt, PrecisionOpt, ResultsOpt, SeedOpt, SeedsOpt, StepsOpt,
                      TaskOptOpt, TextFieldOpt, TrialsOpt)


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
    from ..config import ConfigFlags, resolve_config
    from ..jobs import plan
    from ..jobs.training import train_run
    from ..pe import resolve_schemes
    from ..results import ResultsDir

    rd = ResultsDir(results)
    if init_from is not None:
        p = plan.continuation_plan(rd, plan.Continuation(init_from, pe, steps, context, rope_scaling, rope_factor,
                                                         tuple(overlay or ()), needles, compile_, name))
        train_run(p.cfg, rd, p.name, console.reporter(), device=device, resume=resume, overwrite=overwrite,
                  init_from=init_from, parent_meta=p.meta)
        return
    if context or rope_scaling or rope_factor:
        raise UsageError("--context, --rope-scaling and --rope-factor need --init-from RUN")
    flags = ConfigFlags(config=config, overlays=tuple(overlay or ()), steps=steps, data=data, text_field=text_field,
                        compile=compile_, needles=needles, precision=precision)
    base, notes = resolve_config(flags)
    runs = plan.plan_runs(base, resolve_schemes(pe), plan.parse_seeds(seed, seeds, base.train.seed))
    if name and len(runs) > 1:
        raise UsageError("--name names one run; omit it when training several schemes or seeds")
    for run_name, cfg in runs:
        train_run(cfg, rd, name or run_name, console.reporter(), device=device, resume=resume, overwrite=overwrite)
    notes_of(notes)


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
    from ..config import ConfigFlags
    from ..evaluate import EvalFlags
    from ..jobs import launch, profile
    from ..jobs.plan import suite_plan
    from ..findings.report import suite_report
    from ..results import ResultsDir

    clock = profile.Clock()
    flags = ConfigFlags(config=config, overlays=tuple(overlay or ()), steps=steps, data=data, text_field=text_field,
                        compile=compile_, needles=needles, precision=precision)
    ev = EvalFlags(lengths=lengths, max_tokens=max_tokens, task=task, trials=trials, task_opts=tuple(task_opt or ()),
                   rope_scaling=rope_scaling, device=device)
    sp = suite_plan(suite, pe, flags, seeds, results, ev, overwrite, final, devices)
    sp.launch = launch.launch_plan(launcher, launcher_opt, emit_sbatch, sp.config, devices)
    rd = ResultsDir(sp.results).ensure_writable()
    clock.measure_peaks(sp.request.device, sp.runs)
    clock.lap("setup")
    if launch.run_jobs(rd, sp, overwrite, console.reporter(), sys.stdout.isatty()):
        raise typer.Exit(1)
    if sp.launch and sp.launch.emit:
        return
    clock.lap("jobs")
    t, context_md, paths = suite_report(rd, console.load_records(rd), [n for n, _ in sp.runs], sp.request)
    console.print_table(t)
    console.echo(context_md or "")
    prof = profile.finish(rd, sp.runs, clock, sp.devices, sp.request.device)
    console.echo("wrote " + ", ".join(str(p) for p in paths + [rd.root / "profile.md"]) + "\n" + profile.summary(prof))
    notes_of(sp.notes)


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

    from ..parsing import parse_list
    from ..pe import resolve_schemes
    from ..config import ConfigFlags, resolve_config
    from ..results import ResultsDir
    from ..jobs.tune import parse_option_grid
    from ..jobs.tune import tune as run_tune

    lrs = parse_list(lr, "--lr", float, lo=1e-12)
    grid = parse_option_grid(option or [])
    base, notes = resolve_config(ConfigFlags(config=config, overlays=tuple(overlay or ()), steps=steps, data=data,
                                             seed=seed))

    def line(scheme, x, opts, loss):
        label = "".join(f" {k}={v}" for k, v in opts)
        console.echo(f"{scheme:<11} lr {x:<8g}{label} " + ("diverged" if loss is None else f"ppl 1x {math.exp(loss):.3f}"))

    res = run_tune(base, resolve_schemes(pe), lrs, ResultsDir(results), device, on_result=line, options=grid)
    console.echo(res.table.read_text())
    console.echo(f"wrote {res.overlay} (use: pebench run --overlay {res.overlay}) and {res.table}")
    notes_of(notes)


@app.command("list")
@handle_errors
def list_cmd(results: Path = ResultsOpt):
    """Schemes, RoPE scalings, tasks, corpora, configs and the runs in the results folder."""
    from ..results import ResultsDir

    for line in console.list_text(ResultsDir(results)):
        console.echo(line)
