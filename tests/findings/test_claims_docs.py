"""Findings as code: packed records, claims decided by their rule, generated docs, the HTML page, the comparison
with the committed reference, and the committed results themselves (every claim holds, the docs are current)."""

import gzip
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pebench.findings import claims as cl
from pebench.findings.docs import regenerate, render
from pebench.findings.html import write_html
from pebench.findings.reference import compare_runs, prediction_interval
from pebench.findings.report import records_frame
from pebench.results import PACKED_RECORDS, SCHEMA_VERSION, ResultsDir
from pebench.util.errors import UsageError
from support import invoke

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "results" / "reference"


def record(label, seed, length, ppl, split="validation", ctx=128):
    return {
        "schema": SCHEMA_VERSION,
        "task": "ppl",
        "task_version": 1,
        "run": f"{label}-s{seed}",
        "scheme": label,
        "variant": "none",
        "label": label,
        "seed": seed,
        "protocol": "nonoverlap",
        "protocol_params": {},
        "length": length,
        "train_context": ctx,
        "multiple": length / ctx,
        "status": "ok",
        "reason": None,
        "metrics": {"ppl": ppl, "ppl_far": None, "bpb": math.log2(ppl), "loss": math.log(ppl)},
        "intervals": {},
        "details": {},
        "provenance": {"git_commit": "abc", "config_hash": "h", "seed": seed},
        "created": "2026-11-30T00:00:00+00:00",
        "split": split,
    }


# Two schemes, three seeds: "flat" at 4.0 (+-0.1 by seed), "breaks" 4.0 at 1x and 9.0 (+-1) at 16x.
VALUES = {
    ("flat", 128): [3.9, 4.0, 4.1],
    ("flat", 2048): [4.0, 4.1, 3.9],
    ("breaks", 128): [3.5, 3.6, 3.7],
    ("breaks", 2048): [8.0, 9.0, 10.0],
}


@pytest.fixture
def rset(tmp_path):
    rd = ResultsDir(tmp_path / "set")
    for (label, L), vals in VALUES.items():
        for seed, v in enumerate(vals):
            rd.write_record(record(label, seed, L, v))
    return rd


def write_claims(root: Path, claims: list, defaults=None) -> Path:
    p = root / cl.CLAIMS_FILE
    p.write_text(yaml.safe_dump({"defaults": defaults or {"metric": "ppl", "split": "validation"}, "claims": claims}))
    return p


def claim(id_, rel, rule, a, b=None, **kw):
    return {
        "id": id_,
        "text": f"{id_} (one seed)" if rule == "one-seed" else id_,
        "relation": rel,
        "rule": rule,
        "a": a,
        **({"b": b} if b is not None else {}),
        **kw,
    }


def test_pack_round_trip_is_byte_reproducible_and_loose_records_win(rset, tmp_path):
    dest = tmp_path / "packed"
    assert rset.pack(dest / PACKED_RECORDS) == 12
    first = (dest / PACKED_RECORDS).read_bytes()
    rset.pack(dest / PACKED_RECORDS)
    assert (dest / PACKED_RECORDS).read_bytes() == first  # no timestamp in the gzip header, sorted lines
    a, b = records_frame(rset), records_frame(ResultsDir(dest))
    key = ["label", "seed", "length"]
    assert a.sort_values(key)[key + ["ppl"]].values.tolist() == b.sort_values(key)[key + ["ppl"]].values.tolist()
    # a loose record of the same measurement replaces the packed one (never counted twice)
    ResultsDir(dest).write_record(record("flat", 0, 128, 5.5))
    again = records_frame(ResultsDir(dest))
    assert (
        len(again) == 12
        and again[(again.label == "flat") & (again.seed == 0) & (again.length == 128)].ppl.item() == 5.5
    )


def test_damaged_pack_is_named_not_fatal(tmp_path):
    root = tmp_path / "bad"
    root.mkdir()
    (root / PACKED_RECORDS).write_bytes(b"not gzip")
    skipped = []
    assert list(ResultsDir(root).iter_records(skipped)) == []
    assert "damaged" in skipped[0][1]


