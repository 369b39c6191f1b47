"""Options made from a flags dataclass, declared once (torchtitan's way): a field whose metadata has a ``help`` (and
its ``decl``, the flag as click spells it) becomes an option of every command decorated with ``takes``; the command
receives the dataclass, filled from those options, as one parameter. ``config.ConfigFlags`` is the one group today:
``train``, ``run`` and ``tune`` take it."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Callable

import typer


def option_fields(cls, skip: tuple[str, ...] = ()) -> list[tuple[dataclasses.Field, object]]:
    """(field, its type) of each field of ``cls`` that is an option (its metadata has a help), in field order."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if "help" in f.metadata and f.name not in skip]


def takes(cls, param: str, skip: tuple[str, ...] = ()) -> Callable:
    """Decorate a command whose parameter ``param`` is a ``cls``: its options come from ``cls``'s option fields
    (all but ``skip``), in its signature where ``param`` stood, and the command is called with ``param`` a ``cls``
    of what was given (None where an option was not given)."""

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        made = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=typer.Option(None, f.metadata["decl"], help=f.metadata["help"]),
                annotation=hint,
            )
            for f, hint in option_fields(cls, skip)
        ]
        names = [m.name for m in made]
        params = []
        for p in sig.parameters.values():
            params.extend(made if p.name == param else [p])

        @functools.wraps(fn)
        def command(**kw):
            given = {n: kw.pop(n) for n in names}
            return fn(**kw, **{param: cls(**given)})

        command.__signature__ = sig.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer reads the signature above, not the function's own
        return command

    return decorate
