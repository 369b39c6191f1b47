"""Findings as data: each claim names the cells it compares, the relation and the statistical rule; ``check``
decides it from the committed evidence (packed records, or a committed table where a result set has no records)
and says which numbers decided it.

A claims file (``claims.yaml`` beside a result set) holds ``defaults`` (any cell field) and ``claims``::

    claims:
    - id: alibi-flat                      # unique, the name a failure is reported by
      text: ALiBi stays flat from 1x to 16x.
      a: {label: [alibi, shaw, t5], length: 16x}   # a list expands: the claim must hold for each
      b: {length: 1x}                     # fields b does not name are a's
      relation: flat                      # lower | higher | flat | overlap | above | below | undefined
      within: 1.05                        # flat: max(a/b, b/a) of the means
      value: 0                            # above/below: the threshold; overlap without b: the value a's interval
                                          # must cover (no difference from it shown: a fit's slope told from 0)
      rule: intervals                     # intervals | paired | one-seed | ratio | point
      zip: false                          # true: a's and b's lists pair element by element, not every with every

Rules: ``intervals`` disjoint 95% intervals (over seeds; one seed's trial interval where a task has one),
``paired`` a per-seed difference whose 95% interval excludes 0, ``one-seed`` the point values (the text must say
"one seed"), ``ratio`` the means within ``within`` (flat), ``point`` single measurements such as benchmark medians,
``seeds`` the relation decided in each seed on its own (by that seed's trial intervals where a task has them, else
its values): the claim holds when the number of seeds where it holds is ``count`` (a number, or a list of the
numbers allowed) out of ``of`` seeds, which the text must say ("2 of 3 seeds"). It states an outcome that differs
between seeds, such as whether a phase change came, as what it is: a count.

A prediction written before its runs adds ``awaits`` (the runs or command that decide it) and ``registered``
(YYYY-MM-DD): while any of its cells has no records it is pending, neither held nor failed (its text is still
linted); once they are in it is decided like any other claim, and its registration is shown with its numbers.
Such a claim predates the git proof below: it is an observation like the rest, its date kept as what it said.

Two kinds of claim. An **observation** (the default, ``kind: observation``) was written after its data was seen: it
is decided as above, shown as what it is ("observed", with the count of draws that show it), and never counted as a
confirmed finding; one that its data no longer shows is *contradicted*, and ``check`` fails. A **prediction**
(``kind: prediction``) is committed before any record that decides it exists: ``check`` finds the commit that
registered it in git (``registration``), refuses it if its YAML changed since, and decides it by a test (``power``:
``paired``, ``welch``, ``equivalence``, ``one-sample``, ``point``) against its smallest effect that matters
(``effect``) on its ``draws`` fresh draws (pending until all are in). Where a record it reads was measured, or its
model trained, at a commit that does not descend from the registration (or trained from a changed tree), its order
is not proved and it counts only against itself (``settle``): failed where its test fails, refused where it would be
confirmed. ``withdrawn`` takes it out of the count only where the withdrawal precedes every record it reads
(``withdraw``). A prediction no data could contradict (relation ``undefined``: a scheme undefined by construction)
is a **property**, shown apart and never counted. A set's predictions are one family: their p-values are adjusted by
Benjamini-Hochberg (final once none of them is pending: until then a decided one stays pending, its verdict so
far shown as provisional), and a prediction is confirmed when its adjusted p is below 0.05, failed otherwise; a failed
prediction stays on its page as failed (``check`` passes: a failure is a finding). A prediction also records what
the power function said when it was registered (``power``: the text ``pebench power`` prints).

A claim that reads a run that did not train (``untrained``: its 1x perplexity above its point's NoPE) beyond its
training context is refused: a model that did not learn makes no extrapolation claim.

A cell from records: ``label``, ``length`` (tokens or ``Nx``), ``metric``, ``split``, ``protocol``, ``seeds``,
``precision``, ``config`` (the runs' config name: one point of a scale suite, ``tiny-d64``, whose ``Nx`` is of its
own training context), ``unit`` (``draw``, the default: a value per trained model; ``window``: one model's value
per full evaluation window, from its record's ``window_losses``, paired window by window; for an outside model,
which is one draw). A rank agreement between two points: ``tau`` (``{labels: [...], configs: [A, B], length:
16x}``), Kendall's tau of the schemes' values at the two points, one value per draw.
A cell from a committed markdown table: ``file``, ``row``, ``col`` (header text), optional ``table`` (index) and
``where`` ({column: value} for rows keyed by more than their first column). A number from a committed JSON file
(such as the ``profile.json`` a run writes): ``file`` (ending ``.json``) and ``key`` (a dotted path into it); with
``per_draw: true`` (and optional ``seeds``), the file's ``draws`` give one value per trained model, with the commit
it was trained at, which a prediction is decided on as on records.

The package by job: ``spec`` (the file's format, checked on load, and ``Verdict``), ``cells`` (the cells a claim
compares, from records, tables and JSON files), ``decide`` (each claim by its rule or test, a set's together, its
scoreboard), ``order`` (the order proof, settling and withdrawal), ``render`` (what ``check`` prints and the pages
show; the power a prediction asks for). Its public names are here.
"""

from __future__ import annotations

from ...results import CLAIMS_FILE
from ...util.errors import UsageError
from .cells import Evidence, markdown_tables, prompts_of, ratio_cell, table_value, untrained_runs
from .decide import adjust, check_claim, check_set, observed_count, paired_spec, scoreboard
from .order import prove_order, refuse, settle, withdraw
from .render import MARKS, check_engines, check_sets, claim_sets, power_of, render_verdicts
from .spec import KINDS, RELATIONS, RULES, Verdict, load_claims, parse_length

__all__ = [
    "CLAIMS_FILE",
    "KINDS",
    "MARKS",
    "RELATIONS",
    "RULES",
    "Evidence",
    "UsageError",
    "Verdict",
    "adjust",
    "check_claim",
    "check_engines",
    "check_set",
    "check_sets",
    "claim_sets",
    "load_claims",
    "markdown_tables",
    "observed_count",
    "paired_spec",
    "parse_length",
    "power_of",
    "prompts_of",
    "prove_order",
    "ratio_cell",
    "refuse",
    "render_verdicts",
    "scoreboard",
    "settle",
    "table_value",
    "untrained_runs",
    "withdraw",
]
