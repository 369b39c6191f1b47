"""A small name -> object registry with a helpful "did you mean" error. An entry that has a ``name`` (a scheme
class, a task, a training-document kind) registers under it (``add``); a plain function under the name given
(``register``)."""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from .errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return deco

    def add(self, obj: T) -> T:
        """Register ``obj`` under its own ``name`` (usable as a class decorator)."""
        name = getattr(obj, "name", None)
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} registered by its own name needs a name, got {name!r}")
        return self.register(name)(obj)

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        raise UsageError(unknown_name_message(self.kind, name, self.names()))

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def items(self):
        return self._items.items()


def unknown_name_message(kind: str, name: str, valid: list[str]) -> str:
    msg = f"unknown {kind} {name!r}; valid: {', '.join(valid) or 'none'}"
    close = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.5)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    return msg
