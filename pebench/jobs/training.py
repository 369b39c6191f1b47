"""Training as a command or a worker does it: ``train_runs`` (every scheme x seed a config and its flags resolve to,
or one run continued from a finished one), each run through ``train_run``: alone, or under torchrun (every rank
trains, rank 0 alone reports), its progress and its outcome told through a ``Reporter``."""

from __future__ import annotations

from typing import Optional

from ..config import Config, ConfigFlags
from ..results import ResultsDir, check_run_name
from ..util.errors import UsageError
from ..util.progress import Reporter
from .distributed import distributed


def train_run(cfg: Config, results: ResultsDir, name: str, reporter: Reporter, device: str = "auto", **kw):
    """Train ``name`` (``kw``: resume, overwrite, init_from, parent_meta, on_ready: fields of ``train.TrainJob``)."""
    from ..train import TrainJob, train

    with distributed(device) as d:
        rep = reporter if d.is_main else Reporter.quiet()
        done = results.status(name).get("step", 0) if kw.get("resume") else 0
        rep.progress.start(
            name,
            cfg.train.steps,
            f"{cfg.train.steps:,} steps of {cfg.train.batch_size} x {cfg.model.context} tokens",
            "steps",
            initial=done or 0,
        )

        def on_step(step, total, loss, tps):
            rep.progress.update(step, f"loss {loss:.3f}, " + (f"{tps:,.0f} tok/s" if tps > 0 else "tok/s measuring"))

        try:
            kw.update(progress=on_step, rank=d.rank, world=d.world, process_group=d.group)
            res = train(TrainJob(cfg, results, name, d.device, **kw))
        finally:
            rep.progress.finish()
    if res.skipped:
        rep.echo(f"{name}: already finished, skipped")
    else:
        rep.echo(f"{name}: trained {res.steps} steps in {res.wall_s:.0f}s, final loss {res.final_loss:.4f}")
    return res


def train_runs(
    rd: ResultsDir,
    flags: ConfigFlags,
    seeds: Optional[str],
    reporter: Reporter,
    name: Optional[str] = None,
    continued=None,
    device: str = "auto",
    **kw,
) -> None:
    """``pebench train``: one run per scheme (``--pe``, default rope) and seed (``seeds``, a comma list, else
    the flags' or config's seed; ``name`` for a single run), or, with ``continued`` (a ``plan.Continuation``), one
    run initialised from a finished one. ``kw``: resume, overwrite. Notes on what a flag changed beyond itself go
    to ``reporter.warn`` before anything trains."""
    from . import plan

    if name is not None:
        check_run_name(name)  # '' is no name, not the default one
    if continued is not None:
        p = plan.continuation_plan(rd, continued)
        train_run(p.cfg, rd, p.name, reporter, device, init_from=continued.parent, parent_meta=p.meta, **kw)
        return
    base, notes = plan.resolve_flags(flags)
    notes += plan.cpu_bf16_notes("local", device, {base.train.precision})
    pending = [f"note: {n}" for n in notes]  # told once, when the first run has passed its checks

    def ready() -> None:
        while pending:
            reporter.warn(pending.pop(0))

    pe = flags.pe if flags.pe is not None else ([] if flags.layers else ["rope"])
    runs = plan.plan_runs(base, plan.resolve_pe(pe, base), plan.parse_seeds(None, seeds, base.train.seed))
    if name and len(runs) > 1:
        raise UsageError("--name names one run; omit it when training several schemes or seeds")
    for run_name, cfg in runs:
        if kw.get("resume") and rd.state(name or run_name) == "missing":
            reporter.warn(f"note: --resume: run {name or run_name!r} does not exist yet; training it from scratch")
        train_run(cfg, rd, name or run_name, reporter, device, on_ready=ready, **kw)
