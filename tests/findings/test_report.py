"""Reports from records alone: confidence intervals, every format, plots, filters, comparisons."""

import json
import math

import pandas as pd
import pytest

from pebench.cli import app
from pebench.findings import report as rp
from pebench.results import SCHEMA_VERSION, ResultsDir
from support import runner


def rec(run, scheme, seed, L, ppl, protocol="nonoverlap", params=None, T=16, status="ok"):
    loss = math.log(ppl) if ppl else None
    return {
        "schema": SCHEMA_VERSION,
        "task": "ppl",
        "run": run,
        "scheme": scheme,
        "variant": "none",
        "label": scheme,
        "seed": seed,
        "protocol": protocol,
        "protocol_params": params or {},
        "length": L,
        "train_context": T,
        "multiple": L / T,
        "status": status,
        "reason": None,
        "metrics": {"loss": loss, "ppl": ppl, "ppl_far": ppl, "bpb": loss / math.log(2) if loss else None},
        "intervals": {},
        "details": {
            "tokens_scored": 100,
            "windows": 1,
            "far_tokens": 10,
            "far_n": 16,
            "far_distance": T,
            "position_buckets": [{"lo": 1, "hi": L - 1, "tokens": 100, "loss": loss or 0}],
        },
        "provenance": {},
        "created": "2026-01-01T00:00:00+00:00",
    }


@pytest.fixture
def results(tmp_path):
    rd = ResultsDir(tmp_path / "res")
    for seed, (a, b) in enumerate([(10.0, 11.0), (12.0, 14.0), (11.0, 15.0)]):
        rd.write_record(rec(f"rope-s{seed}", "rope", seed, 16, a))
        rd.write_record(rec(f"rope-s{seed}", "rope", seed, 64, b))
    rd.write_record(rec("alibi-s0", "alibi", 0, 16, 9.0))
    rd.write_record(rec("alibi-s0", "alibi", 0, 64, 9.5))
    rd.write_record(rec("learned-s0", "learned", 0, 16, 13.0))
    rd.write_record(rec("learned-s0", "learned", 0, 64, None, status="undefined"))
    rd.write_record(rec("alibi-s0", "alibi", 0, 64, 9.9, protocol="sliding", params={"stride": 8}))
    return rd


def test_confidence_interval_by_hand():
    m, ci = rp.mean_ci([10.0, 12.0, 11.0])
    sd = math.sqrt(((10 - 11) ** 2 + (12 - 11) ** 2 + 0) / 2)
    assert m == 11.0 and ci == pytest.approx(4.302653 * sd / math.sqrt(3))
    assert rp.mean_ci([5.0]) == (5.0, 0.0)


def test_table_groups_seeds(results):
    t = rp.build_table(rp.records_frame(results))
    m, ci, n, _ = t.cells[("rope", 64)]
    assert n == 3 and m == pytest.approx(40 / 3) and ci > 0
    assert t.cells[("learned", 64)][0] is None
    assert t.best(16) == "alibi"
    assert t.ratio["alibi"] == pytest.approx(9.5 / 9.0)
    assert t.ratio["learned"] is None


def test_ratio_metric_is_per_run(results):
    t = rp.build_table(rp.records_frame(results), metric="ratio")
    expected = [11 / 10, 14 / 12, 15 / 11]
    assert t.cells[("rope", 64)][0] == pytest.approx(sum(expected) / 3)
    assert t.cells[("rope", 16)][0] == pytest.approx(1.0)


