"""Scheme groups, in table order (no torch import: reports read it too)."""
GROUPS = {
    "classic": ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"],  # the survey's seven
    "modern": ["kerple", "fire", "xpos", "p-rope", "sandwich", "fox", "cope"],  # after ALiBi
}
SCHEME_ORDER = GROUPS["classic"] + GROUPS["modern"]
