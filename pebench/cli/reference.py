"""The command reference, generated from the CLI itself (``<!-- pebench:cli -->`` in docs/cli.md, written by
``pebench docs``): every visible command with its help line and every option with its default and help, so the
reference cannot drift from the commands."""

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
