"""The package's shape: imports point one way (no cycle, function-level imports counted), the CLI stays thin and
functions fit on a screen. These read the source; they run nothing."""

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "pebench"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(mod: str, path: Path, mods: dict) -> set[str]:
    """Every pebench module ``mod`` imports, at module level or inside any function."""
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                deps.add(f"{name}.{a.name}" if f"{name}.{a.name}" in mods else name)
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names}
    return {d for d in deps if d in mods and d != mod}


@functools.cache  # the package's source, parsed once for the sixty direction checks (read, never changed)
def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    found = cycles(import_graph())
    assert not found, "import cycles (function-level imports included): " + "; ".join(" <-> ".join(c) for c in found)


def test_no_room_imports_a_room_that_imports_it():
    """Drawn room by room (a top-level subpackage with the extension rooms inside it: model/pe and model/patterns are
    model's, eval/tasks is eval's; each top-level module its own), with function-level imports counted, no arrow
    points back up: the room graph has no cycle."""

    def room(module: str) -> str:
        return module.split(".")[1] if module.count(".") else module

    rooms: dict[str, set] = {}
    for module, targets in import_graph().items():
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    found = cycles(rooms)
    assert not found, "rooms that import each other: " + "; ".join(" <-> ".join(c) for c in found)
    assert cycles({"model": {"util"}, "util": {"model"}}) == [["model", "util"]]  # the check can fail


# The rooms' directions (docs/manual/layout.md): the CLI on top, then the job machinery, then the findings and the
# core. Nothing imports the CLI; the findings read records, never models; results and config know no task or model.
MODEL = ("decoder", "attention", "checkpoint", "spans", "logit_scales")  # the findings never reach a model
CORE = (
    "pebench.model.decoder",
    "pebench.train",
    "pebench.eval.evaluate",
    "pebench.eval.tasks",
    "pebench.eval.scoring",
    "pebench.model.checkpoint",
    "pebench.results",
    "pebench.config",
    "pebench.model.pe",
    "pebench.model.attention",
    "pebench.data",
    "pebench.analysis",
)


@pytest.mark.parametrize(
    "low, high",
    [
        *[(m, "pebench.cli") for m in CORE + ("pebench.jobs.sweep", "pebench.jobs.plan", "pebench.findings.report")],
        *[(m, "pebench.jobs.sweep") for m in CORE + ("pebench.findings.report", "pebench.findings.claims")],
        *[(m, "pebench.findings.report") for m in CORE],
        *[(f, f"pebench.model.{m}") for f in ("pebench.findings.report", "pebench.findings.claims") for m in MODEL],
        ("pebench.results", "pebench.eval.tasks"),
        ("pebench.results", "pebench.eval"),
        ("pebench.config", "pebench.model"),
        ("pebench.model.decoder", "pebench.eval"),
        ("pebench.model.checkpoint", "pebench.eval"),
        ("pebench.perf.estimate", "pebench.eval"),
        ("pebench.eval.scoring", "pebench.eval.evaluate"),
        ("pebench.eval.scoring", "pebench.train"),
        ("pebench.model.checkpoint", "pebench.train"),
        ("pebench.eval.tasks.base", "pebench.eval.evaluate"),
        ("pebench.cli.console", "pebench.train"),
        ("pebench.cli.console", "pebench.jobs.distributed"),
    ],
)
def test_layers_point_down(low, high):
    """A lower module imports nothing from a higher one (or any module of a higher package), directly or through
    others."""
    graph, seen, todo = import_graph(), set(), [low]
    while todo:
        m = todo.pop()
        for d in graph.get(m, ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    assert low in graph, f"no module {low}"
    hit = sorted(m for m in seen if m == high or m.startswith(high + "."))
    assert not hit, f"{low} reaches {', '.join(hit)}"


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_over_60_lines():
    """Counted from the first line of the body (its docstring included): a signature is a declaration, which the
    formatter writes one parameter a line (a command's options), and the code is what must fit on a screen."""
    long = []
    for path in PKG.rglob("*.py"):
        for f in _functions(ast.parse(path.read_text())):
            n = f.end_lineno - f.body[0].lineno + 1
            if n > 60:
                long.append(f"{path.relative_to(PKG.parent)}:{f.lineno} {f.name} ({n} lines)")
    assert not long, long


def test_every_command_is_thin():
    """Every registered command (hidden ones too) parses, calls the library and prints: its body (signature and
    docstring aside) is at most 25 lines."""
    import inspect
    import textwrap

    from pebench.cli import app

    fat, seen = [], 0
    for cmd in app.registered_commands:
        fn = inspect.unwrap(cmd.callback)
        f = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        body = f.body[1:] if isinstance(f.body[0], ast.Expr) and isinstance(f.body[0].value, ast.Constant) else f.body
        n, seen = body[-1].end_lineno - body[0].lineno + 1, seen + 1
        if n > 25:
            fat.append(f"{cmd.name or fn.__name__}: {n} lines")
    assert seen >= 15 and not fat, fat


def test_nothing_outside_the_cli_imports_it():
    graph = import_graph()
    bad = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if not m.startswith("pebench.cli") and m != "pebench.__main__"
        for d in deps
        if d.startswith("pebench.cli")
    )
    assert not bad, bad


def test_util_knows_nothing_above_it():
    """The helpers' room imports only itself: no model, evaluation, findings or command line (and so no torch)."""
    graph = import_graph()
    util = [m for m in graph if m.startswith("pebench.util.")]
    bad = sorted(f"{m} -> {d}" for m in util for d in graph[m] if not d.startswith("pebench.util"))
    assert len(util) >= 8 and not bad, bad