def test_every_format_written_and_parseable(results):
    for fmt in ("table", "md", "csv", "latex", "json"):
        r = runner.invoke(app, ["report", "--format", fmt, "--results", str(results.root)])
        assert r.exit_code == 0, r.output
    root = results.root
    df = pd.read_csv(root / "report.csv")
    assert set(df["label"]) == {"rope", "alibi", "learned"} and "ci95" in df
    data = json.loads((root / "report.json").read_text())
    assert data["protocol"] == "nonoverlap" and data["lengths"] == [16, 64]
    tex = (root / "report.tex").read_text()
    assert r"\toprule" in tex and r"\textbf{9.00}" in tex and r"$\pm$" in tex
    md = (root / "report.md").read_text()
    assert "**9.00**" in md and "(n=3)" in md and "| undefined |" in md
    for png in ("plot_length.png", "plot_position.png"):
        data = (root / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_filters_and_protocols(results):
    t = rp.build_table(rp.records_frame(results), protocol="sliding-s8")
    assert t.rows == ["alibi"] and t.cells[("alibi", 64)][0] == 9.9
    t = rp.build_table(rp.records_frame(results), schemes=["rope"])
    assert t.rows == ["rope"]
    r = runner.invoke(app, ["report", "--protocol", "fixed-k9", "--results", str(results.root)])
    assert r.exit_code == 1 and "protocols present" in r.output


def test_compare_two_folders(results, tmp_path):
    other = ResultsDir(tmp_path / "other")
    other.write_record(rec("alibi-s0", "alibi", 0, 16, 8.0))
    other.write_record(rec("alibi-s0", "alibi", 0, 64, 8.5))
    r = runner.invoke(app, ["report", "--compare", str(results.root), "--compare", str(other.root), "--pe", "alibi"])
    assert r.exit_code == 0, r.output
    lines = [x.split() for x in r.output.splitlines() if x.strip().startswith("alibi")]
    assert ["alibi", "16", "9.000", "8.000", "-1.000"] in lines


def test_failed_runs_are_left_out(results):
    (results.runs / "alibi-s0").mkdir(parents=True)
    (results.runs / "alibi-s0" / "config.yaml").write_text("{}")
    results.set_status("alibi-s0", state="failed")
    r = runner.invoke(app, ["report", "--format", "md", "--results", str(results.root)])
    assert r.exit_code == 0 and "| alibi |" not in r.output and "failed during training" in r.output


def test_record_fields_are_one_definition_the_writer_enforces_and_the_readme_lists(tmp_path):
    from pathlib import Path

    from pebench.results import RECORD_FIELDS, check_record_fields

    r = rec("rope-s0", "rope", 0, 16, 10.0)
    check_record_fields(r)
    rd = ResultsDir(tmp_path / "res")
    with pytest.raises(ValueError, match=r"missing \['created'\]"):
        rd.write_record({k: v for k, v in r.items() if k != "created"})
    with pytest.raises(ValueError, match=r"unknown \['extra'\]"):
        rd.write_record({**r, "extra": 1})
    assert not rd.records.exists()  # nothing written
    readme = (Path(__file__).resolve().parents[2] / "docs" / "manual" / "commands.md").read_text()
    section = readme.split("## Records", 1)[1].split("\n## ", 1)[0]
    assert [f for f in RECORD_FIELDS if f"`{f}`" not in section] == []
    from pebench.eval.tasks import TASKS

    for task in TASKS:  # every task's metrics and detail fields too
        names = [m.name for m in TASKS.get(task).metrics] + list(TASKS.get(task).fields)
        assert [f for f in names if f"`{f}`" not in section] == [], task


def test_a_damaged_record_is_named_and_the_ratio_says_its_1x_is_missing(results):
    cut = results.records / "alibi-s0" / "alibi__nonoverlap__L16.json"
    cut.write_text(cut.read_text()[:40])  # truncated mid-write by something else
    future = results.records / "rope-s0" / "rope__nonoverlap__L16.json"
    future.write_text(json.dumps({**json.loads(future.read_text()), "schema": 99}))
    r = runner.invoke(app, ["report", "--format", "md", "--results", str(results.root)])
    assert r.exit_code == 0, r.output
    assert f"warning: skipped record {cut}: not valid JSON" in r.output
    assert f"warning: skipped record {future}: record schema 99, this pebench reads schema 2" in r.output
    assert "warning: 2 record file(s) skipped" in r.output
    t = rp.build_table(rp.records_frame(results))
    assert t.ratio["alibi"] is None and t.ratio_text("alibi") == "n/a (1x missing)"  # no silent 64/64 ratio
    assert t.ratio_text("learned") == "n/a"  # 1x present, the longest length undefined
    assert "| alibi | not evaluated | **9.50** | n/a (1x missing) |" in r.output and "ppl 4x/1x" in r.output


def test_each_scheme_has_one_stable_distinct_style_and_rope_variants_are_one_blue_family():
    import colorsys

    from matplotlib.colors import to_rgb

    from pebench.util.style import CONTEXT_LINE, SCHEME_COLORS, VARIANT_STYLES, style_for

    schemes = ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"]
    colors = [style_for(s).color for s in schemes]
    assert len(set(colors)) == len(colors) and len(set(SCHEME_COLORS.values())) == len(SCHEME_COLORS)
    variants = [style_for(f"rope+{v}") for v in VARIANT_STYLES]
    assert len({v.linestyle for v in variants}) == len(variants)  # distinct dashes
    assert len({v.marker for v in variants}) == len(variants)
    # every variant a colour of its own, far from each other's and from every scheme's (not five near blues)
    pool = [to_rgb(v.color) for v in variants] + [to_rgb(c) for c in SCHEME_COLORS.values()]
    for i, v in enumerate(variants):
        far = min(sum((a - b) ** 2 for a, b in zip(pool[i], q)) ** 0.5 for j, q in enumerate(pool) if j != i)
        assert far > 0.12, (v, far)
        assert v.linestyle not in ("-", CONTEXT_LINE["linestyle"]) and v.color != CONTEXT_LINE["color"]
    hues = sorted(colorsys.rgb_to_hsv(*to_rgb(v.color))[0] * 360 for v in variants)
    assert hues[-1] - hues[0] > 60  # hues apart, not one blue family
    from pebench.util.style import legend_labels

    pts = {"rope+ntk": [(256, 3.1)], "rope+dynamic-ntk": [(256, 3.1)], "rope+yarn": [(256, 2.9)]}
    assert legend_labels(list(pts), pts) == {
        "rope+ntk": "rope+ntk",
        "rope+dynamic-ntk": "rope+dynamic-ntk (= rope+ntk)",
        "rope+yarn": "rope+yarn",
    }
    ft = style_for("rope+yarn ft512")
    assert ft.hollow and (ft.color, ft.linestyle) == (style_for("rope+yarn").color, style_for("rope+yarn").linestyle)
    assert style_for("my-scheme") == style_for("my-scheme")  # a user's scheme: stable too


def test_a_cell_without_a_value_says_why(tmp_path):
    """Undefined by the scheme, failed, not a number, a value the metric cannot take (ppl -1: never averaged in),
    and no record at all are told apart in the cells; a damaged value beside a good one leaves the good one."""
    rd = ResultsDir(tmp_path / "res")
    rd.write_record(rec("a-s0", "a", 0, 16, 5.0))
    rd.write_record(rec("a-s0", "a", 0, 64, None, status="undefined"))
    rd.write_record(rec("b-s0", "b", 0, 16, 5.0))
    rd.write_record(rec("b-s0", "b", 0, 64, None, status="failed"))
    rd.write_record(rec("c-s0", "c", 0, 16, 5.0))
    bad = rec("c-s0", "c", 0, 64, 5.0)
    bad["metrics"]["ppl"] = -1.0
    rd.write_record(bad)
    rd.write_record(rec("d-s0", "d", 0, 16, 5.0))
    rd.write_record(rec("e-s0", "e", 0, 16, float("nan")))
    rd.write_record(rec("e-s1", "e", 1, 16, 6.0))
    rd.write_record(rec("e-s0", "e", 0, 64, float("nan")))
    t = rp.build_table(rp.records_frame(rd))
    assert [t.text(x, 64) for x in "abcde"] == ["undefined", "failed", "invalid", "not evaluated", "not a number"]
    assert t.text("e", 16) == "6.00" and t.cells[("e", 16)][2] == 1
    assert "| d | **5.00** | not evaluated |" in rp.to_markdown(t)


def test_a_table_mixing_tokenizers_says_its_perplexity_is_per_token(tmp_path):
    """A byte model's perplexity is per byte, an outside model's per subword: a table with both says so and points
    to bpb; a table of one tokenizer says nothing more."""
    rd = ResultsDir(tmp_path / "res")
    for run, V, ppl in (("byte-s0", 256, 4.0), ("hf-m", 49152, 20.0)):
        r = rec(run, run, 0, 16, ppl)
        r["chance"] = {"ppl": float(V)}
        rd.write_record(r)
    mixed = rp.to_markdown(rp.build_table(rp.records_frame(rd)))
    assert mixed.startswith("Metric: ppl per token (tokenizers differ across these rows: compare them by bpb)")
    one = rp.to_markdown(rp.build_table(rp.records_frame(rd), schemes=["byte-s0"]))
    assert one.startswith("Metric: ppl; protocol")


def _trained(r, config="tiny", steps=500):
    r["provenance"] = {"config_name": config, "steps": steps}
    return r


def test_a_row_never_pools_draws_of_different_configs_or_step_counts(tmp_path):
    """#82: a 20-step run beside 5-step runs was reported as one scheme n=4. Runs of one config at different step
    counts get a row each (``rope [20 steps]``); records of several configs are refused in one line naming them,
    and --config picks one."""
    rd = ResultsDir(tmp_path / "mix")
    for seed, steps, ppl in [(0, 5, 20.0), (1, 5, 21.0), (2, 5, 19.0), (3, 20, 10.0)]:
        rd.write_record(_trained(rec(f"rope-s{seed}", "rope", seed, 16, ppl), steps=steps))
    t = rp.build_table(rp.records_frame(rd))
    assert t.cells[("rope [5 steps]", 16)][2] == 3 and t.cells[("rope [20 steps]", 16)][:3] == (10.0, 0.0, 1)
    assert "rope" not in t.rows
    rd.write_record(_trained(rec("rope-d64-s0", "rope", 0, 16, 7.0), config="tiny-d64"))
    with pytest.raises(rp.PebenchError, match=r"2 configs \(tiny: 4 runs, tiny-d64: 1 runs\).*--config"):
        rp.build_table(rp.records_frame(rd))
    assert rp.build_table(rp.records_frame(rd), config="tiny-d64").cells[("rope", 16)][0] == 7.0
    res = runner.invoke(
        app, ["report", "--results", str(rd.root), "--config", "tiny-d64", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "--results", str(rd.root)])
    assert res.exit_code == 1 and "Traceback" not in res.output and "--config NAME" in res.output


def test_a_table_of_runs_far_short_of_their_configs_steps_says_so_beside_it(tmp_path):
    """#82: at 40 steps the quick look's table read about the same for every scheme and only `compare` said the
    runs were under-trained; the table says it now (console and report.md), and a run at its config's steps is not
    flagged."""
    rd = ResultsDir(tmp_path / "short")
    rd.write_record(_trained(rec("rope-s0", "rope", 0, 16, 19.5), steps=40))
    assert rp.build_table(rp.records_frame(rd)).note.startswith("note: trained 40 steps, 8% of the tiny config's 500")
    res = runner.invoke(app, ["report", "--results", str(rd.root)])
    assert res.exit_code == 0 and "under-trained" in res.output
    assert "under-trained" in (rd.root / "report.md").read_text()
    full = ResultsDir(tmp_path / "full")
    full.write_record(_trained(rec("rope-s0", "rope", 0, 16, 3.7), steps=500))
    assert rp.build_table(rp.records_frame(full)).note == ""


def test_records_are_checked_for_types_on_read_and_pack_names_what_it_cannot_read(tmp_path):
    """#82: a record whose length was the string "256" became a second column; `pack` of a folder with a truncated
    record said "packed 17" of 18. A record of the wrong type is skipped with its field named; `pack` refuses in
    one line naming every file it could not read, and writes nothing."""
    from pebench.results import read_record

    good = rec("rope-s0", "rope", 0, 16, 10.0)
    assert read_record(json.dumps(good))[1] is None
    for field, value in [("length", "256"), ("seed", 1.5), ("status", "fine"), ("label", None), ("provenance", [])]:
        bad, why = read_record(json.dumps({**good, field: value}))
        assert bad is None and why.startswith("fields of the wrong type: " + field), why
    rd = ResultsDir(tmp_path / "r")
    rd.write_record(good)
    rd.write_record(rec("rope-s0", "rope", 0, 64, 12.0))
    cut = rd.record_path(rec("rope-s0", "rope", 0, 64, 12.0))
    cut.write_text(cut.read_text()[:50])
    res = runner.invoke(app, ["pack", str(tmp_path / "p"), "--results", str(rd.root)])
    assert res.exit_code == 1 and "1 record file(s) could not be read" in res.output and cut.name in res.output
    assert not (tmp_path / "p").exists()
