"""One look per scheme, the same in every plot and report.

Colours come from Paul Tol's colour-blind-safe qualitative palettes (plus black). Schemes are solid lines; every
RoPE variant is a dashed line with its own marker and a hue of its own from the palettes' cool and sand tones
(indigo, blue, pale cyan, teal, sand), so variants are told apart at a glance and seen as RoPE extensions by
their dashes. A row that equals another exactly (dynamic NTK where it computes NTK's function) is named so in
the legend (``legend_labels``) rather than hidden under it. Fine-tuned rows (``... ftN``) keep their variant's
look with hollow markers. A scheme this table does not know gets a stable colour from its name, so a user's own
scheme looks the same in every plot too.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Union

SCHEME_COLORS = {
    # the survey's seven
    "none": "#000000",
    "sinusoidal": "#CC6677",  # rose
    "learned": "#999933",  # olive
    "shaw": "#44AA99",  # teal
    "t5": "#EE7733",  # orange
    "rope": "#1B3A8C",  # dark blue: the RoPE family
    "alibi": "#882255",  # wine
    # the schemes after ALiBi
    "kerple": "#117733",  # green
    "fire": "#AA4499",  # purple
    "sandwich": "#DDAA33",  # dark yellow
    "fox": "#CC3311",  # red
    "cope": "#EE3377",  # magenta
    "xpos": "#33BBEE",  # cyan: a RoPE relative
    "p-rope": "#5E81C2",  # mid blue: a RoPE relative
    # 2025
    "pope": "#EE99AA",  # pink: a RoPE relative with polar components
    "stick-breaking": "#997700",  # ochre
    "path": "#BBBBBB",  # grey
}
# RoPE scalings: a hue each (Tol's muted and vibrant palettes, none a scheme's), each with its own dashes and marker.
VARIANT_STYLES = {
    "linear": ("#332288", (0, (6, 2)), "s"),  # indigo
    "ntk": ("#0077BB", (0, (1, 1.5)), "^"),  # blue
    "dynamic-ntk": ("#88CCEE", (0, (4, 1.5, 1, 1.5)), "v"),  # pale cyan
    "yarn": ("#009988", (0, (8, 2, 2, 2)), "D"),  # teal
    "llama3": ("#DDCC77", (0, (3, 3)), "P"),  # sand
}
EXTRA_COLORS = (
    "#332288",
    "#88CCEE",
    "#117733",
    "#999933",
    "#CC6677",
    "#882255",
    "#44AA99",
    "#AA4499",
    "#DDCC77",
    "#EE7733",
    "#009988",
    "#EE3377",
)
CONTEXT_LINE = {"color": "#777777", "linestyle": ":", "linewidth": 1.2}


@dataclass(frozen=True)
class LineStyle:
    color: str
    linestyle: Union[str, tuple]
    marker: str
    hollow: bool

    def kwargs(self) -> dict:
        kw = {"color": self.color, "linestyle": self.linestyle, "marker": self.marker}
        if self.hollow:
            kw["markerfacecolor"] = "white"
        return kw


def parse_label(label: str) -> tuple[str, str, bool]:
    """'rope+yarn ft512' -> ('rope', 'yarn', True); 'alibi' -> ('alibi', 'none', False)."""
    head, _, tail = label.partition(" ")
    scheme, _, variant = head.partition("+")
    return scheme, variant or "none", tail.startswith("ft")


def scheme_color(scheme: str) -> str:
    if scheme in SCHEME_COLORS:
        return SCHEME_COLORS[scheme]
    return EXTRA_COLORS[zlib.crc32(scheme.encode()) % len(EXTRA_COLORS)]


def style_for(label: str) -> LineStyle:
    scheme, variant, finetuned = parse_label(label)
    if variant != "none":
        color, dash, marker = VARIANT_STYLES.get(variant, (scheme_color(scheme), (0, (2, 1)), "X"))
        return LineStyle(color, dash, marker, finetuned)
    return LineStyle(scheme_color(scheme), "-", "o", finetuned)


def legend_labels(rows: list[str], points: dict) -> dict[str, str]:
    """Each row's legend label: its name, with ``(= OTHER)`` where its points (``points[row]``, a list) equal an
    earlier row's exactly, so a line drawn under another is said to be there."""
    out, seen = {}, {}
    for lab in rows:
        key = tuple(points.get(lab) or ())
        out[lab] = f"{lab} (= {seen[key]})" if key and key in seen else lab
        seen.setdefault(key, lab)
    return out


def save_figure(fig, ax, path):
    """Legend outside the axes (it never covers a curve), written atomically."""
    from .fsutil import save_plot

    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return save_plot(fig, path)
