"""Options made from a flags dataclass, declared once (torchtitan's way): a field whose metadata has a ``help`` (and
its ``decl``, the flag as click spells it) becomes an option of every command decorated with ``takes``; the command
receives the dataclass, filled from those options, as one parameter. A field whose metadata has a ``parse`` is text on
the command line and ``parse(text)`` in the dataclass (``--pe`` a list from the parser on). The groups:
``config.ConfigFlags`` (``train``, ``run``, ``tune``; ``--pe`` and ``--config`` of ``bench`` too),
``eval.flags.EvalFlags`` (``eval``, ``run``; ``--lengths`` of ``analyze``, ``bench`` and ``rope`` too) and
``jobs.launch.LaunchFlags`` (``run``). tests/cli/test_declared_once.py fails on a flag declared twice."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable, List, Optional

import typer


def option_fields(cls, skip: tuple[str, ...] = ()) -> list[tuple[dataclasses.Field, Any]]:
    """(field, its type) of each field of ``cls`` that is an option (its metadata has a help), in field order."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if "help" in f.metadata and f.name not in skip]


def _repeated(f: dataclasses.Field, hint) -> bool:
    """Whether a field is a tuple of values given one per flag (a repeatable option), not parsed from one text."""
    return typing.get_origin(hint) is tuple and "parse" not in f.metadata


def _parameter(f: dataclasses.Field, hint, default: Any) -> inspect.Parameter:
    if _repeated(f, hint):  # a repeatable option: click gives a list, the dataclass keeps a tuple
        hint, default = Optional[List[typing.get_args(hint)[0]]], None
    elif "parse" in f.metadata:  # text on the command line, parsed on the way into the dataclass
        hint = Optional[str]
    return inspect.Parameter(
        f.name,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=typer.Option(default, f.metadata["decl"], help=f.metadata["help"]),
        annotation=hint,
    )


def takes(cls, param: str, skip: tuple[str, ...] = (), only: Optional[tuple[str, ...]] = None) -> Callable:
    """Decorate a command whose parameter ``param`` is a ``cls``: its options come from ``cls``'s option fields
    (``only`` these, or all but ``skip``; each with the field's default), in its signature where ``param`` stood, and
    the command is called with ``param`` a ``cls`` of what was given, parsed where the field says how (the fields it
    has no option for at their defaults)."""

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        fields = [(f, h) for f, h in option_fields(cls, skip) if only is None or f.name in only]
        made = [_parameter(f, hint, f.default) for f, hint in fields]
        repeated = {f.name for f, hint in fields if _repeated(f, hint)}
        parsers = {f.name: f.metadata["parse"] for f, _ in fields if "parse" in f.metadata}
        params = []
        for p in sig.parameters.values():
            params.extend(made if p.name == param else [p])

        @functools.wraps(fn)
        def command(**kw):
            given = {m.name: kw.pop(m.name) for m in made}
            given.update({n: tuple(given[n] or ()) for n in repeated})
            given.update({n: parse(given[n]) for n, parse in parsers.items() if given[n] is not None})
            return fn(**kw, **{param: cls(**given)})

        command.__signature__ = sig.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer reads the signature above, not the function's own
        return command

    return decorate
