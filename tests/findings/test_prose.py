"""The README's promise, kept: every measured number on the pages is generated. Outside a generated section
(``<!-- pebench:KIND ... -->`` to ``<!-- pebench:end -->``), code, links and comments, a page states no measured
number: no decimal, percentage, duration, rate, size or thousands-grouped count. A line that states config values,
formula constants or versions in prose carries the marker ``<!-- given -->`` (95%, the level of every interval, is
one everywhere)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MEASURED = re.compile(
    r"(?<![\w.#/-])("
    r"\d+\.\d+"  # a decimal: 3.61, 1.32x
    r"|(?!95\s?%)\d+(?:\.\d+)?\s?%"  # a percentage (95%, the intervals' level, is a constant)
    r"|\d+(?:\.\d+)?\s?(?:ms|s|min|h)\b"  # a duration
    r"|\d+(?:\.\d+)?\s?(?:[GTM]FLOP/s|tok/s|tokens/s|[kMG]B)\b"  # a rate or a size
    r"|\d{1,3}(?:,\d{3})+"  # a count grouped in thousands: 2,784
    r")"
)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the prose: generated sections, fenced code, inline code, link targets and HTML
    comments removed; lines marked ``<!-- given -->`` left out."""
    out, generated, fenced = [], False, False
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if re.match(r"<!-- pebench:(?!end)\w+", line):
            generated = True
            continue
        if line.startswith("<!-- pebench:end -->"):
            generated = False
            continue
        if generated or fenced or "<!-- given -->" in line:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"<!--.*?-->|<sub>.*?</sub>", "", line)
        out.append((i, line))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_states_no_measured_number_outside_its_generated_sections(page):
    found = [
        f"{page.name}:{i}: {m.group(1)!r} in {line.strip()[:90]!r}"
        for i, line in prose_lines(page.read_text())
        for m in MEASURED.finditer(line)
    ]
    assert not found, "\n".join(found)


def test_the_prose_check_finds_a_typed_number_and_spares_generated_ones():
    text = "RoPE reaches 4.89 at 2x.\n<!-- pebench:table set=x -->\n| 3.61 |\n<!-- pebench:end -->\n`3.1`\n"
    assert [m.group(1) for _, line in prose_lines(text) for m in MEASURED.finditer(line)] == ["4.89"]
    assert not [m for _, line in prose_lines("torch 2.13.0 <!-- given -->\n") for m in MEASURED.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_reads_in_minutes(page):
    if page.name == "cli.md":
        pytest.skip("the CLI reference is a lookup table generated from the commands, one row per option")
    assert len(page.read_text().splitlines()) <= 250
