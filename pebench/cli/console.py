"""What the commands show, and how their failures read: one-line errors (``OneLineErrors``, ``handle_errors``), the
terminal's ``Reporter`` (lines, a progress bar or heartbeat lines in a log, one line per record), warnings about
records that could not be read, tables. Presentation only: it prints, and every decision is the library's."""

from __future__ import annotations

import functools
import shlex
import sys
from pathlib import Path

import typer
from typer.core import TyperGroup

from ..results import ResultsDir
from ..util.errors import PebenchError

STATE = {"debug": False}
# The click that typer runs on (its own copy from typer 0.2x on, the click package before): its usage errors.
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_NO_ARGS = getattr(sys.modules[_USAGE_ERROR.__module__], "NoArgsIsHelpError", ())


# The order --help lists the commands in (the modules register them in import order); any other comes last.
COMMAND_ORDER = (
    "train",
    "eval",
    "report",
    "run",
    "tune",
    "analyze",
    "bench",
    "list",
    "check",
    "docs",
    "pack",
    "compare",
    "rope",
    "export",
)


class OneLineErrors(TyperGroup):
    """``--debug`` anywhere on the line; a usage error is one line on stderr (exit 2), never a box."""

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            _flags_take_no_value(cmd, ctx)
        return cmd

    def format_help(self, ctx, formatter):
        _flags_take_no_value(self, ctx)
        return super().format_help(ctx, formatter)

    def list_commands(self, ctx):
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER))

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        STATE["debug"] = "--debug" in args  # each invocation from its own line (tests run many in one process)
        args = [a for a in args if a != "--debug"]
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS as e:
            typer.echo(e.ctx.get_help())
            sys.exit(2)
        except _USAGE_ERROR as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            typer.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        try:  # output still buffered goes now, so a reader that left is seen here, not at the interpreter's exit
            sys.stdout.flush()
        except BrokenPipeError:
            _pipe_closed()
        sys.exit(rv if isinstance(rv, int) else 0)


def _flags_take_no_value(cmd, ctx) -> None:
    """--help shows a flag bare (``--resume``), not with a ``<bool>`` value it does not take."""
    for p in [*cmd.params, cmd.get_help_option(ctx)]:
        if p is not None and getattr(p, "is_flag", False):
            p.metavar = ""


def _err(msg: str, code: int) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _one_line(e: BaseException) -> tuple[str, int]:
    """The line and exit code for a failure that is not a PebenchError."""
    import torch

    if isinstance(e, KeyboardInterrupt):
        return "interrupted; run the command again (train, run and eval with --resume go on where they stopped)", 130
    if isinstance(e, torch.OutOfMemoryError):
        return "out of device memory; lower the batch size or the lengths", 1
    if isinstance(e, MemoryError):
        return "out of memory; lower the batch size, the lengths or eval.batch_tokens", 1
    if isinstance(e, PermissionError):
        return f"permission denied: {e.filename or e}; choose a writable --results folder", 1
    if isinstance(e, OSError) and e.errno == 28:
        where = f" writing {e.filename}" if e.filename else ""
        return f"no space left on the device{where}; free some space and run the command again", 1
    if isinstance(e, OSError):
        return f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""), 1
    return f"unexpected {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (rerun with --debug)", 1


PIPE_CLOSED = 141  # the status a shell gives a command that SIGPIPE ended (128 + 13)


def _pipe_closed() -> None:
    """The reader of stdout left (`pebench list | head`): exit quietly with SIGPIPE's status, stdout pointed at
    /dev/null first so the interpreter's final flush into the closed pipe raises nothing."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind stdout (a test's capture): nothing to flush
        pass
    sys.exit(PIPE_CLOSED)


def handle_errors(fn):
    """Expected failures become one line on stderr and a non-zero exit; --debug shows the traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if STATE["debug"]:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader left; say nothing, as Unix tools do
            _pipe_closed()
        except PebenchError as e:
            _err(str(e), e.exit_code)
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - last resort: still one line
            _err(*_one_line(e))

    return wrapper


def next_step(command: str, results, why: str) -> None:
    """The line after a command's work that says what to run next (on stderr: stdout stays the command's output),
    a command that runs as printed from this folder: the path quoted for the shell; ``compare`` only where the
    committed reference is (a clone's root), else ``report``."""
    if command == "compare" and not (Path("results") / "reference" / "records.jsonl.gz").is_file():
        command, why = "report", "the table and plots of every record; report --html for a page"
    folder = "" if str(results) == "results" else f" --results {shlex.quote(str(results))}"
    warn(f"next: pebench {command}{folder}  ({why})")


def echo(line: str = "", err: bool = False) -> None:
    typer.echo(line, err=err)


def warn(line: str) -> None:
    typer.echo(line, err=True)


def scaling_notes(spec) -> None:
    """A note for each ``--rope-scaling`` item given under another spelling than pebench's (``dynamic``)."""
    from ..util.parsing import scaling_notes as notes

    for line in notes(spec):
        warn(line)


def reporter():
    """The terminal's reporter: lines on stdout, warnings and errors on stderr, each record as a line, a progress
    bar on a terminal (heartbeat lines in a log)."""
    from ..eval.tasks import record_line
    from ..util.progress import Reporter, for_stream

    return Reporter(echo=echo, warn=warn, record=lambda r: echo(record_line(r)), progress=for_stream())


def load_records(rd: ResultsDir):
    """The records as a frame; every record file that could not be used is named on stderr, one line each."""
    from ..findings.report import records_frame_noting

    return records_frame_noting(rd, warn)


def show(out) -> None:
    """Text as it is; a rich renderable (a table) through rich."""
    if isinstance(out, str):
        echo(out.rstrip("\n"))
        return
    from rich.console import Console

    Console(width=200).print(out)


def print_table(t) -> None:
    from ..findings.report import to_rich

    show(to_rich(t))
    if t.note:  # runs far short of their config's steps: said beside the table, not after the files
        warn(t.note)


def analysis_table(rows: list[dict]) -> str:
    from ..analysis.summary import has_ratio

    head = f"{'rank':>4}  {'run':<28} {'len':>5} {'H 1x':>6} {'H long':>6} {'|dH|':>5} {'far':>6} {'ppl x':>6}"
    out = [head]
    for r in rows:
        ratio = f"{r['ppl_ratio']:.2f}" if has_ratio(r) else "-"
        out.append(
            f"{r['rank']:>4}  {r['run']:<28} {r['length']:>5} {r['entropy_1x']:>6.2f} {r['entropy_long']:>6.2f} "
            f"{r['entropy_drift']:>5.2f} {r['far_share']:>6.1%} {ratio:>6}"
        )
    return "\n".join(out)


def bench_row(m) -> None:
    mfu = "" if m.model_flops is None else f"  {m.model_flops / 1e9:,.0f} GFLOP/s"
    echo(
        f"{m.scheme:<10} {m.phase:<5} {m.path:<12} L={m.length:<6} {m.tokens_per_s:>10,.0f} tok/s "
        f"{m.step_ms:>9.1f} ms  peak {m.peak_mem_mb:>7,.0f} MB{mfu}"
    )
