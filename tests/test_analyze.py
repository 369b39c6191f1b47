"""`pebench analyze`: attention statistics on attention whose answer is known, the encodings' numbers against
their definitions, real PNGs, and the command on a run of every scheme."""

import math

import numpy as np
import pytest
import torch
import yaml

from pebench.analysis.attention import (
    attention_stats,
    bin_edges,
    distance_bin,
    entropy_ceiling,
    n_bins,
    query_stats,
    windows_of,
)
from pebench.analysis.encodings import (
    bias_by_distance,
    effective_window,
    relative_vector_norms,
    rope_bound,
    sinusoid_like,
    table_components,
    table_spectrum,
)
from pebench.analysis.summary import spearman
from pebench.cli import app
from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from pebench.model.pe.alibi import alibi_slopes
from support import SCHEMES, micro, runner, tiny_model_config


def _uniform(n_q, K, offset=0):
    i = torch.arange(offset, offset + n_q)[:, None]
    mask = torch.arange(K)[None, :] <= i
    return (mask / mask.sum(-1, keepdim=True)).double()[None, None]


def test_uniform_attention_has_distance_half_i_and_entropy_log_i_plus_one():
    p = _uniform(32, 64, offset=32)  # queries 32..63 of a 64-token window
    mean_d, ent, far, sink, mass = query_stats(p, 32, far=40)
    i = torch.arange(32, 64).double()
    assert torch.allclose(mean_d[0, 0], i / 2)
    assert torch.allclose(ent[0, 0], torch.log(i + 1))
    assert torch.allclose(far[0, 0], torch.clamp(i - 40 + 1, min=0) / (i + 1))  # keys at distance >= 40
    assert torch.allclose(sink[0, 0], 1 / (i + 1))  # uniform: key 0 takes 1 / (i + 1)
    assert torch.allclose(mass.sum(-1), torch.ones(1, 1, 32, dtype=torch.float64))
    # query 40: 1 key at distance 0, 1 at 1, 2 at 2-3, 4, 8, 16 at 16-31, 9 at 32-40
    assert mass[0, 0, 8].tolist() == pytest.approx([c / 41 for c in (1, 1, 2, 4, 8, 16, 9)])


def test_one_hot_attention_is_exact():
    K = 20
    p = torch.zeros(1, 2, K, K, dtype=torch.float64)
    for i in range(K):
        p[0, 0, i, max(i - 3, 0)] = 1.0  # head 0: three back
        p[0, 1, i, i] = 1.0  # head 1: itself
    mean_d, ent, far, sink, _ = query_stats(p, 0, far=3)
    assert mean_d[0, 0].tolist() == [min(i, 3) for i in range(K)] and mean_d[0, 1].abs().max() == 0
    assert ent.abs().max() == 0
    assert far[0, 0].tolist() == [float(i >= 3) for i in range(K)] and far[0, 1].abs().max() == 0
    # head 0 puts all its weight on key 0 for queries 1-3 (the first query's own key is not a sink); head 1 never
    assert sink[0, 0].tolist() == [float(1 <= i <= 3) for i in range(K)] and sink[0, 1].abs().max() == 0


def test_sink_mass_is_the_mean_over_the_queries_after_the_first():
    """Every query after the first puts 0.7 on key 0 (in blocks, as the hook passes them): the sink mass is 0.7,
    not diluted by the first query, whose only key is itself."""
    from pebench.analysis.attention import AttentionStats

    K, stats = 16, AttentionStats(16, 8, 1, 1)
    p = torch.zeros(1, 1, K, K, dtype=torch.float64)
    p[0, 0, 0, 0] = 1.0
    for i in range(1, K):
        p[0, 0, i, 0], p[0, 0, i, i] = 0.7, 0.3
    stats.add(0, p[:, :, :8], 0)
    stats.add(0, p[:, :, 8:], 8)
    assert stats.summary()["sink"] == [[pytest.approx(0.7)]]


