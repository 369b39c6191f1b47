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
    """A suite's training on paper (``perf.estimate.suite_cost``): its config, points and schemes."""
    from ..config import load_config
    from ..jobs.suites import Point, get_suite
    from ..model.pe import resolve_schemes
    from ..perf.estimate import suite_cost as cost

    st = get_suite(name)
    return cost(load_config(st.config), st.points or (Point("", ""),), resolve_schemes(st.pe))
