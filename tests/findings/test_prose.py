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


def prose_lines(text: str, given: bool = False) -> list[tuple[int, str]]:
    """(line number, text) of the prose: generated sections, fenced code, inline code, link targets and HTML
    comments removed; lines marked ``<!-- given -->`` left out unless ``given``."""
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
        if generated or fenced or ("<!-- given -->" in line and not given):
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


# A sentence that states a result: the verbs a finding is told with. A findings page may say these only inside a
# generated section (the claim's verdict, numbers and draws), as an observation with its count ("in 3 of 3 draws"),
# as a question or a prediction ("whether", "predicts"), or quoting someone ("...").
RESULT = re.compile(
    r"\b("
    r"holds?(?![\s-]+(?:the|every|each|its|their|a|an|all|seeds?|records?|about|out|one|two|three|\d))"
    r"|held(?= at| on| for| to| in| up| there)|did not hold|does not hold"
    r"|grows?|grew|(?:does|do|did) not move|(?:is|are)(?: not)? the cause|causes"
    r"|stays? flat|stayed flat|keeps? (?:perplexity )?flat|stays? (?:below|above|ahead|behind)"
    r"|breaks|break(?= at| beyond| past| there)|broke|degrades?|degraded"
    r"|beats?|outperforms?|(?:is|are) (?:better|worse|best|worst|ahead|behind)"
    r"|improves|recovers?|closes|halves|doubles|transfers?|replicates?|carrie[sd] over"
    r"|(?:is|are|was|were) (?:confirmed|refuted)|rises|falls|fall back|is robust"
    r"|(?:is|is not) (?:a|the) property|does not (?:depend|matter|change)"
    r")\b",
    re.I,
)
NUMBER_WORD = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
COUNTED = re.compile(rf"\b{NUMBER_WORD} of {NUMBER_WORD}\b", re.I)
HEDGED = re.compile(r"\b(?:whether|predicts?|predicted|expects?|expected|hypothes\w+)\b|\?", re.I)
FINDINGS = [ROOT / "README.md", *sorted((ROOT / "docs" / "findings").glob("*.md"))]


def sentences(text: str) -> list[tuple[int, str]]:
    """(first line, sentence) of a page's prose, given lines included: paragraphs joined, a table row or a list
    item its own unit, headings and quoted words ("...") left out."""
    units, para = [], []
    for i, line in prose_lines(text, given=True):
        s = line.strip()
        if not s or s.startswith(("#", "|", "- ", "* ")):
            units += [para] if para else []
            para = []
            if s.startswith(("|", "- ", "* ")):
                units.append([(i, s)])
            continue
        para.append((i, s))
    units += [para] if para else []
    out = []
    for unit in units:
        joined = re.sub(r"\"[^\"]*\"|“[^”]*”", "", " ".join(s for _, s in unit))
        out += [(unit[0][0], s) for s in re.split(r"(?<=[.:;!])\s+(?=[A-Z*(\[])", joined) if s]
    return out


def result_statements(text: str) -> list[tuple[int, str]]:
    return [(i, s) for i, s in sentences(text) if RESULT.search(s) and not COUNTED.search(s) and not HEDGED.search(s)]


@pytest.mark.parametrize("page", FINDINGS, ids=lambda p: p.name)
def test_a_findings_page_states_results_only_in_its_claims_or_with_their_counts(page):
    """#79: a page's conclusions are its generated claims (verdict, numbers, draws) or observations worded with
    their counts; a sentence that states a result by hand (holds, grows, does not move, is the cause, stays flat,
    breaks ...) outside a generated section fails, ``<!-- given -->`` lines included: no exemptions."""
    found = [f"{page.name}:{i}: {s[:160]!r}" for i, s in result_statements(page.read_text())]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "text, flagged",
    [
        ("RoPE's break grows with training up to 2,000 steps.", True),
        ("The training context does not move it.", True),
        ("ALiBi stays flat to 16x. <!-- given -->", True),
        ("Budget is the cause of the gap.", True),
        ("RoPE's 16x is above its 1x in 3 of 3 draws.", False),
        ("Whether ALiBi stays flat at 16x is registered below.", False),
        ('The paper says "continuous positions beat integer ones".', False),
        ("<!-- pebench:claims set=x -->\n- **confirmed** ALiBi stays flat.\n<!-- pebench:end -->", False),
        ("## Where each finding holds", False),
    ],
)
def test_the_result_check_finds_a_hand_written_finding_and_spares_counts_questions_and_claims(text, flagged):
    assert bool(result_statements(text)) is flagged
