"""Every relative link of the README and the docs resolves: its file exists and, where it names an anchor, the page
has a heading of that anchor (GitHub's rule: lower case, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text)))
    return out


def test_every_relative_link_resolves():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no heading #{anchor})")
    assert not broken, broken


def test_the_docs_have_a_front_door_that_names_every_page():
    index = (REPO / "docs" / "index.md").read_text()
    missing = [p.name for p in sorted((REPO / "docs").rglob("*.md")) if p.name != "index.md" and p.name not in index]
    assert not missing, f"docs/index.md does not name {missing}"
