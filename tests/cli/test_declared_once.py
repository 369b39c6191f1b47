"""One declaration per setting: every flag of pebench's command line is declared once in the package (a
``typer.Option``, or a flags dataclass's field that ``cli.flags.takes`` and ``cli.options.option`` make options of),
so it has one help and one default on every command that takes it. A flag name that means different settings on
different commands (a homonym) is listed below with what each declaration is; the list cannot go stale. And a
dataclass's annotations say what its fields hold: the values the command line and the configs put there conform."""

from __future__ import annotations

import ast
import collections
import dataclasses
import typing
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import pebench
from pebench.cli import app
from pebench.cli.flags import takes
from pebench.config import Config, ConfigFlags, load_config
from pebench.eval.flags import EvalFlags
from pebench.jobs.launch import LaunchFlags
from pebench.jobs.plan import eval_request

PACKAGE = Path(pebench.__file__).parent
CF, EV, LAUNCH = ConfigFlags(), EvalFlags(), LaunchFlags()  # placeholders where takes puts the options

# flag -> what each of its declarations is (one entry per declaration)
HOMONYMS = {
    "--compile": ("train/run: torch.compile the model", "bench: also time compiled training"),
    "--config": ("train/run/tune/bench: the config to build", "report: which runs' config a table reads"),
    "--context": ("eval --hf: the outside model's context", "train --init-from: the continuation's context"),
    "--hf": ("eval/rope: the outside model read", "export: the folder written"),
    "--lr": ("train/run: one rate for every scheme", "tune: the grid of rates"),
    "--overwrite": ("train: a finished run", "run: finished runs and records", "pack: DEST's packed records"),
    "--precision": ("train/run/bench: the training precision", "power: which draws' precision to read"),
    "--protocol": ("eval: how to measure (with --stride, --targets)", "report/compare: which records' protocol key"),
    "--reference": ("bench: also time the eager reference", "compare: the committed set"),
    "--results": ("most: the results folder", "run: the suite's folder by default", "pack: several source folders"),
    "--resume": ("train: continue an interrupted run", "eval: keep the records written"),
    "--rope-factor": ("eval: the factor at evaluation", "train --init-from: the factor baked in"),
    "--rope-scaling": ("eval/run/rope: scalings at evaluation", "train --init-from: the scaling baked in"),
    "--seeds": ("train/run: one run per seed", "power: the draws in hand"),
}


def _flags_in(node: ast.AST) -> list[str]:
    """The flags a declaration names: ``typer.Option(default, "--a/--no-a")``, ``_opt``/``_flag`` calls, a field's
    ``metadata={"decl": "--a"}``."""
    if isinstance(node, ast.Call):
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if fn in ("Option", "_opt", "_flag"):
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            return [t.split("/")[0] for t in texts if t.startswith("--")]
    if isinstance(node, ast.Dict):
        return [
            v.value.split("/")[0]
            for k, v in zip(node.keys, node.values)
            if isinstance(k, ast.Constant) and k.value == "decl" and isinstance(v, ast.Constant)
        ]
    return []


def declarations() -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            counts.update(_flags_in(node))
    return counts


def command_options() -> dict[str, list[tuple[str, str, str]]]:
    """flag -> (command, help, default) of every command that has it."""
    out = collections.defaultdict(list)
    for name, cmd in typer.main.get_command(app).commands.items():
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                for o in p.opts:
                    out[o].append((name, p.help, repr(p.default)))
    return out


def test_every_flag_is_declared_once_and_a_homonym_once_per_meaning():
    counts = declarations()
    twice = {f: n for f, n in counts.items() if n > 1 and f not in HOMONYMS}
    assert not twice, f"declared more than once: {twice}"
    for flag, meanings in HOMONYMS.items():  # the list names real homonyms, each declaration once
        assert counts[flag] == len(meanings), (flag, counts[flag])
    assert counts["--pe"] == counts["--lengths"] == counts["--eval-precision"] == 1


def test_a_flag_has_one_help_and_one_default_on_every_command_that_takes_it():
    for flag, uses in command_options().items():
        if flag not in HOMONYMS:
            assert len({(h, d) for _, h, d in uses}) == 1, (flag, uses)
    pe = command_options()["--pe"]
    assert {c for c, _, _ in pe} == {"train", "run", "tune", "bench", "report"}


def test_the_declaration_test_sees_a_second_declaration():
    """A planted duplicate (a command declaring --lengths again) is counted."""
    code = 'import typer\nX = typer.Option(None, "--lengths", help="again")\nD = {"decl": "--pe"}\n'
    counts = collections.Counter()
    for node in ast.walk(ast.parse(code)):
        counts.update(_flags_in(node))
    assert counts == {"--lengths": 1, "--pe": 1}


def conforms(value, hint) -> bool:
    """Whether ``value`` is of the annotation ``hint`` (Optional, unions, list/tuple/dict of, classes, Any)."""
    if hint is typing.Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin in (list, tuple):
        if not isinstance(value, origin):
            return False
        inner = args[0] if args and (origin is list or args[-1] is Ellipsis) else None
        return inner is None or all(conforms(v, inner) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


def assert_conforms(obj) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        assert conforms(value, hints[f.name]), f"{type(obj).__name__}.{f.name} = {value!r} is not {hints[f.name]}"
        if dataclasses.is_dataclass(value):
            assert_conforms(value)


def test_conforms_catches_a_wrong_annotation():
    @dataclasses.dataclass
    class Wrong:
        lengths: list[int]

    assert conforms([512, "2x"], list[int | str]) and conforms(None, typing.Optional[list[str]])
    with pytest.raises(AssertionError, match="lengths"):
        assert_conforms(Wrong(lengths=[512, "2x"]))


def test_the_flags_and_the_request_hold_what_their_annotations_say():
    captured = {}
    cmd = typer.Typer()

    @cmd.command()
    @takes(ConfigFlags, "cf")
    @takes(EvalFlags, "ev")
    @takes(LaunchFlags, "launch")
    def probe(cf: ConfigFlags = CF, ev: EvalFlags = EV, launch: LaunchFlags = LAUNCH):
        captured.update(cf=cf, ev=ev, launch=launch)

    args = [
        "--pe",
        "rope,alibi",
        "--lengths",
        "1x,512,2x",
        "--steps",
        "3",
        "--task",
        "passkey",
        "--task-opt",
        "trials=2",
        "--sinks",
    ]
    r = CliRunner().invoke(cmd, args + ["--eval-precision", "fp32", "--rope-scaling", "yarn"])
    assert r.exit_code == 0, r.output
    assert captured["cf"].pe == ["rope", "alibi"] and captured["ev"].lengths == ["1x", 512, "2x"]
    for obj in captured.values():
        assert_conforms(obj)
    req = eval_request(captured["ev"])
    assert req.lengths == ["1x", 512, "2x"] and req.eval_precision == "fp32"
    assert_conforms(req)


@pytest.mark.parametrize("name", ["tiny", "small", "context", "gpt2-small"])
def test_a_built_in_config_holds_what_its_annotations_say(name):
    cfg = load_config(name)
    assert isinstance(cfg, Config)
    assert_conforms(cfg)
