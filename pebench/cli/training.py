"""Commands that train: ``train`` (one model per scheme and seed, or a continuation), ``run`` (a whole suite:
train, evaluate, report), ``tune`` (a learning-rate grid) and ``list`` (what there is to train and what was)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from ..config import ConfigFlags
from ..eval.flags import EvalFlags
from ..jobs.launch import LaunchFlags
from ..util.errors import UsageError
from . import console
from .app import app, notes_of
from .console import handle_errors
from .flags import option_fields, takes
from .options import (
    DeviceOpt,
    ResultsOpt,
    SeedsOpt,
)

# the placeholders a command's signature holds where cli.flags.takes puts a group's options
NO_FLAGS, NO_EVAL_FLAGS, NO_LAUNCH_FLAGS = ConfigFlags(), EvalFlags(), LaunchFlags()
# tune's grid trains plain models at a rate of its grid: the model options and one rate are not its flags
TUNE_SKIPS = (
    "compile",
    "needles",
    "precision",
    "sinks",
    "ssmax",
    "gate",
    "canon",
    "normaliser",
    "lr",
    "selective",
    "scale_invariant",
)


@app.command()
@handle_errors
@takes(ConfigFlags, "flags")
def train(
    flags: ConfigFlags = NO_FLAGS,  # --pe, --config, --steps, --precision, --sinks, ... (made by cli.flags.takes)
    seeds: Optional[str] = SeedsOpt,
    device: str = DeviceOpt,
    name: Optional[str] = typer.Option(None, "--name", help="run name (default: PE-CONFIG-sSEED)"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace a finished run"),
    init_from: Optional[str] = typer.Option(None, "--init-from", help="fine-tune or continue a finished run"),
    context: Optional[str] = typer.Option(None, "--context", help="with --init-from: N or Kx"),
    rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling", help="with --init-from: scaling to bake in"),
    rope_factor: Optional[float] = typer.Option(
        None, "--rope-factor", help="with --init-from: the factor (default: the new context over the old)"
    ),
    results: Path = ResultsOpt,
):
    """Train one model per scheme and seed (or continue a finished run with --init-from)."""
    from ..jobs.plan import Continuation
    from ..jobs.training import train_runs
    from ..results import ResultsDir
    from ..util.parsing import fields_from

    options = locals()
    console.scaling_notes(rope_scaling)
    if init_from is None and (context or rope_scaling or rope_factor):
        raise UsageError("--context, --rope-scaling and --rope-factor need --init-from RUN")
    if resume and overwrite:
        raise UsageError("--resume continues a run and --overwrite starts it over: give one of them")
    given = {k: getattr(flags, k) for k in ("pe", "steps", "needles", "compile", "overlays")}  # a continuation's own
    continued = None if init_from is None else fields_from(Continuation, {**options, **given}, parent=init_from)
    train_runs(
        ResultsDir(results),
        flags,
        seeds,
        console.reporter(),
        name,
        continued,
        device,
        resume=resume,
        overwrite=overwrite,
    )
    console.next_step("eval", results, "measures the finished runs at 1x to 16x their context")


@app.command()
@handle_errors
@takes(ConfigFlags, "flags", skip=("seed",))
@takes(EvalFlags, "ev", only=("lengths", "max_tokens", "task", "trials", "task_opts", "rope_scaling", "eval_precision"))
@takes(LaunchFlags, "launch")
def run(
    suite: Optional[str] = typer.Option(
        None, "--suite", help="default (the README's main job) | context | patterns | scale"
    ),
    points: Optional[str] = typer.Option(
        None, "--points", help="a suite with scale points (scale): the points to run, e.g. d64,ctx64 (default: all)"
    ),
    flags: ConfigFlags = NO_FLAGS,  # --pe, --config, --steps, --precision, --sinks, ... (made by cli.flags.takes)
    seeds: Optional[str] = SeedsOpt,
    ev: EvalFlags = NO_EVAL_FLAGS,  # --lengths, --task, --rope-scaling, ...
    device: str = DeviceOpt,
    launch: LaunchFlags = NO_LAUNCH_FLAGS,  # --workers, --launcher, --launcher-opt, --emit-sbatch
    devices: Optional[str] = typer.Option(None, "--devices", hidden=True, help="the old name of --workers"),
    overwrite: bool = typer.Option(False, "--overwrite", help="train and evaluate again what is finished"),
    final: bool = typer.Option(False, "--final", help="evaluate and report on the test split"),
    results: Optional[Path] = typer.Option(None, "--results", help="results folder (default: the suite's)"),
):
    """Train, evaluate and report in one go (resumes what was interrupted, skips what is finished)."""
    from ..jobs import profile
    from ..jobs.launch import launch_plan
    from ..jobs.plan import suite_plan
    from ..jobs.runner import run_suite

    if devices is not None:
        raise UsageError(f"--devices is now --workers (--device is the kind: auto | cpu | cuda): --workers {devices}")
    clock = profile.Clock()
    console.scaling_notes(ev.rope_scaling)
    ev = replace(ev, device=device)
    sp = suite_plan(suite, flags, seeds, results, ev, overwrite, final, launch.workers, points)
    lp = launch_plan(launch.launcher, list(launch.launcher_opt), launch.emit_sbatch, sp.config, launch.workers)
    notes_of(sp.notes)  # before the work, not after it
    done = run_suite(sp, lp, clock, console.reporter(), show=sys.stdout.isatty())
    if done.failed:
        raise typer.Exit(1)
    if done.table is not None:
        console.print_table(done.table)
        console.echo((done.context_md or "") + "\n" + done.summary)
        console.next_step("compare", sp.results, "your runs against the committed reference; report --html for a page")
    elif lp and lp.emit:  # nothing ran here: the script is the next step
        then = f"pebench report --results {shlex.quote(str(sp.results))}"
        console.warn(f"next: sbatch {shlex.quote(str(lp.emit))}  (then {then})")


@app.command()
@handle_errors
@takes(ConfigFlags, "flags", skip=TUNE_SKIPS)
def tune(
    lr: str = typer.Option("1e-3,3e-3,1e-2", "--lr", help="comma list of learning rates"),
    option: Optional[List[str]] = typer.Option(None, "--option", help="a scheme option to tune, NAME=V1,V2"),
    point: Optional[str] = typer.Option(
        None,
        "--point",
        help="one point of the scale suite (steps1000, d64, d256s500, ctx512, ...: a name it lacks is refused with "
        "the list): the grid at its shape and schedule (--steps replaces its steps)",
    ),
    flags: ConfigFlags = NO_FLAGS,  # --pe, --config, --overlay, --steps, --data, --seed, --layers (cli.flags.takes)
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
):
    """Per-scheme learning rate (and options) by 1x validation loss; writes RESULTS/tune/tuned.yaml for --overlay."""
    import math

    from ..jobs.plan import at_point, resolve_flags, resolve_pe
    from ..jobs.tune import parse_option_grid, use_overlay
    from ..jobs.tune import tune as run_tune
    from ..results import ResultsDir
    from ..util.parsing import parse_list

    lrs = parse_list(lr, "--lr", float, lo=1e-12)
    grid = parse_option_grid(option or [])
    base, notes = resolve_flags(flags)  # its --lr is the grid, not one rate
    base = at_point(base, point, flags.steps is not None) if point else base
    notes_of(notes)

    def line(scheme, x, opts, loss):
        label = "".join(f" {k}={v}" for k, v in opts)
        console.echo(
            f"{scheme:<11} lr {x:<8g}{label} " + ("diverged" if loss is None else f"ppl 1x {math.exp(loss):.3f}")
        )

    pe = flags.pe if flags.pe is not None else ([] if flags.layers else ["classic"])  # --layers alone: its list only
    schemes = resolve_pe(pe, base)
    res = run_tune(base, schemes, lrs, ResultsDir(results), device, on_result=line, options=grid, point=point)
    console.echo(res.table.read_text())
    console.echo(f"wrote {res.overlay} (use: {use_overlay(res.overlay, point)}) and {res.table}")


@app.command("list")
@handle_errors
def list_cmd(results: Path = ResultsOpt):
    """Schemes, RoPE scalings, tasks, corpora, configs and the runs in the results folder."""
    from ..results import ResultsDir

    for line in _catalog(ResultsDir(results)):
        console.echo(line)


def _model_flags() -> list[tuple[str, str, str]]:
    """(flag, config key, help) of each option that sets a model key (``ConfigFlags``, where it is declared)."""
    return [
        (f.metadata["flag"], f.metadata["key"], f.metadata["help"])
        for f, _ in option_fields(ConfigFlags)
        if f.metadata.get("key", "").startswith("model.")
    ]


def _catalog(results) -> list[str]:
    """`pebench list`: schemes (with their positional parameters at the tiny config), variants, tasks and their
    metrics, corpora, configs and the runs in the results folder."""
    from dataclasses import fields, replace

    from ..config import TrainConfig, builtin_configs, load_config
    from ..data import describe_corpora
    from ..eval.tasks import TASKS, task_names
    from ..model.decoder import DecoderLM
    from ..model.patterns import described, pattern_settings
    from ..model.pe import SCHEMES, all_variants, group_of, load_entry_points, scheme_names
    from ..util.groups import GROUPS

    tiny = load_config("tiny")
    base = DecoderLM(replace(tiny.model, pe="none")).num_params()
    load_entry_points()
    groups = " | ".join([*GROUPS, "all"])  # the groups as registered: a new one is listed by itself
    out = [f"schemes by group (--pe {groups}), with positional parameters at the tiny config:"]
    for n in scheme_names():
        extra = DecoderLM(replace(tiny.model, pe=n)).num_params() - base
        out.append(f"  {group_of(n):<8} {n:<11} {extra:>7,}  {SCHEMES.get(n).description}")
    out.append("layer patterns (--layers NAME[:key=value...], or a list: rope@w32,rope@c32,none,...):")
    out += [
        f"  {n:<14} {text}; settings: {', '.join(f'{k}={v}' for k, v in pattern_settings(n).items()) or 'none'}"
        for n, text in described().items()
    ]
    out.append("model options (train/run flags, on any scheme):")
    flags = _model_flags()
    width = max(len(flag) for flag, _, _ in flags)
    out += [f"  {flag:<{width}} {text or key}" for flag, key, text in flags]
    out.append("training options (config keys, on any scheme; set in a config or an --overlay YAML):")
    out += [f"  train.{f.name:<24} {f.metadata['help']}" for f in fields(TrainConfig) if "help" in f.metadata]
    named_only = [v for v in all_variants() if not any(v in SCHEMES.get(n).variants() for n in SCHEMES.names())]
    out.append(
        "evaluation-time variants (--rope-scaling): "
        + ", ".join(all_variants())
        + (f" ({', '.join(named_only)}: only when named, never under all)" if named_only else "")
    )
    out.append(
        "evaluation tasks (eval --task), their options (--task-opt TASK.NAME=V) and metrics (report "
        "--metric; + higher, - lower is better):"
    )
    for n in task_names():
        t = TASKS.get(n)
        ms = ", ".join(f"{m.name} {'+' if m.higher_is_better else '-'}" for m in t.metrics)
        opts = ", ".join(f"{k}={v}" for k, v in t.options.items()) or "none"
        out.append(f"  {n:<9} {t.description}; {ms}; options: {opts}")
    out.append("corpora:")
    out += [f"  {k:<17} {v}" for k, v in describe_corpora().items()]
    out.append("configs: " + ", ".join(builtin_configs()))
    runs = results.run_names()
    out.append(
        f"runs in {results.runs}:" + ("" if runs else " none" if results.root.is_dir() else " none (no such folder)")
    )
    for r in runs:
        st = results.status(r)
        out.append(f"  {r:<28} {results.shown_state(r)} (step {st.get('step', '?')}/{st.get('steps', '?')})")
    return out
