"""Scheme groups, in table order (no torch import: reports read it too)."""

GROUPS = {
    "classic": ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"],  # the survey's seven
    "modern": ["kerple", "fire", "xpos", "p-rope", "sandwich", "fox", "cope"],  # after ALiBi
    "2025": ["pope", "stick-breaking", "path"],
    "2026": ["rope-alibi", "rope-id"],  # the newest
}
SCHEME_ORDER = GROUPS["classic"] + GROUPS["modern"] + GROUPS["2025"] + GROUPS["2026"]


def scheme_of(label: str) -> str:
    """The scheme of a row label ('rope+yarn ft512' -> 'rope')."""
    return label.split("+")[0].split(" ")[0]


def row_key(label: str) -> tuple:
    """The one row order of every table, plot legend and script: the groups' order, then any other scheme by
    name; a scheme's variants and continuations follow it by label."""
    s = scheme_of(label)
    return (SCHEME_ORDER.index(s) if s in SCHEME_ORDER else len(SCHEME_ORDER), s, label)
