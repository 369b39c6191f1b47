"""Trends along scale axes (findings/trends.py): Kendall's tau against hand-counted values, a log-log fit that
recovers a known power law and widens its interval away from the data, values per point at each point's own
context, rank agreement draw by draw, the claims engine's tau cell (a claim that holds, and fails when a point's
ranking reverses), a point's rerun at other rates taking its schemes' places, and the axis plot."""

import math

import pandas as pd
import pytest
import yaml
from test_claims_docs import record

from pebench.findings import claims as cl
from pebench.findings import trends as tr
from pebench.findings.report import records_frame
from pebench.results import ResultsDir


def test_kendall_tau_counts_concordant_and_discordant_pairs():
    """scipy's tau-b, against hand counts."""
    assert tr.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert tr.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert tr.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # one swap of three pairs: (2 - 1) / 3
    assert tr.kendall_tau([1, 2, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(2 * 3))  # tau-b with a tie in x
    with pytest.raises(ValueError):
        tr.kendall_tau([1], [1])


def test_a_log_log_fit_recovers_a_power_law_and_widens_away_from_the_data():
    xs = [1e12, 1e13, 1e14, 1e15]
    f = tr.fit_loglog(xs, [2 * x**0.25 for x in xs])
    assert f.b == pytest.approx(0.25) and math.exp(f.a) == pytest.approx(2) and f.b_half == pytest.approx(0, abs=1e-9)
    noisy = tr.fit_loglog(xs * 2, [2 * x**0.25 * k for x, k in zip(xs * 2, [1.05] * 4 + [0.95] * 4)])
    assert noisy.b - noisy.b_half < 0.25 < noisy.b + noisy.b_half
    inside, far = noisy.predict(1e13), noisy.predict(1e18)
    assert inside[1] < inside[0] < inside[2] and (far[2] / far[1]) > (inside[2] / inside[1])  # wider outside
    with pytest.raises(ValueError):
        tr.fit_loglog([1, 1, 1], [1, 2, 3])


def test_a_rerun_replaces_its_schemes_draws_at_the_point_only_once_it_has_all_of_them(tmp_path):
    """Point p trained schemes a, b, c; its rerun p-again (other rates) has a and b. The rerun's draws of a and b
    take the place of p's, named p, c keeps p's own, the other points and the rerun's rows are untouched or gone;
    asked for a scheme the rerun lacks, there is no frame (a point is fitted with all its reruns or none)."""
    rd = ResultsDir(tmp_path / "rerun")
    rows = [(c, sch, v) for c, v0 in (("p", 5.0), ("q", 9.0)) for sch, v in zip("abc", (v0, v0 + 1, v0 + 2))]
    rows = [(c, sch, v + seed / 10, seed) for c, sch, v in rows for seed in range(2)]
    rows += [("p-again", "a", 3.0, 0), ("p-again", "a", 3.1, 1), ("p-again", "b", 4.0, 0)]
    for config, scheme, ppl, seed in rows:
        r = record(scheme, seed, 128, ppl, ctx=128)
        r["run"], r["provenance"] = f"{scheme}-{config}-s{seed}", {**r["provenance"], "config_name": config}
        rd.write_record(r)
    df = records_frame(rd)
    assert tr.with_rerun(df, "p", "p-again", ("a", "b", "c")) is None  # c was not rerun
    got = tr.with_rerun(df, "p", "p-again", ("a", "b"))
    assert "p-again" not in set(got["config"]) and len(got) == len(df) - 4  # p's a, b out (4); the rerun's 3 as p
    assert sorted(tr.draw_values(got, "p", "a", 1).values()) == pytest.approx([3.0, 3.1])
    assert list(tr.draw_values(got, "p", "b", 1).values()) == pytest.approx([4.0])  # the rerun's one draw
    assert sorted(tr.draw_values(got, "p", "c", 1).values()) == pytest.approx([7.0, 7.1])  # not rerun: p's own
    assert tr.draw_values(got, "q", "a", 1) == tr.draw_values(df, "q", "a", 1)


def _axis_set(tmp_path, ratios: dict, spread: float = 1 / 20):
    """A scheme 'a' whose 16x/1x ratio is ``ratios[config]`` times (1 + (seed - 1) * spread), seeds 0-2."""
    rd = ResultsDir(tmp_path / "axis")
    for config, ratio in ratios.items():
        for seed in range(3):
            for L, v in ((128, 4.0), (2048, 4.0 * ratio * (1 + (seed - 1) * spread))):
                r = record("a", seed, L, v, ctx=128)
                r["run"] = f"a-{config}-s{seed}"
                r["provenance"] = {**r["provenance"], "config_name": config}
                rd.write_record(r)
    return records_frame(rd)


def test_an_axis_fit_takes_the_point_as_its_unit_and_states_no_slope_on_three_points(tmp_path):
    """16x/1x ratios of 1.5, 2, 3 (+- a seed's offset) at x = 1, 2, 4: the line goes through the three points'
    means (its interval on 1 degree of freedom, not on the nine draws' 7), and three points state no slope."""
    ratios = {"p1": 1.5, "p2": 2.0, "p4": 3.0}
    df = _axis_set(tmp_path, ratios)
    xs = {"p1": 1.0, "p2": 2.0, "p4": 4.0}
    f = tr.fit_axis(df, xs, "a")
    means = [sum(math.log(r * (1 + (s - 1) / 20)) for s in range(3)) / 3 for r in ratios.values()]
    on_means = tr.fit_loglog(list(xs.values()), [math.exp(m) for m in means])
    assert f.points == 3 and f.ns == (3, 3, 3) and f.fit.n == 3  # three units, not nine
    assert f.fit.b == pytest.approx(on_means.b) and f.fit.b_half == pytest.approx(on_means.b_half)
    nine = tr.fit_loglog(
        [x for x in xs.values() for _ in range(3)], [r * (1 + (s - 1) / 20) for r in ratios.values() for s in range(3)]
    )
    assert f.fit.b_half > 3 * nine.b_half  # t(1) = 12.7 on three means, against t(7) on nine draws
    assert not f.stated and "3 points" in tr.fit_table(df, xs, ["a"], {}, "slope")[2]
    assert tr.fit_axis(df, xs, "absent") is None


def test_the_lack_of_fit_test_keeps_a_line_and_rejects_a_jump(tmp_path):
    """Four points on a power law (ratio = x^0.25, within-point scatter 5%) keep their line (lack-of-fit p large)
    and state a slope near 0.25 with its extrapolation; a jump then a level-off (1.5, 4.7, 4.7, 4.7 - the shape
    of RoPE's budget axis) is rejected, and the table says so instead of a slope. The F statistic is checked by
    hand on the jump."""
    xs = {"p1": 1.0, "p2": 2.0, "p4": 4.0, "p8": 8.0}
    line = _axis_set(tmp_path / "line", {c: x**0.25 for c, x in xs.items()})
    f = tr.fit_axis(line, xs, "a")
    assert f.points == 4 and f.lof_p > 0.5 and f.stated and f.fit.b == pytest.approx(0.25, abs=0.01)
    row = tr.fit_table(line, xs, ["a"], {"far": 64.0}, "slope")[2]
    assert "+0.250 ±" in row and row.rstrip(" |").split("| ")[-1].startswith("2.83")  # 64^0.25 = 2.83
    jump_ratios = {"p1": 1.5, "p2": 4.7, "p4": 4.7, "p8": 4.7}
    jump = _axis_set(tmp_path / "jump", jump_ratios, spread=1 / 50)
    g = tr.fit_axis(jump, xs, "a")
    assert g.lof_p < 1e-6 and not g.stated
    assert "rejected (lack of fit)" in tr.fit_table(jump, xs, ["a"], {"far": 64.0}, "slope")[2]
    # by hand: least squares over the 12 draws; pure error about each point's mean (8 dof), the rest on 2 dof
    import numpy as np
    from scipy import stats

    lx = np.log([x for x in xs.values() for _ in range(3)])
    ly = np.log([r * (1 + (s - 1) / 50) for r in jump_ratios.values() for s in range(3)])
    resid = ly - np.polyval(np.polyfit(lx, ly, 1), lx)
    pure = sum(((ly[i : i + 3] - ly[i : i + 3].mean()) ** 2).sum() for i in range(0, 12, 3))
    F = ((resid**2).sum() - pure) / 2 / (pure / 8)
    assert g.lof_p == pytest.approx(stats.f.sf(F, 2, 8), rel=1e-6)


def test_a_point_where_a_scheme_was_not_run_shows_a_dash_and_leaves_its_fit_one_point_short(tmp_path):
    """Scheme a at four points (ratio x^0.25 times 0.95, 1, 1.05 over the seeds: 0.999 at x = 1), scheme b (the
    same) at three: b's row puts "-" and 0 draws under the point it lacks, so each row's entries stand under the
    header's points, and b's fit has three points and states no slope while a's states one; a scheme run at one
    point only has no row."""
    xs = {"p1": 1.0, "p2": 2.0, "p4": 4.0, "p8": 8.0}
    df = _axis_set(tmp_path, {c: x**0.25 for c, x in xs.items()})
    b = df[df["config"] != "p4"].assign(label="b", scheme="b")
    both = pd.concat([df, b], ignore_index=True)
    table = tr.fit_table(both, xs, ["a", "b"], {}, "slope")
    assert table[0].startswith("| scheme | 16x/1x at each point (p1, p2, p4, p8)")
    row_a, row_b = table[2].split(" | "), table[3].split(" | ")
    assert row_a[1] == "0.999 -> 1.19 -> 1.41 -> 1.68" and row_a[2] == "3/3/3/3" and row_a[4].startswith("+0.250")
    assert row_b[1] == "0.999 -> 1.19 -> - -> 1.68" and row_b[2] == "3/3/0/3" and "3 points (4 needed)" in row_b[4]
    lone = pd.concat([df, df[df["config"] == "p1"].assign(label="c", scheme="c")], ignore_index=True)
    assert len(tr.fit_table(lone, xs, ["a", "c"], {}, "slope")) == 3  # c, at one point, has no row


def _scale_set(tmp_path, reverse_at_64=False):
    """Three schemes at two points (context 128 and 64), three seeds: at 16x a < b < c at both points (or the
    order reversed at context 64)."""
    rd = ResultsDir(tmp_path / "scale")
    for config, ctx in (("tiny", 128), ("tiny-ctx64", 64)):
        for seed in range(3):
            for rank, label in enumerate(["a", "b", "c"]):
                at16 = 4.0 + (2 - rank if reverse_at_64 and config == "tiny-ctx64" else rank) + seed / 10
                for L, v in ((ctx, 4.0 + seed / 10), (16 * ctx, at16)):
                    r = record(label, seed, L, v, ctx=ctx)
                    r["run"] = f"{label}-{config}-s{seed}"
                    r["provenance"] = {**r["provenance"], "config_name": config}
                    rd.write_record(r)
    return rd


def test_values_per_point_are_at_each_points_own_context_and_agreement_is_per_draw(tmp_path):
    df = records_frame(_scale_set(tmp_path))
    vals = {(v.config, v.label): v for v in tr.point_values(df, ["tiny", "tiny-ctx64"], ["a", "c"], 16)}
    assert vals[("tiny-ctx64", "c")].mean == pytest.approx(6.1) and vals[("tiny-ctx64", "c")].n == 3
    assert tr.ratio_by_draw(df, "tiny", "c", 16, 1)[(0, "fp32")] == pytest.approx(6.0 / 4.0)
    assert tr.rank_agreement(df, ["a", "b", "c"], "tiny", "tiny-ctx64", 16) == {(s, "fp32"): 1.0 for s in range(3)}
    rev = records_frame(_scale_set(tmp_path / "r", reverse_at_64=True))
    assert set(tr.rank_agreement(rev, ["a", "b", "c"], "tiny", "tiny-ctx64", 16).values()) == {-1.0}


@pytest.mark.parametrize("reverse", [False, True])
def test_a_claim_on_rank_agreement_holds_and_fails_when_a_point_reverses_the_ranking(tmp_path, reverse):
    rd = _scale_set(tmp_path, reverse_at_64=reverse)
    claim = {
        "id": "same-ranking",
        "text": "Trained at context 64 and 128 the three schemes rank alike at 16x (Kendall's tau above 0.5).",
        "a": {"tau": {"labels": ["a", "b", "c"], "configs": ["tiny", "tiny-ctx64"], "length": "16x"}},
        "relation": "above",
        "rule": "intervals",
        "value": 0.5,
    }
    (rd.root / cl.CLAIMS_FILE).write_text(yaml.safe_dump({"claims": [claim]}))
    (v,) = cl.check_set(rd.root)
    assert v.held is not reverse, v.why
    assert "Kendall's tau of a, b, c at 16x, tiny vs tiny-ctx64" in v.why


def test_the_axis_plot_draws_one_line_per_scheme(tmp_path):
    df = records_frame(_scale_set(tmp_path))
    out = tmp_path / "axis.png"
    tr.plot_axis(df, [("tiny-ctx64", 64), ("tiny", 128)], ["a", "b", "c"], 16, out, "training context", ratio_to=1)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_a_docs_table_of_one_point_holds_that_points_runs_alone(tmp_path):
    from pebench.findings.docs import render

    _scale_set(tmp_path)
    text = render("<!-- pebench:table set=scale config=tiny-ctx64 -->\n<!-- pebench:end -->\n", tmp_path)
    assert "| 64 (1x) |" in text and "| 1024 (16x) |" in text and "(1x) | 128 (2x)" not in text
    assert "| c | **4.10 ± 0.25 (n=3)** | 6.10 ± 0.25 (n=3) |" in text  # this point's three draws, not six