def test_uniform_sink_is_the_sink_mass_of_uniform_causal_attention():
    """``uniform_sink`` (what scripts/sink_mass.py divides by): by hand at length 3, (1/2 + 1/3) / 2; and at 16 the
    sink mass AttentionStats reads from uniform causal attention."""
    from pebench.analysis.attention import AttentionStats, uniform_sink

    assert uniform_sink(3) == pytest.approx(5 / 12)
    stats = AttentionStats(16, 8, 1, 1)
    stats.add(0, _uniform(16, 16, offset=0), 0)
    assert stats.summary()["sink"] == [[pytest.approx(uniform_sink(16))]]
    assert uniform_sink(16) != pytest.approx(uniform_sink(17))


def test_distance_bins_are_log2():
    assert distance_bin(torch.tensor([0, 1, 2, 3, 4, 7, 8, 127, 128])).tolist() == [0, 1, 2, 2, 3, 3, 4, 7, 8]
    assert n_bins(128) == 8 and bin_edges(128) == [0, 1, 2, 4, 8, 16, 32, 64]


def _zero_attention_model(pe):
    torch.manual_seed(0)
    model = DecoderLM(tiny_model_config(pe)).eval()
    with torch.no_grad():
        for b in model.blocks:
            b.attn.qkv.weight.zero_()  # q = k = 0: the logits are the scheme's term alone
    return model


def test_hooked_statistics_of_a_model_with_uniform_attention():
    model = _zero_attention_model("none")
    L = 48
    win = torch.randint(0, 256, (3, L))
    s = attention_stats(model, win, far=16, batch=2, chunk=20)  # chunks that do not divide L
    assert s["queries"] == 3 * L
    exp_d = sum(i / 2 for i in range(L)) / L
    for layer in range(2):
        assert s["distance"][layer] == pytest.approx([exp_d] * 4, rel=1e-6)
        assert s["entropy"][layer] == pytest.approx([entropy_ceiling(L)] * 4, rel=1e-6)
        exp_far = sum(max(0, i - 16 + 1) / (i + 1) for i in range(L)) / L
        assert s["far"][layer] == pytest.approx([exp_far] * 4, rel=1e-6)


def test_hooked_statistics_respect_a_layers_window():
    """A pattern's windowed layer (zero logits: uniform over the keys it sees) has mean distance (min(i, w-1))/2 and
    no weight beyond its window; its global layer stays uniform over every key."""
    from pebench.model.patterns import with_layers

    torch.manual_seed(0)
    model = DecoderLM(with_layers(tiny_model_config("rope"), "rope@w8,none")).eval()
    with torch.no_grad():
        for b in model.blocks:
            b.attn.qkv.weight.zero_()
    L = 40
    s = attention_stats(model, torch.randint(0, 256, (2, L)), far=16, chunk=16)
    assert s["distance"][0] == pytest.approx([sum(min(i, 7) / 2 for i in range(L)) / L] * 4, rel=1e-6)
    assert s["far"][0] == pytest.approx([0.0] * 4, abs=1e-9)  # nothing beyond 16 tokens: the window is 8
    assert s["distance"][1] == pytest.approx([sum(i / 2 for i in range(L)) / L] * 4, rel=1e-6)


def test_hooked_statistics_follow_alibi_slopes():
    model = _zero_attention_model("alibi")
    L = 32
    s = attention_stats(model, torch.randint(0, 256, (1, L)), far=16)
    for h, m in enumerate(alibi_slopes(4)):
        dist = []
        for i in range(L):
            w = np.exp(-m * np.arange(i + 1))  # distances 0..i
            dist.append(float((w * np.arange(i + 1)).sum() / w.sum()))
        assert s["distance"][0][h] == pytest.approx(np.mean(dist), rel=1e-6)


