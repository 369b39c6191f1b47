"""One look per scheme, the same in every plot and report.

Colours come from Paul Tol's colour-blind-safe qualitative palettes (plus black); every RoPE variant is a
shade of one blue family told apart by its dash pattern and marker, so a reader sees at once which lines
are RoPE extensions. Fine-tuned rows (``... ftN``) keep their variant's look with hollow markers. A scheme
this table does not know gets a stable colour from its name, so a user's own scheme looks the same in
every plot too.
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
}
# RoPE scalings: shades of blue, each with its own dashes and marker.
VARIANT_STYLES = {
    "linear": ("#4477AA", (0, (6, 2)), "s"),
    "ntk": ("#2166AC", (0, (1, 1.5)), "^"),
    "dynamic-ntk": ("#6BAED6", (0, (4, 1.5, 1, 1.5)), "v"),
    "yarn": ("#08519C", (0, (8, 2, 2, 2)), "D"),
    "llama3": ("#4292C6", (0, (3, 3)), "P"),
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


def save_figure(fig, ax, path):
    """Legend outside the axes (it never covers a curve), written atomically."""
    from .fsutil import save_png

    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return save_png(fig, path)
