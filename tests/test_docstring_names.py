"""A docstring or comment that names code names code that exists: every dotted name in double backquotes
(``module.function``, ``Class.attribute``, ``train.precision``) and every Sphinx role (:func:`name`) in the package
resolves to a module, class, function, attribute, dataclass field, registry entry or config key of today's code.
An interface renamed or moved without its words leaves a name behind, and this test names the line."""

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from pebench.util.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:func|class|mod|meth|attr|data):`~?([A-Za-z_][\w.]*)`")
TICKED = re.compile(r"``([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?``")
# Names that are not code: a local variable or argument, a record's nested field, a placeholder, a file name.
NOT_CODE = {"self", "req", "cfg", "mod", "reporter", "base", "pe", "provenance", "details", "DEST", "TASK"}
# Names that are not Python objects: package data pyproject.toml maps, an entry-point group, a config dict's keys.
NAMED = {"pebench.configs", "pebench.schemes", "pe_options"}
FILES = (".py", ".json", ".png", ".gz", ".html", ".md", ".yaml", ".csv")
CONFIG = ("model", "train", "eval")


def _modules() -> dict:
    out = {}
    for p in sorted((ROOT / "pebench").rglob("*.py")):
        if p.name != "__main__.py":
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            out[name] = importlib.import_module(name)
    return out


MISSING = object()


def _step(obj, part: str):
    """``obj.part`` in the sense a docstring means it: an attribute, a dataclass field, a registry's entry, or an
    entry of a module's registry (``logit_scales.llama4``)."""
    if hasattr(obj, part):
        return getattr(obj, part)
    fields = getattr(obj, "__dataclass_fields__", {})
    if part in fields:
        return fields[part]
    if isinstance(obj, Registry):
        return obj.get(part) if part in obj.names() else MISSING
    if inspect.ismodule(obj):
        for reg in (v for v in vars(obj).values() if isinstance(v, Registry)):
            if part in reg.names():
                return reg.get(part)
    return MISSING


def _walk(obj, parts) -> bool:
    for part in parts:
        obj = _step(obj, part)
        if obj is MISSING:
            return False
    return True


class _Resolver:
    def __init__(self):
        from pebench.config import Config

        self.mods = _modules()
        self.tails: dict[str, list] = {}  # "attention" and "model.attention" both name pebench.model.attention
        for name, m in self.mods.items():
            parts = name.split(".")
            for k in range(len(parts)):
                self.tails.setdefault(".".join(parts[k:]), []).append(m)
        self.classes: dict[str, list] = {}
        for m in self.mods.values():
            for k, v in vars(m).items():
                if inspect.isclass(v) and v.__module__.startswith("pebench"):
                    self.classes.setdefault(k, []).append(v)
        self.sections = {f.name: f.default_factory for f in dataclasses.fields(Config) if f.name in CONFIG}

    def config_key(self, parts) -> bool:
        fields = {f.name for f in dataclasses.fields(self.sections[parts[0]]())}
        return len(parts) == 2 and parts[1] in fields

    def resolves(self, name: str, module) -> bool:
        parts = name.split(".")
        if parts[0] in NOT_CODE or name.endswith(FILES) or any(name.startswith(n) for n in NAMED):
            return True
        if parts[0] in self.sections and self.config_key(parts):
            return True
        for k in range(len(parts), 0, -1):
            if any(_walk(m, parts[k:]) for m in self.tails.get(".".join(parts[:k]), [])):
                return True
        if any(_walk(c, parts[1:]) for c in self.classes.get(parts[0], [])):
            return True
        if _walk(module, parts):  # a name of the module itself, or a method of one of its classes
            return True
        owners = [v for v in vars(module).values() if inspect.isclass(v) and v.__module__ == module.__name__]
        if any(_walk(c, parts) for c in owners):
            return True
        try:  # an outside module (torch.utils.flop_counter)
            importlib.import_module(name)
            return True
        except ImportError:
            return False


def test_every_name_a_docstring_or_comment_gives_exists():
    pytest.importorskip("torch")
    r = _Resolver()
    stale, seen = [], 0
    for module in r.mods.values():
        path = Path(module.__file__)
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for m in [*ROLE.finditer(line), *TICKED.finditer(line)]:
                seen += 1
                if not r.resolves(m.group(1), module):
                    stale.append(f"{path.relative_to(ROOT)}:{i}: {m.group(1)}")
    assert seen > 100, "the pattern no longer finds the package's names"
    assert not stale, "names that no code has:\n" + "\n".join(stale)


def test_the_resolver_tells_a_stale_name_from_a_real_one():
    pytest.importorskip("torch")
    r = _Resolver()
    evaluate = r.mods["pebench.eval.evaluate"]
    assert r.resolves("eval.flags.EvalFlags", evaluate) and r.resolves("train.precision", evaluate)
    assert r.resolves("logit_scales.llama4", evaluate) and r.resolves("DecoderLM.flops_per_token", evaluate)
    assert not r.resolves("eval.evaluate.EvalFlags", evaluate)  # it moved to eval.flags
    assert not r.resolves("train.no_such_key", evaluate) and not r.resolves("attention.no_such_function", evaluate)
