"""docs/manual/layout.md's table names every module of the package, each once, in its room (the subpackage it
lives in, the extension rooms inside the room they extend, or the top), and names no module that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "pebench"
ROOMS = ("cli", "jobs", "findings", "model", "eval", "perf", "util", "data", "analysis")


def _table() -> dict[str, str]:
    text = (ROOT / "docs" / "manual" / "layout.md").read_text()
    layout = text[text.index("# Layout") :]
    return {m: room for m, room in re.findall(r"^\| `([\w/]+\.py)` \| (\w+) \|", layout, flags=re.M)}


def test_the_layout_table_names_every_module_in_its_room():
    table = _table()
    modules = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py")}
    assert modules - set(table) == set(), "modules missing from docs/manual/layout.md's table"
    assert set(table) - modules == set(), "modules in the Layout table that do not exist"
    for m, room in table.items():
        top = m.split("/")[0]
        assert room == (top if top in ROOMS else "cli" if m == "__main__.py" else "top"), m


def test_the_package_keeps_at_most_12_modules_at_the_top():
    """The top holds the entry points, the config, the record contract and the training loop; every other module
    lives in the room of its role (model, eval, perf, util, and the rooms beside them)."""
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 12, top


def test_no_issue_number_in_the_product_text():
    """The code, the scripts, the README, the docs and the committed claims files speak of the project, not of its
    tracker: no 'issue #N' in them."""

    root = Path(__file__).resolve().parents[1]
    files = [*root.joinpath("pebench").rglob("*.py"), root / "README.md", *root.joinpath("docs").rglob("*.md")]
    files += [*root.joinpath("scripts").glob("*.py"), *root.joinpath("scripts").glob("*.sh")]
    files += [*root.joinpath("results").glob("*/claims.yaml")]
    found = [
        f"{p.relative_to(root)}:{i}"
        for p in files
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\bissues? #?\d+|\(#\d+\)", line, flags=re.I)
    ]
    assert not found, found


def test_no_room_keeps_its_main_code_in_its_init():
    """A package's ``__init__.py`` is its contract and its names (at most 40 lines of code: no docstring, blank or
    comment lines); its work lives in modules named for it."""
    import ast

    big = {}
    for init in sorted(PKG.rglob("__init__.py")):
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree, clean=False)
        lines = [x for x in init.read_text().splitlines() if x.strip() and not x.strip().startswith("#")]
        n = len(lines) - (len(doc.splitlines()) if doc else 0)
        if n > 40:
            big[str(init.relative_to(PKG))] = n
    assert not big, big
