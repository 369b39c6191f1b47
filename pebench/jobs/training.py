"""One run trained as a command or a worker trains it: alone, or under torchrun (every rank trains, rank 0 alone
reports), its progress and its outcome told through a ``Reporter``."""
from __future__ import annotations

from ..config import Config
from ..progress import Reporter
from ..results import ResultsDir
from .distributed import distributed


def train_run(cfg: Config, results: ResultsDir, name: str, reporter: Reporter, device: str = "auto", **kw):
    """Train ``name`` (``kw``: resume, overwrite, init_from, parent_meta, as ``train.train`` takes them)."""
    from ..train import train

    with distributed(device) as d:
        rep = reporter if d.is_main else Reporter.quiet()
        done = results.status(name).get("step", 0) if kw.get("resume") else 0
        rep.progress.start(name, cfg.train.steps, f"{cfg.train.steps:,} steps of {cfg.train.batch_size} x "
                           f"{cfg.model.context} tokens", "steps", initial=done or 0)

        def on_step(step, total, loss, tps):
            rep.progress.update(step, f"loss {loss:.3f}, {tps:,.0f} tok/s")

        try:
            res = train(cfg, results, name, device=d.device, progress=on_step, rank=d.rank, world=d.world,
                        process_group=d.group, **kw)
        finally:
            rep.progress.finish()
    if res.skipped:
        rep.echo(f"{name}: already finished, skipped")
    else:
        rep.echo(f"{name}: trained {res.steps} steps in {res.wall_s:.0f}s, final loss {res.final_loss:.4f}")
    return res