def test_rules_decide_from_the_numbers(rset):
    root = rset.root
    write_claims(
        root,
        [
            claim("breaks-up", "higher", "intervals", {"label": "breaks", "length": "16x"}, {"length": "1x"}),
            claim("breaks-up-paired", "higher", "paired", {"label": "breaks", "length": "16x"}, {"length": "1x"}),
            claim("flat-flat", "flat", "ratio", {"label": "flat", "length": "16x"}, {"length": "1x"}, within=1.05),
            claim("flat-lower-1x-wrong", "lower", "intervals", {"label": "flat", "length": "1x"}, {"label": "breaks"}),
            claim("overlap-16x", "overlap", "intervals", {"label": "flat", "length": 2048}, {"label": "breaks"}),
            claim("breaks-1x-lower-paired", "lower", "paired", {"label": "breaks", "length": "1x"}, {"label": "flat"}),
            claim("above", "above", "intervals", {"label": "breaks", "length": "16x"}, value=5),
            claim("one", "lower", "one-seed", {"label": "breaks", "length": "1x", "seeds": 0}, {"label": "flat"}),
        ],
    )
    got = {v.id: v.held for v in cl.check_set(root)}
    # breaks 16x: 9 +- 2.48 against 3.6 +- 0.25: disjoint; paired differences 4.5, 5.4, 6.3: excludes 0
    assert got["breaks-up"] and got["breaks-up-paired"] and got["flat-flat"] and got["above"] and got["one"]
    assert not got["flat-lower-1x-wrong"]  # flat's 1x (4.0) is above breaks' 1x (3.6)
    assert not got["overlap-16x"]  # 4.0 +- 0.25 and 9 +- 2.48 do not overlap
    # breaks 1x minus flat 1x is -0.4 for every seed: the paired interval is [-0.4, -0.4], excludes 0
    assert got["breaks-1x-lower-paired"]


def test_paired_rule_refuses_an_inconsistent_sign(tmp_path):
    rd = ResultsDir(tmp_path / "s")
    for seed, (x, y) in enumerate([(1.0, 2.0), (3.0, 2.0), (1.5, 2.0)]):  # differences -1, +1, -0.5
        rd.write_record(record("x", seed, 128, x))
        rd.write_record(record("y", seed, 128, y))
    write_claims(rd.root, [claim("x-lower", "lower", "paired", {"label": "x", "length": 128}, {"label": "y"})])
    (v,) = cl.check_set(rd.root)
    assert not v.held and "paired a-b over seeds [0, 1, 2]" in v.why


def test_bad_claims_are_one_clear_line(rset):
    cases = [
        (
            claim("c", "lower", "one-seed", {"label": "flat", "length": 128}, {"label": "breaks"}) | {"text": "no"},
            "must say 'one seed'",
        ),
        (claim("c", "sideways", "intervals", {"label": "flat", "length": 128}), "relation 'sideways'"),
        (claim("c", "flat", "ratio", {"label": "flat", "length": 128}, {"label": "breaks"}), "needs within"),
        (claim("c", "lower", "intervals", {"label": "flat", "lenght": 128}, {"label": "b"}), "unknown cell fields"),
    ]
    for c, msg in cases:
        write_claims(rset.root, [c])
        with pytest.raises(UsageError, match=msg):
            cl.load_claims(rset.root / cl.CLAIMS_FILE)


def test_markdown_table_cells_parse():
    text = (
        "x\n\n| scheme | options | 128 (1x) | lr 0.01 |\n|---|---|---|---|\n"
        "| rope | defaults | **3.76 ± 0.22 (n=3)** | 0.85 [0.81, 0.86] |\n|  | wd | 69.2% | n/a |\n"
    )
    ((header, rows),) = cl.markdown_tables(text)
    assert header == ["scheme", "options", "128 (1x)", "lr 0.01"] and rows[1][0] == "rope"  # blank repeats
    c = cl.table_value("c", rows[0][2])
    assert (c.mean, c.n) == (3.76, 3) and c.lo == pytest.approx(3.54) and c.hi == pytest.approx(3.98)
    c = cl.table_value("c", rows[0][3])
    assert (c.mean, c.lo, c.hi) == (0.85, 0.81, 0.86)
    assert cl.table_value("c", "69.2%").mean == 69.2 and cl.table_value("c", "n/a").mean is None


def test_table_claims_read_committed_tables(tmp_path):
    (tmp_path / "t.md").write_text(
        "| scheme | options | lr 0.01 |\n|---|---|---|\n| a | defaults | 3.0 |\n| a | wd | 2.5 |\n"
    )
    write_claims(
        tmp_path,
        [
            claim(
                "wd-wins",
                "lower",
                "one-seed",
                {"file": "t.md", "row": "a", "col": "lr 0.01", "where": {"options": "wd"}},
                {"where": {"options": "defaults"}},
            )
        ],
    )
    (v,) = cl.check_set(tmp_path)
    assert v.held and "2.5" in v.why and "3" in v.why


