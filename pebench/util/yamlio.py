"""YAML reading: PyYAML's safe loader, in libyaml's C implementation where the installed PyYAML has it (the same
safe subset of YAML, several times faster on the claims files that ``pebench check`` and ``pebench docs`` read for
every set, and at every registering commit), else the pure-Python one. Errors are PyYAML's ``YAMLError``, marks
included, from either."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, in C where available."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)