def test_the_spectrum_recovers_a_known_sinusoid_and_noise_is_flat():
    T = 128
    pos = torch.arange(T).double()[:, None]
    cycles = torch.tensor([1, 3, 5, 8, 13, 21, 34, 55]).double()  # integer cycles over the table
    table = torch.sin(2 * math.pi * pos * cycles / T + 0.3)
    sp = table_spectrum(table)
    assert sp["dominant"] == pytest.approx((cycles / T).tolist())
    assert sp["concentration"] == pytest.approx(1.0, abs=1e-9)
    noise = table_spectrum(torch.randn(T, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    assert noise["concentration"] < 0.2
    pcs = table_components(torch.cat([pos, 2 * pos], 1))  # a rank-one ramp: one component holds everything
    assert pcs["explained"][0] == pytest.approx(1.0)


def test_sinusoid_like_dimensions_are_told_from_low_rank_and_their_scales_counted():
    """A dimension is sinusoid-like when its concentration beats its own position-shuffled copies (which keep the
    rank), so: pure sinusoids of cycles 1..55 all pass and span log2 of their 90th over 10th percentile cycle
    count; smooth curves of one scale pass but span no octave; the same smooth table with its rows shuffled, noise,
    and a random low-rank table pass only at about the chance rate."""
    T = 128
    pos = torch.arange(T).double()[:, None]
    cycles = torch.tensor([1, 2, 3, 5, 8, 13, 21, 34, 55]).double().repeat(4)  # 36 dimensions, 9 scales
    sines = sinusoid_like(torch.sin(2 * math.pi * pos * cycles / T + 0.3))
    assert sines["fraction"] == 1.0
    logc = torch.log2(cycles)
    assert sines["octaves"] == pytest.approx(float(torch.quantile(logc, 0.9) - torch.quantile(logc, 0.1)))
    gen = torch.Generator().manual_seed(0)
    x = torch.linspace(0, 1, T, dtype=torch.float64)[:, None]
    smooth = torch.cat([x, x**2, torch.exp(-3 * x)], 1) @ torch.randn(3, 64, generator=gen, dtype=torch.float64)
    one_scale = sinusoid_like(smooth)
    assert one_scale["fraction"] == 1.0 and one_scale["octaves"] == 0.0
    shuffled = smooth[torch.randperm(T, generator=gen)]  # the same values and rank, no order
    low_rank = torch.randn(T, 3, generator=gen, dtype=torch.float64) @ torch.randn(3, 64, generator=gen).double()
    noise = torch.randn(T, 64, generator=gen, dtype=torch.float64)
    for table in (shuffled, low_rank, noise):
        assert sinusoid_like(table)["fraction"] <= 0.15  # the chance rate is 0.05
    assert sinusoid_like(noise, level=0.99)["chance"] == pytest.approx(0.01)


def test_the_rope_bound_equals_the_direct_sum():
    inv = torch.tensor([1.0, 0.3, 0.05])
    got = rope_bound(inv, torch.tensor([0, 1, 7]))
    for r, g in zip([0, 1, 7], got):
        direct = 0.0
        for j in range(1, 4):
            s = sum(complex(math.cos(r * inv[k].item()), math.sin(r * inv[k].item())) for k in range(j))
            direct += abs(s)
        assert g.item() == pytest.approx(direct / 3, rel=1e-12)
    assert got[0].item() == pytest.approx(2.0)  # (1 + 2 + 3) / 3 at distance 0


def test_biases_and_windows_by_distance():
    ctx = PEContext(32, 4, 2, 16)
    alibi = build_pe("alibi", ctx)
    b = bias_by_distance(alibi, 100)
    for h, m in enumerate(alibi_slopes(4)):
        assert b[h] == pytest.approx(-m * np.arange(101), rel=1e-6)
        expected = int(np.ceil(4.0 / m - 1e-9))
        assert effective_window(b, 4.0)[h] == (expected if expected <= 100 else None)
    t5 = build_pe("t5", ctx, {"num_buckets": 8, "max_distance": 16})
    with torch.no_grad():
        t5.table.copy_(torch.arange(32.0).view(4, 8) * -0.1)
    bt = bias_by_distance(t5, 40)
    assert bt[1, 0] == pytest.approx(-0.8 * 32**0.5 / 2 * 1.0, rel=1e-5)  # head 1, bucket 0: -0.8 * sqrt(d_h)
    assert bias_by_distance(build_pe("rope", ctx), 10) is None  # content-dependent or no term: nothing to plot
    norms = relative_vector_norms(build_pe("shaw", ctx, {"k_max": 4}), 1)
    assert len(norms["key"]) == 5 and len(norms["value"]) == 5


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 2], [1, 2]))


MICRO = micro(
    model={"pe_options": {"shaw": {"k_max": 4}, "t5": {"num_buckets": 8, "max_distance": 16}}},
    eval={"multiples": [1, 4]},
)