def test_json_claims_read_a_number_at_a_dotted_key(tmp_path):
    for name, ratio in (("fast", 1.2), ("slow", 1.7)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.json").write_text(json.dumps({"ratio": ratio, "run": {"wall_s": 300}, "cpu": "x"}))
    within = claim(
        "within", "below", "point", {"file": ["fast/profile.json", "slow/profile.json"], "key": "ratio"}, value=1.5
    )
    write_claims(
        tmp_path,
        [within, claim("wall", "below", "point", {"file": "fast/profile.json", "key": "run.wall_s"}, value=301)],
    )
    v_within, v_wall = cl.check_set(tmp_path)
    assert not v_within.held and "ok: fast/profile.json: ratio = 1.2" in v_within.why and "FAILS" in v_within.why
    assert "1.7 < 1.5" in v_within.why and v_wall.held
    for key, msg in (("run.steps", "'steps' is missing"), ("cpu", "'cpu' is 'x', not a number"), (None, "needs a key")):
        write_claims(tmp_path, [claim("bad", "below", "point", {"file": "fast/profile.json", "key": key}, value=1)])
        with pytest.raises(UsageError, match=msg):
            cl.check_set(tmp_path)


def test_docs_sections_are_generated_and_checked(rset, tmp_path):
    write_claims(
        rset.root, [claim("breaks-up", "higher", "intervals", {"label": "breaks", "length": "16x"}, {"length": "1x"})]
    )
    doc = tmp_path / "README.md"
    rel = rset.root.relative_to(tmp_path)
    doc.write_text(
        f"# t\n<!-- pebench:table set={rel} -->\nstale\n<!-- pebench:end -->\n"
        f"<!-- pebench:claims set={rel} -->\n<!-- pebench:end -->\n"
    )
    assert regenerate(tmp_path, check=True) == [doc] and "stale" in doc.read_text()
    regenerate(tmp_path)
    text = doc.read_text()
    assert "| breaks | **3.60 ± 0.25 (n=3)** | 9.00 ± 2.48 (n=3) | 2.50 |" in text and "**observed**" in text
    assert regenerate(tmp_path, check=True) == []
    with pytest.raises(UsageError, match="unknown doc section"):
        render("<!-- pebench:tabel set=x -->\n<!-- pebench:end -->", tmp_path)


def test_html_page_is_self_contained(rset):
    write_claims(
        rset.root, [claim("breaks-up", "higher", "intervals", {"label": "breaks", "length": "16x"}, {"length": "1x"})]
    )
    before = sorted((f.name, f.stat().st_mtime_ns) for f in rset.root.iterdir())
    r = invoke("report", "--html", "--results", rset.root)  # a committed set (it has claims): nothing rewritten
    assert r.exit_code == 0 and "nothing written" in r.output
    assert sorted((f.name, f.stat().st_mtime_ns) for f in rset.root.iterdir()) == before
    assert invoke("report", "--results", rset.root, "--out", rset.root).exit_code == 2  # never into the set
    assert sorted((f.name, f.stat().st_mtime_ns) for f in rset.root.iterdir()) == before
    out = rset.root.parent / "page"
    assert invoke("report", "--html", "--results", rset.root, "--out", out).exit_code == 0  # the plots beside
    page = (out / "report.html").read_text()
    n_png = len(list(out.glob("*.png")))
    assert n_png >= 1 and page.count('src="data:image/png;base64,') == n_png
    assert "<script" not in page and "http://" not in page and "https://" not in page and "@import" not in page
    assert '<td class="best">4.00' in page  # flat at 16x (4.0, 4.1, 3.9) is the column's lowest
    assert 'class="held"' in page and "abc" in page  # the claim, and the commit in the provenance
    # a contents list linking every table; cells never wrap (a wide table scrolls instead)
    assert "<nav><h2>Contents</h2>" in page and "white-space:nowrap" in page and "max-width:1400px" in page
    for anchor in re.findall(r"<table id='([^']+)'", page):
        assert f"href='#{anchor}'" in page


def _reference_page(tmp_path) -> Path:
    out = tmp_path / "ref-page"
    r = invoke("report", "--html", "--results", REPO / "results" / "reference", "--out", out)
    assert r.exit_code == 0, r.output
    return out / "report.html"


def test_the_html_page_uses_the_readmes_words_and_says_which_draws_stand_behind_each_table(tmp_path):
    """#82: the reference page said "held" where the README and `check` say "confirmed", and its test table's n=17
    read against the README's n=7 unexplained; every table sits in a box that scrolls rather than widening the page."""
    page = _reference_page(tmp_path).read_text()
    marks = set(re.findall(r'<span class="\w+">([^<]+)</span>', page))
    assert {"confirmed", "FAILED", "observed", "holds by construction"} <= marks and "held" not in marks
    caption = re.search(r"<caption>(ppl \(nonoverlap, test split[^<]*)</caption>", page).group(1)
    assert (
        "seeds behind these cells: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 (12 seeds; trained in bf16 and fp32)" in caption
    )
    assert page.count("<table") == page.count("<div class='wide'><table") and ".wide{overflow-x:auto}" in page


def test_the_html_page_fits_a_1280_pixel_window(tmp_path):
    """#82: headless Chromium renders the reference page at 1,280 px and the page itself never scrolls sideways
    (a wide table scrolls inside its box). Skipped where no Chromium is installed."""
    import shutil

    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless Chromium installed (chromium, chromium-browser or google-chrome)")
    page = _reference_page(tmp_path)
    probe = "<script>document.title='W'+document.documentElement.scrollWidth+'/'+window.innerWidth</script></body>"
    page.write_text(page.read_text().replace("</body>", probe))
    out = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,1000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    width, window = map(int, re.search(r"<title>W(\d+)/(\d+)</title>", out).groups())
    assert width <= window == 1280, f"the page is {width} px wide in a {window} px window"


def test_figures_for_a_paper_in_pdf_or_svg(rset, tmp_path):
    out = tmp_path / "figs"
    assert invoke("report", "--results", rset.root, "--out", out, "--figure-format", "svg").exit_code == 0
    svgs = sorted(p.name for p in out.glob("*.svg"))
    assert "plot_length.svg" in svgs and not list(out.glob("*.png"))
    assert (out / "plot_length.svg").read_text().lstrip().startswith("<?xml")
    assert "data:image/svg+xml;base64," in write_html(rset.root, out / "report.html").read_text()
    assert invoke("report", "--results", rset.root, "--out", out, "--figure-format", "pdf").exit_code == 0
    assert (out / "plot_length.pdf").read_bytes().startswith(b"%PDF")
    bad = invoke("report", "--results", rset.root, "--out", out, "--figure-format", "pdf", "--html")
    assert bad.exit_code == 2 and "--html embeds png or svg" in bad.output
    bad = invoke("report", "--results", rset.root, "--out", out, "--figure-format", "gif")
    assert bad.exit_code == 2 and "--figure-format must be one of png, pdf, svg" in bad.output


def test_prediction_interval_reference_value():
    lo, hi = prediction_interval([1.0, 2.0, 3.0])  # m 2, s 1, t(2) 4.302653 (exact), sqrt(1 + 1/3)
    assert hi - 2 == pytest.approx(4.302653 * math.sqrt(4 / 3)) and lo == pytest.approx(4 - hi)
    assert prediction_interval([1.0]) is None


def test_compare_names_cells_outside_the_expected_range(rset, tmp_path):
    mine = ResultsDir(tmp_path / "mine")
    mine.write_record(record("flat", 0, 128, 4.05))
    mine.write_record(record("breaks", 0, 2048, 40.0))
    df = compare_runs(records_frame(mine), records_frame(rset)).set_index(["label", "length"])
    assert df.loc[("flat", 128), "verdict"] == "inside" and df.loc[("flat", 128), "ref_same_seed"] == 3.9
    assert df.loc[("breaks", 2048), "verdict"] == "worse than expected"


def test_compare_judges_only_runs_trained_and_scored_as_the_reference_was(rset, tmp_path):
    """A run trained for other steps (or with another config), or scored on another stream, is not judged against
    the reference: its cells say why and the summary counts them apart."""
    from pebench.findings.reference import summary

    mine = ResultsDir(tmp_path / "mine")
    short = record("flat", 0, 128, 4.05)
    short["provenance"] = {**short["provenance"], "steps": 30}
    mine.write_record(short)
    other = record("breaks", 0, 2048, 9.0)
    other["details"] = {"tokens_scored": 1000}
    mine.write_record(other)
    ref = records_frame(rset)
    ref["steps"] = 500
    df = compare_runs(records_frame(mine), ref).set_index(["label", "length"])
    assert df.loc[("flat", 128), "verdict"] == "not comparable: trained 30 steps, the reference 500"
    assert "scored 1,000 tokens, the reference None" in df.loc[("breaks", 2048), "verdict"]
    text = summary(df.reset_index())
    assert "0 of 0 cells inside" in text and "2 cells not comparable" in text


def test_compare_never_judges_records_of_another_corpus(rset, tmp_path):
    """#82: `compare` judged records measured on another corpus against the reference without a word; such a cell
    is not comparable and says which corpus each side was measured on (records without a corpus are sotu's)."""
    mine = ResultsDir(tmp_path / "mine")
    code = record("flat", 0, 128, 4.05)
    code["provenance"] = {**code["provenance"], "corpus": "pystdlib"}
    mine.write_record(code)
    df = compare_runs(records_frame(mine), records_frame(rset)).set_index(["label", "length"])
    assert df.loc[("flat", 128), "verdict"] == "not comparable: measured on corpus pystdlib, the reference on sotu"
    code["provenance"]["corpus"] = "sotu"
    mine.write_record(code)
    assert compare_runs(records_frame(mine), records_frame(rset)).iloc[0]["verdict"] == "inside"


# ---- the committed results ---------------------------------------------------------------------------------


def test_every_committed_claim_holds_and_covers_every_findings_page():
    sets = cl.claim_sets([REPO / "results"])
    verdicts = [v for s in sets for v in cl.check_set(s)]
    failed = [f"{v.id}: {v.why}" for v in verdicts if v.bad]  # refused, or an observation its data no longer shows
    assert not failed, failed
    assert len(verdicts) >= 30
    pages = sorted((REPO / "docs" / "findings").glob("*.md"))  # the manual's pages state no findings
    assert len(pages) >= 10
    for page in pages:
        if "<!-- pebench:claims" not in page.read_text():
            pytest.fail(f"{page.name} shows no checked claims")


def test_every_claim_set_is_shown_on_a_page():
    """No claims live where no reader sees them: each set's claims are in a generated section of some page."""
    pages = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    for s in cl.claim_sets([REPO / "results"]):
        assert f"<!-- pebench:claims set={s.relative_to(REPO)}" in pages, f"{s} is shown on no page"


def test_changing_one_committed_value_fails_the_claim_that_depends_on_it(tmp_path):
    dest = tmp_path / "reference"
    shutil.copytree(REFERENCE, dest)
    lines = gzip.decompress((dest / PACKED_RECORDS).read_bytes()).decode().splitlines()
    out = []
    for line in lines:
        r = json.loads(line)
        if r["label"] == "alibi" and r["length"] == 2048 and r["task"] == "ppl" and r.get("split") == "test":
            r["metrics"]["ppl"] = 50.0  # ALiBi breaks at 16x, in one seed
        out.append(json.dumps(r))
    (dest / PACKED_RECORDS).write_bytes(gzip.compress(("\n".join(out) + "\n").encode(), mtime=0))
    res = invoke("check", dest)
    assert res.exit_code == 1
    assert "[CONTRADICTED] alibi-flat" in res.output and "50" in res.output


def test_regenerating_the_docs_changes_nothing():
    assert regenerate(REPO, check=True) == []


def test_the_readme_is_a_manual():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250


def test_the_main_job_writes_no_tracked_file():
    """What `pebench run` writes into results/ is ignored by git, so a run never changes the committed reference."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    written = [
        "results/report.md",
        "results/report.csv",
        "results/report.tex",
        "results/report.json",
        "results/plot_length.png",
        "results/plot_position.png",
        "results/profile.md",
        "results/profile.csv",
        "results/profile.json",
        "results/report.html",
        "results/runs/x/config.yaml",
        "results/records/x/a.json",
        "results/cache/sotu.bin",
        "results/jobs/x.json",
    ]
    out = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=REPO, capture_output=True, text=True)
    assert sorted(out.stdout.split()) == sorted(written)


def test_undefined_relation_needs_undefined_records(rset):
    r = record("learned", 0, 256, 1.0)
    rset.write_record({**r, "status": "undefined", "reason": "beyond the table", "metrics": None})
    rset.write_record(record("learned", 0, 128, 4.0))
    write_claims(
        rset.root,
        [
            {
                **claim("learned-undef", "undefined", "one-seed", {"label": "learned", "length": "2x"}),
                "text": "learned is undefined at 2x (one seed)",
            },
            {
                **claim("learned-1x-undef", "undefined", "one-seed", {"label": "learned", "length": "1x"}),
                "text": "learned is undefined at 1x (one seed)",
            },
        ],
    )
    got = {v.id: v.held for v in cl.check_set(rset.root)}
    assert got == {"learned-undef": True, "learned-1x-undef": False}


def test_seeds_rule_counts_the_seeds_where_the_relation_holds_by_their_own_intervals(tmp_path):
    """A phase change that came in some seeds: the claim is the count, decided per seed by its prompts' interval."""
    rd = ResultsDir(tmp_path / "s")
    # x: seed 0 clearly above 3, seed 1 above by its point but not by its interval, seed 2 clearly below
    for seed, (v, lo, hi) in enumerate([(5.0, 4.6, 5.4), (3.5, 2.5, 4.5), (1.0, 0.8, 1.2)]):
        rd.write_record({**record("x", seed, 128, v), "intervals": {"ppl": [lo, hi]}})
        rd.write_record({**record("y", seed, 128, 2.0), "intervals": {"ppl": [1.9, 2.1]}})

    def seeds_claim(id_, rel, count, of=3, **kw):
        return {
            "id": id_,
            "text": f"{id_} in {count} of {of} seeds",
            "relation": rel,
            "rule": "seeds",
            "count": count,
            "of": of,
            "a": {"label": "x", "length": 128},
            **kw,
        }

    write_claims(
        rd.root,
        [
            seeds_claim("above-1", "above", 1, value=3),
            seeds_claim("above-2", "above", 2, value=3),  # seed 1's interval reaches below 3
            seeds_claim("above-1-or-2", "above", [1, 2], value=3),
            seeds_claim("higher-2", "higher", 2, b={"label": "y"}),  # seeds 0 and 1 (2.5 > 2.1), not 2
            seeds_claim("lower-1", "lower", 1, b={"label": "y"}),
            seeds_claim("of-2", "above", 1, of=2, value=3),  # the set has 3 seeds: not what the claim is about
        ],
    )
    got = {v.id: v for v in cl.check_set(rd.root)}
    assert {k: v.held for k, v in got.items()} == {
        "above-1": True,
        "above-2": False,
        "above-1-or-2": True,
        "higher-2": True,
        "lower-1": True,
        "of-2": False,
    }
    assert "holds in seeds [0]: 1 of 3" in got["above-2"].why
    # the line's count is the rule's: seed 1 is above 3 by its point (3.5) but not by its interval
    assert got["above-1"].observed == "above in 1 of 3 draws"
    assert got["higher-2"].observed == "higher in 2 of 3 draws"
    assert "3 seed(s) with values, the claim is about 2" in got["of-2"].why
    for bad, msg in [({"text": "above in 1 seed"}, "of 3 seeds"), ({"count": 4}, "count"), ({"of": None}, "of")]:
        write_claims(rd.root, [seeds_claim("c", "above", 1, value=3) | bad])
        with pytest.raises(UsageError, match=msg):
            cl.load_claims(rd.root / cl.CLAIMS_FILE)
    write_claims(rd.root, [seeds_claim("c", "above", 1, value=3) | {"text": "above in 1 of 3 draws"}])
    assert cl.load_claims(rd.root / cl.CLAIMS_FILE)  # a draw (a seed in one precision) is counted the same way


def test_doc_sections_filter_labels_seeds_and_tags_and_include_files(rset, tmp_path):
    write_claims(
        rset.root,
        [
            claim("up", "higher", "intervals", {"label": "breaks", "length": "16x"}, {"length": "1x"})
            | {"tags": ["page"]},
            claim("flat", "flat", "ratio", {"label": "flat", "length": "16x"}, {"length": "1x"}, within=1.05),
        ],
    )
    (tmp_path / "t.md").write_text("# Its own title\n\n| a | b |\n|---|---|\n| x | 1 |\n")
    rel = rset.root.relative_to(tmp_path)
    text = render(
        f"<!-- pebench:table set={rel} labels=flat seeds=0 -->\n<!-- pebench:end -->\n"
        f"<!-- pebench:claims set={rel} tag=page -->\n<!-- pebench:end -->\n"
        "<!-- pebench:include file=t.md -->\n<!-- pebench:end -->\n",
        tmp_path,
    )
    assert "| flat | **3.90** | **4.00** | 1.03 |" in text and "| breaks |" not in text  # seed 0 alone, one row
    assert "`up`" in text and "`flat`" not in text
    assert "| x | 1 |" in text and "Its own title" not in text
    named = render(f"<!-- pebench:claims set={rel} ids=flat,up -->\n<!-- pebench:end -->\n", tmp_path)
    assert named.index("`flat`") < named.index("`up`")  # named claims, in the order named
    with pytest.raises(UsageError, match="has no claim 'gone'"):
        render(f"<!-- pebench:claims set={rel} ids=up,gone -->\n<!-- pebench:end -->\n", tmp_path)


def test_a_claim_registered_before_its_runs_is_pending_until_their_records_come(rset, tmp_path):
    """A prediction committed before its runs (``awaits``, ``registered``) is pending while any of its cells has no
    records, and neither holds nor fails; once the records are in it is decided like any claim, so it can fail, and
    says it was registered first. A registration without its date is one clear line."""
    reg = {"awaits": "pebench run --pe breaks --seeds 0,1,2", "registered": "2026-12-03"}
    now = {"label": "breaks", "length": "16x"}
    later = {**now, "config": "later"}  # a point with no records yet
    write_claims(
        rset.root,
        [
            claim("waits", "higher", "paired", later, {"length": "1x"}, **reg),
            claim("came", "higher", "paired", now, {"length": "1x"}, **reg),
            claim("came-false", "lower", "paired", now, {"length": "1x"}, **reg),
        ],
    )
    waits, came, false = cl.check_set(rset.root)
    assert waits.pending and not waits.held and "no records yet for breaks ppl @16x" in waits.why
    assert came.held and not came.pending and not false.held and not false.pending
    res = invoke("check", rset.root)
    assert res.exit_code == 1 and "[pending] waits" in res.output and "[CONTRADICTED] came-false" in res.output
    assert "said to be written 2026-12-03, before its runs (not proved from git)" in res.output
    assert (
        "observations (written after their data, never counted as findings): 3, 1 contradicted or refused" in res.output
    )
    md = cl.render_verdicts([waits, came], markdown=True)
    assert "- **pending** (paired) waits <sub>`waits`: registered 2026-12-03; no records yet" in md
    assert (
        "awaits pebench run --pe breaks --seeds 0,1,2</sub>" in md
        and "before its runs (not proved from git)</sub>" in md
    )
    from pebench.findings.html import _claims as html_claims

    page = html_claims(rset.root, records_frame(rset))[0]
    assert (
        '<span class="pending">pending</span> (paired) waits' in page and '<span class="held">observed</span>' in page
    )
    write_claims(rset.root, [claim("waits", "higher", "paired", later, {"length": "1x"}, **reg)])
    assert invoke("check", rset.root).exit_code == 0  # pending alone fails nothing
    write_claims(rset.root, [claim("waits", "higher", "paired", later, {"length": "1x"}, awaits="runs")])
    res = invoke("check", rset.root)
    assert res.exit_code != 0 and "needs awaits (the runs) and registered (YYYY-MM-DD)" in res.output


def test_seed_by_seed_section_shows_each_seeds_value_and_interval(tmp_path):
    rd = ResultsDir(tmp_path / "s")
    for seed, (v, lo, hi) in enumerate([(5.0, 4.6, 5.4), (1.0, 0.8, 1.2)]):
        rd.write_record({**record("x", seed, 128, v), "intervals": {"ppl": [lo, hi]}})
        rd.write_record(record("x", seed, 256, v + 1))
    text = render("<!-- pebench:seeds set=s metrics=ppl,bpb length=1x -->\n<!-- pebench:end -->\n", tmp_path)
    assert "| scheme | ppl, seed 0 | ppl, seed 1 | bpb, seed 0 | bpb, seed 1 |" in text
    assert f"| x | 5.00 [4.60, 5.40] | 1.00 [0.80, 1.20] | {math.log2(5):.3f} | 0.000 |" in text
    only = render("<!-- pebench:seeds set=s seeds=1 metrics=ppl length=1x -->\n<!-- pebench:end -->\n", tmp_path)
    assert "| scheme | ppl, seed 1 |" in only and "seed 0" not in only  # seeds=: the draws the section describes
    with pytest.raises(Exception, match="no records at 512 tokens"):
        render("<!-- pebench:seeds set=s metrics=ppl length=4x -->\n<!-- pebench:end -->\n", tmp_path)


def test_a_claim_on_the_first_three_bf16_seeds_alone_fails_where_it_failed_before(tmp_path):
    """Llama 3 against RoPE at 8x (test), paired, on bf16 seeds 0-2 alone: the 3-seed rerun's failure, still there
    in the evidence; on every draw the same comparison holds (the README's scalings-beat-rope)."""
    spec = {"label": "rope+llama3", "length": "8x", "precision": "bf16", "seeds": [0, 1, 2]}
    c = {
        "id": "llama3-bf16-3",
        "text": "Llama 3 beats RoPE at 8x in bf16 seeds 0-2.",
        "relation": "lower",
        "rule": "paired",
        "a": spec,
        "b": {"label": "rope"},
    }
    dest = tmp_path / "reference"
    shutil.copytree(REFERENCE, dest)
    write_claims(
        dest,
        [c, {**c, "id": "llama3-all", "a": {"label": "rope+llama3", "length": "8x"}}],
        defaults={"metric": "ppl", "split": "test"},
    )
    got = {v.id: v for v in cl.check_set(dest)}
    assert not got["llama3-bf16-3"].held and "over seeds [0/bf16, 1/bf16, 2/bf16]" in got["llama3-bf16-3"].why
    assert got["llama3-all"].held


def test_packing_into_a_set_that_holds_records_merges_or_refuses(rset, tmp_path):
    """`pack DEST` over a DEST with packed records refuses (naming both ways out) and leaves the file as it was;
    with DEST among --results it merges; --overwrite replaces."""
    dest = tmp_path / "packed"
    assert invoke("pack", dest, "--results", rset.root).exit_code == 0
    before = (dest / PACKED_RECORDS).read_bytes()
    other = ResultsDir(tmp_path / "other")
    other.write_record(record("extra", 7, 128, 5.0))
    res = invoke("pack", dest, "--results", other.root)
    assert res.exit_code != 0 and "--overwrite" in res.output and f"--results {dest}" in res.output
    assert (dest / PACKED_RECORDS).read_bytes() == before
    res = invoke("pack", dest, "--results", dest, "--results", other.root)  # a set: the change shown, not written
    assert res.exit_code != 0 and "12 records now, 13 after: 1 added (extra), 0 removed" in res.output, res.output
    assert (dest / PACKED_RECORDS).read_bytes() == before
    res = invoke("pack", dest, "--results", dest, "--results", other.root, "--update-set")
    assert res.exit_code == 0 and "packed 13 records" in res.output, res.output
    res = invoke("pack", dest, "--results", other.root, "--overwrite", "--update-set")
    assert res.exit_code == 0 and "13 records now, 1 after: 0 added, 12 removed" in res.output
    assert "packed 1 records" in res.output


def test_check_names_and_counts_damaged_evidence_and_fails(rset, tmp_path):
    """A garbage line in a set's packed records, or a truncated file, is damaged evidence: `check` names it (as
    `report` does), counts it on the set's line and exits 1 even where every claim it can decide holds."""
    write_claims(
        rset.root, [claim("breaks-16x", "higher", "paired", {"label": "breaks", "length": "16x"}, {"length": "1x"})]
    )
    dest = tmp_path / "packed"
    assert invoke("pack", dest, "--results", rset.root).exit_code == 0
    shutil.copy(rset.root / cl.CLAIMS_FILE, dest / cl.CLAIMS_FILE)
    assert invoke("check", dest).exit_code == 0
    packed = dest / PACKED_RECORDS
    good = packed.read_bytes()
    lines = gzip.decompress(good).decode().splitlines()
    packed.write_bytes(gzip.compress(("\n".join(lines + ["{not json"]) + "\n").encode(), mtime=0))
    res = invoke("check", dest)
    assert res.exit_code == 1 and "warning: skipped record" in res.output and "1 record(s) skipped" in res.output
    packed.write_bytes(good[: len(good) // 2])  # cut short
    res = invoke("check", dest)
    assert res.exit_code != 0 and "packed records damaged" in res.output, res.output


def test_a_context_section_keeps_the_metrics_it_names():
    """`pebench:context ... metrics=A,B`: the context-use table of those metrics only, in that order."""
    from pebench.findings.docs import render

    text = "<!-- pebench:context set=results/real metrics=passkey_exact,niah_single -->\n<!-- pebench:end -->"
    rows = [
        r.split("|")[2].strip()
        for r in render(text, REPO).splitlines()
        if r.startswith("| SmolLM2") or r.startswith("|  |")
    ]
    assert rows[:2] == ["passkey_exact", "niah_single"] and set(rows) == {"passkey_exact", "niah_single"}


def test_a_transfer_section_puts_a_finding_beside_its_carried_prediction():
    """`pebench:transfer`: a row per FROM:TO pair with both texts and both verdicts and adjusted p-values; an id
    that is not in its set is one line."""
    from pebench.findings.docs import render

    text = (
        "<!-- pebench:transfer from=results/reference to=results/reference "
        "pairs=pred-rope-degrades:pred-alibi-not-best-16x -->\n<!-- pebench:end -->"
    )
    out = render(text, REPO)
    (row,) = [line for line in out.splitlines() if line.startswith("| RoPE degrades")]
    assert row.count("**confirmed**, p = ") == 1 and row.count("**failed**, p = ") == 1
    with pytest.raises(UsageError, match="no claim 'nope'"):
        render(text.replace("pred-rope-degrades", "nope"), REPO)


def test_a_verdicts_section_groups_a_sets_predictions_by_state_as_check_decides_them():
    """`pebench:verdicts`: one line per state with the count and each prediction's id, the states ``check`` gives
    (the reference: two predictions failed, neither of them listed as confirmed), observations left out."""
    from pebench.findings.claims import check_set
    from pebench.findings.docs import render
    from pebench.findings.report import records_frame
    from pebench.results import ResultsDir

    out = render("<!-- pebench:verdicts set=results/reference -->\n<!-- pebench:end -->", REPO)
    verdicts = check_set(REPO / "results/reference", records_frame(ResultsDir(REPO / "results/reference")))
    lines = {line.split("**")[1]: line for line in out.splitlines() if line.startswith("- **")}
    for state in ("confirmed", "failed"):
        want = sorted(v.id for v in verdicts if v.kind == "prediction" and v.state == state)
        assert sorted(re.findall(r"<sub>`([\w-]+)`</sub>", lines[state])) == want
        assert f"({len(want)} of " in lines[state]
    assert "absolute-behind-1x`" not in out.replace("pred-absolute-behind-1x`", "")


def test_pack_refuses_one_key_measured_on_two_streams(tmp_path):
    """Two draws of one cell whose perplexity scored different numbers of tokens were measured on streams of
    different lengths under one key (the cap keys a record only where --max-tokens was given): `pack` names the
    cell and both counts, exits non-zero and writes nothing; keyed apart (the cap in the protocol) they pack."""
    one, two = ResultsDir(tmp_path / "one"), ResultsDir(tmp_path / "two")
    one.write_record({**record("rope", 0, 128, 4.0), "details": {"tokens_scored": 16383}})
    long = {**record("rope", 1, 128, 4.1), "details": {"tokens_scored": 32767}}
    two.write_record(long)
    dest = tmp_path / "packed"
    res = invoke("pack", dest, "--results", one.root, "--results", two.root)
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert "rope ppl at 128 tokens (nonoverlap, validation) was scored on 16,383 and 32,767 tokens" in res.output
    assert not (dest / PACKED_RECORDS).exists()
    for p in (two.root / "records").rglob("*.json"):
        p.unlink()
    two.write_record({**long, "protocol_params": {"max_tokens": 32768}})
    res = invoke("pack", dest, "--results", one.root, "--results", two.root)
    assert res.exit_code == 0 and "packed 2 records" in res.output, res.output
