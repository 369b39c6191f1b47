"""The generated sections that come from the code, not from records (written by ``pebench docs``): the command
reference, from the CLI itself (``<!-- pebench:cli -->`` in docs/manual/cli.md: every visible command with its help line
and every option with its default and help, so the reference cannot drift from the commands), and a config's or a
suite's cost on paper (``<!-- pebench:estimate config=small -->``, ``<!-- pebench:estimate suite=scale -->``:
``pebench.perf.estimate`` at the presets' peaks)."""

from __future__ import annotations

from pathlib import Path

import click
import typer

from ..findings.docs import GENERATORS
from .app import app


def _default(p: click.Parameter) -> str:
    if getattr(p, "is_flag", False) and getattr(p, "secondary_opts", None):
        return p.opts[0] if p.default else p.secondary_opts[0]
    if p.default is None or p.default is False or p.default == () or p.default == []:
        return ""  # no default, or a flag that is off unless given
    d = p.default
    return ",".join(map(str, d)) if isinstance(d, (list, tuple)) else str(d)


def _cell(text: str) -> str:
    """One table cell: pipes escaped, rich's markup escape (``\\[slurm]``) undone, one line."""
    return text.replace("\\[", "[").replace("|", "\\|").replace("\n", " ").strip()


def command_reference() -> str:
    """Markdown: a heading per command (in the app's order), its first help line, a table of its options."""
    group = typer.main.get_command(app)
    ctx = group.make_context("pebench", ["list"], resilient_parsing=True)
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd.hidden:
            continue
        args = " ".join(p.human_readable_name for p in cmd.params if isinstance(p, click.Argument))
        out += [f"### `pebench {name}{' ' + args if args else ''}`", "", _cell((cmd.help or "").split("\n\n")[0]), ""]
        rows = [p for p in cmd.params if not getattr(p, "hidden", False)]
        if not rows:
            continue
        out += ["| option | default | what it does |", "|---|---|---|"]
        for p in rows:
            flags = " / ".join(p.opts + list(getattr(p, "secondary_opts", []) or []))
            value = _default(p)
            out.append(f"| `{flags}` | {f'`{_cell(value)}`' if value else ''} | {_cell(p.help or '')} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


@GENERATORS.register("cli")
def _cli(root: Path, args: dict) -> str:
    return command_reference()


@GENERATORS.register("estimate")
def _estimate(root: Path, args: dict) -> str:
    from ..config import load_config
    from ..perf import estimate as es

    if "suite" in args:
        return suite_cost(args["suite"])
    cfg = load_config(args["config"])
    return es.estimate_markdown(es.estimate(cfg, args.get("precision", "bf16")), es.custom_preset(None, None))


def suite_cost(name: str) -> str:
    """A suite's training on paper, point by point (its schemes and three seeds), at the 2-core CPU preset."""
    from dataclasses import replace

    from ..config import load_config
    from ..jobs.suites import Point, get_suite
    from ..model.pe import resolve_schemes
    from ..perf import estimate as es

    st, cpu = get_suite(name), es.PEAKS["cpu2"]
    base, schemes = load_config(st.config), resolve_schemes(st.pe)
    lines = [
        "| point | axis | params | tokens per run | tokens per parameter | training FLOPs (every scheme, 3 seeds) "
        "| at the cpu2 preset |",
        "|---" * 7 + "|",
    ]
    total = 0.0
    for p in st.points or (Point("", ""),):
        cfg = p.apply(base)
        flops = 3 * sum(
            es.estimate(replace(cfg, model=replace(cfg.model, pe=s)), "bf16", [cfg.model.context]).train_flops
            for s in schemes
        )
        e = es.estimate(cfg, "bf16", [cfg.model.context])
        total += flops
        lines.append(
            f"| {cfg.name} | {p.axis or 'all'} | {e.params:,} | {e.train_tokens:,} | "
            f"{e.train_tokens / e.params:.2f} | {flops:.3g} | {es.predicted_seconds(flops, cpu) / 3600:.1f} h |"
        )
    lines.append(f"| **all** | | | | | {total:.3g} | {es.predicted_seconds(total, cpu) / 3600:.1f} h |")
    return "\n".join(lines) + "\n"