def test_analyze_every_scheme_end_to_end(tmp_path):
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(yaml.safe_dump(MICRO))
    res = tmp_path / "res"
    r = runner.invoke(app, ["train", "--pe", ",".join(SCHEMES), "--config", str(cfg), "--results", str(res)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "--results", str(res)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["analyze", "--tokens", "256", "--results", str(res)])
    assert r.exit_code == 0, r.output
    out = res / "analysis"
    md = (out / "analysis.md").read_text()
    for s in SCHEMES:
        assert f"{s}-micro-s0" in md
    assert "undefined at 64 tokens" in md  # learned beyond its table
    assert "Spearman rho" in md
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} >= {f"attention_{s}-micro-s0.png" for s in SCHEMES} | {
        "rope_bound.png",
        "tables.png",
        "biases.png",
        "relative.png",
    }
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
    r = runner.invoke(app, ["analyze", "--run", "ropee-micro-s0", "--results", str(res)])
    assert r.exit_code == 2 and "did you mean 'rope-micro-s0'" in r.output and "Traceback" not in r.output


def test_windows_of_the_stream():
    w = windows_of(np.arange(100), 30, 70)
    assert w.shape == (2, 30) and w[1, 0] == 30
    assert windows_of(np.arange(100), 30, 10).shape == (1, 30)


def test_finished_by_seed_finds_a_labels_finished_runs_over_folders(tmp_path):
    """The runs the per-draw scripts measure: finished ``PREFIX-sSEED`` runs only, for the seeds asked, the later
    folder winning where two hold one."""
    from pebench.results import ResultsDir, finished_by_seed

    a, b = ResultsDir(tmp_path / "a"), ResultsDir(tmp_path / "b")
    for rd, name, state in [
        (a, "rope-tiny-s1", "finished"),
        (a, "rope-tiny-s2", "finished"),
        (a, "rope-tiny-s3", "interrupted"),
        (b, "rope-tiny-s2", "finished"),
        (b, "alibi-tiny-s1", "finished"),
    ]:
        rd.run_dir(name).mkdir(parents=True)
        (rd.run_dir(name) / "config.yaml").write_text("name: tiny\n")  # what makes a folder a run
        rd.set_status(name, state=state)
    found = finished_by_seed([tmp_path / "a", tmp_path / "b"], "rope-tiny", [1, 2, 3, 4])
    assert {s: (rd.root, run) for s, (rd, run) in found.items()} == {
        1: (a.root, "rope-tiny-s1"),
        2: (b.root, "rope-tiny-s2"),
    }


def test_analyze_reads_the_attention_eval_scores_under_a_logit_scale(tmp_path):
    """--logit-scale as eval takes it: beyond the context log-n multiplies every query's logits by at least 1, so
    the first layer's entropy (its inputs unchanged) falls for each head, query by query (a softmax's entropy falls
    as its logits are scaled up); within the context the factor is 1 and nothing changes. A bad name: one line."""
    import json

    cfg = tmp_path / "micro.yaml"
    cfg.write_text(yaml.safe_dump(MICRO))
    res = tmp_path / "res"
    assert runner.invoke(app, ["train", "--pe", "none", "--config", str(cfg), "--results", str(res)]).exit_code == 0
    data = {}
    for name, extra in (("plain", []), ("logn", ["--logit-scale", "logn:gamma=2"])):
        args = ["analyze", "--lengths", "1x,4x", "--tokens", "256", "--results", str(res)]
        r = runner.invoke(app, [*args, "--out", str(tmp_path / name), *extra])
        assert r.exit_code == 0, r.output
        data[name] = json.loads((tmp_path / name / "analysis.json").read_text())["runs"][0]
    plain, logn = data["plain"], data["logn"]
    assert plain["label"] == "none" and logn["label"] == "none+logn:gamma=2" and logn["logit_scale"] == "logn:gamma=2"
    T = plain["context"]
    assert np.allclose(logn["stats"][str(T)]["entropy"], plain["stats"][str(T)]["entropy"], atol=1e-6)
    far_plain, far_logn = plain["stats"][str(4 * T)]["entropy"][0], logn["stats"][str(4 * T)]["entropy"][0]
    assert all(b < a for a, b in zip(far_plain, far_logn)), (far_plain, far_logn)
    r = runner.invoke(app, ["analyze", "--logit-scale", "bogus", "--results", str(res), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown logit scale 'bogus'" in r.output and "Traceback" not in r.output
