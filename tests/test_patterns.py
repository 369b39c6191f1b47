"""Layer patterns (model.layers): a scheme and a span per layer. A uniform list is the plain model bit for bit; a
span is enforced exactly in every attention backend (a key outside it changes nothing); the named patterns expand as
their papers lay them out; evaluation-time RoPE scalings and logit scales reach only the layers they name."""

import json

import pytest
import torch
import yaml

from pebench.model.attention import attend, attend_from, set_flex_compile
from pebench.model.decoder import DecoderLM
from pebench.model.patterns import LayerSpec, expand_pattern, layers_config, parse_layers, with_layers
from pebench.model.pe import PEContext, build_pe
from pebench.model.spans import Span
from pebench.util.errors import UsageError
from support import invoke, tiny_model_config, write_micro

SPANS = [Span(window=5), Span(chunk=8), Span(window=5, keep=3)]


def _reference(q, k, v, span, bias=None):
    """softmax over the visible keys, written out."""
    T = q.shape[2]
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5 + (0 if bias is None else bias)
    return torch.softmax(s.masked_fill(~span.visible(qi, ki), float("-inf")), dim=-1) @ v


def test_span_visibility_and_counts_by_hand():
    w = Span(window=3, keep=1)
    rows = w.visible(torch.arange(6)[:, None], torch.arange(6)[None, :]).int().tolist()
    assert rows[5] == [1, 0, 0, 1, 1, 1] and rows[2] == [1, 1, 1, 0, 0, 0]
    c = Span(chunk=4).visible(torch.arange(8)[:, None], torch.arange(8)[None, :]).int()
    assert c[5].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    for span in SPANS:
        vis = span.visible(torch.arange(40)[:, None], torch.arange(40)[None, :])
        assert span.counts(40, "cpu").tolist() == vis.sum(-1).float().tolist()
        for q0 in (0, 7, 21):  # the keys a block reads hold every visible key
            keys = set(span.keys(q0, q0 + 9, "cpu").tolist())
            assert {int(j) for i in range(q0, q0 + 9) for j in vis[i].nonzero()} <= keys
    with pytest.raises(UsageError):
        Span(window=4, chunk=4)


@pytest.mark.parametrize("span", SPANS, ids=lambda s: s.label())
@pytest.mark.parametrize("backend", ["math", "sdpa", "chunked", "auto", "flex", "banded", "relative"])
def test_every_backend_keeps_the_span(span, backend):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 300, 8, dtype=torch.float64) for _ in range(3))  # > one chunk of queries
    want = _reference(q, k, v, span)
    set_flex_compile(False)  # eager flex: the same block mask, no compile in tests
    try:
        got = attend(q, k, v, None, backend, span=span)
    finally:
        set_flex_compile(True)
    assert torch.allclose(got, want, atol=1e-10)
    assert torch.allclose(attend_from(q, k, v, None, 123, span=span).double(), want[:, :, 123:], atol=1e-5)


def test_a_span_with_a_logit_term_a_value_term_and_a_sink():
    torch.manual_seed(0)
    T, span = 40, Span(window=9)
    q, k, v = (torch.randn(1, 2, T, 8, dtype=torch.float64) for _ in range(3))
    alibi = build_pe("alibi", PEContext(16, 2, 1, 16))
    mod = alibi.score_mod(q, 0)
    b, h = torch.arange(1).view(-1, 1, 1, 1), torch.arange(2).view(1, -1, 1, 1)
    bias = mod.bias(b, h, torch.arange(T).view(1, 1, -1, 1), torch.arange(T).view(1, 1, 1, -1))
    assert torch.allclose(attend(q, k, v, mod, "chunked", span=span), _reference(q, k, v, span, bias), atol=1e-10)
    # Shaw: logit and value vectors by distance, clipped at k_max, against the explicit sum over visible keys
    shaw = build_pe("shaw", PEContext(16, 2, 1, 16), {"k_max": 4}).double()
    mod = shaw.score_mod(q, 0)
    rel = mod.relative
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(0, rel.key.shape[0] - 1)
    s = (q @ k.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", q, rel.key[dist])) * 8**-0.5
    vis = span.visible(torch.arange(T)[:, None], torch.arange(T)[None, :])
    p = torch.softmax(s.masked_fill(~vis, float("-inf")), dim=-1)
    want = p @ v + torch.einsum("bhij,ijd->bhid", p, rel.value[dist])
    assert torch.allclose(attend(q, k, v, mod, "auto", span=span), want, atol=1e-10)
    sink = torch.tensor([0.5, -1.0], dtype=torch.float64)
    z = torch.cat([s.masked_fill(~vis, float("-inf")), sink.view(1, 2, 1, 1).expand(1, 2, T, 1)], dim=-1)
    w = torch.softmax(z, dim=-1)[..., :T]
    got = attend(q, k, v, mod, "auto", sink=sink, span=span)
    assert torch.allclose(got, w @ v + torch.einsum("bhij,ijd->bhid", w, rel.value[dist]), atol=1e-10)


@pytest.mark.parametrize("pe", ["rope", "alibi", "stick-breaking", "path", "pope"])
@pytest.mark.parametrize("T", [40, 600])  # training length, and a long one (several query blocks)
def test_a_key_outside_the_window_has_no_effect(pe, T):
    """One layer with a window of 6: changing the token at position 3 changes no output from position 9 on, in
    training (gradients on) and at evaluation, through the whole forward and through the tail-only path. PaTH's
    transforms read the last 3 tokens (its convolution), so token 3 reaches the transforms of tokens 4 and 5, which
    lie between the window's keys and queries 9 and 10: from 11 on, nothing."""
    torch.manual_seed(0)
    first = 11 if pe == "path" else 9
    cfg = tiny_model_config(pe, n_layers=1, layers=[{"pe": pe, "window": 6}])
    m = DecoderLM(cfg).double()
    idx = torch.randint(0, 256, (1, T))
    other = idx.clone()
    other[0, 3] = (idx[0, 3] + 1) % 256
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            a, b = m(idx), m(other)
        assert not torch.allclose(a[:, 3], b[:, 3])  # the changed token itself does matter
        assert torch.allclose(a[:, first:], b[:, first:], atol=1e-12), (pe, grad)
        if pe == "path":
            assert not torch.allclose(a[:, 9], b[:, 9])  # the convolution's reach, shown
    assert torch.allclose(m.logits_tail(idx, T - 5), m.logits_tail(other, T - 5), atol=1e-12)


@pytest.mark.parametrize("pe", ["rope", "learned", "t5", "alibi", "shaw"])
def test_a_uniform_list_is_the_plain_model_bit_for_bit(pe):
    torch.manual_seed(0)
    plain = DecoderLM(tiny_model_config(pe))
    torch.manual_seed(0)
    listed = DecoderLM(tiny_model_config(pe, layers=layers_config([LayerSpec(pe)] * 2)))
    idx = torch.randint(0, 256, (2, 16))
    assert torch.equal(plain(idx), listed(idx))
    assert [n for n, _ in plain.named_parameters() if not n.startswith("pe.")] == [
        n for n, _ in listed.named_parameters() if not n.startswith("pe.")
    ]
    if pe != "learned":  # learned represents 16 positions only
        with torch.no_grad():
            long = torch.randint(0, 256, (1, 200))
            assert torch.equal(plain(long), listed(long))


def test_named_patterns_lay_out_their_layers():
    irope = expand_pattern("irope", 8, 128)
    assert [x.pe for x in irope] == ["rope"] * 3 + ["none"] + ["rope"] * 3 + ["none"]
    assert {x.chunk for x in irope if x.pe == "rope"} == {32} and all(not x.chunk for x in irope if x.pe == "none")
    assert all(x.options == {"base": 500_000.0} for x in irope if x.pe == "rope")  # Llama 4's base
    assert all(x.options == {"base": 10_000.0} for x in expand_pattern("irope:base=10000", 8, 128) if x.pe == "rope")
    gemma = expand_pattern("local-global", 12, 128)
    assert [i for i, x in enumerate(gemma) if not x.window] == [5, 11]
    assert gemma[5].options == {"base": 1_000_000.0} and gemma[0].window == 32
    assert [x.pe for x in expand_pattern("swan:window=16", 4, 128)] == ["rope"] * 3 + ["none"]
    assert expand_pattern("swan:window=16", 4, 128)[0].window == 16
    assert [x.pe for x in expand_pattern("nope-rope-alt", 4, 128)] == ["none", "rope", "none", "rope"]
    name, layers = parse_layers("rope@w32,rope:base=1000000,rope@c16,none", 4, 128)
    assert name.startswith("layers-") and layers[1].options == {"base": 1_000_000.0} and layers[2].chunk == 16
    assert parse_layers("swan:window=16", 4, 128)[0] == "swan_window16"
    for bad in ("rope,none", "rope@x3,rope,rope,none", "rope:nope=1,rope,rope,none", "swan:size=3"):
        with pytest.raises(UsageError):
            parse_layers(bad, 4, 128)


def test_scalings_and_logit_scales_reach_only_their_layers():
    torch.manual_seed(0)
    cfg = with_layers(tiny_model_config("rope", n_layers=4, context=16), "swan")
    m = DecoderLM(cfg)
    yarn = m.pe.with_variant("yarn")
    assert [(s.name, s.variant) for s in yarn.schemes] == [("rope", "yarn"), ("none", "default")]
    assert m.pe.variant == "default" and type(yarn) is type(m.pe)
    m.logit_scale = "llama4@none"
    scales = m.layer_scales(64, "cpu")
    assert [s is None for s in scales] == [True, True, True, False]
    assert scales[3][16:].min() > 1 and torch.all(scales[3][:16] == 1)
    m.logit_scale = "llama4:alpha=0.5:floor=8"
    assert torch.allclose(m.layer_scales(32, "cpu")[0][8:16], torch.full((8,), 1 + 0.5 * torch.log(torch.tensor(2.0))))


def test_ssmax_counts_only_the_keys_a_window_shows():
    torch.manual_seed(0)
    m = DecoderLM(tiny_model_config("none", n_layers=1, layers=[{"pe": "none", "window": 4, "ssmax": True}]))
    attn, T = m.blocks[0].attn, 12
    x = torch.randn(1, T, 32)
    with torch.no_grad():
        attn.ssmax.copy_(torch.tensor([0.4, 0.5, 0.6, 0.7]))
        q, *_ = attn.qkv_and_term(x, m.pe, torch.arange(T))
        s, attn.ssmax = attn.ssmax, None
        raw, *_ = attn.qkv_and_term(x, m.pe, torch.arange(T))
    want = s[:, None] * torch.log(torch.clamp(torch.arange(1, T + 1), max=4).float())[None]  # n = min(i + 1, 4)
    assert torch.allclose(q, raw * want[None, :, :, None], atol=1e-6)


def test_train_and_evaluate_a_pattern_to_16x_from_the_cli(tmp_path):
    cfg = write_micro(tmp_path, model={"n_layers": 4}, eval={"multiples": [1, 16], "max_tokens": 600})
    r = tmp_path / "r"
    out = invoke("train", "--config", cfg, "--layers", "irope", "--results", r)
    assert out.exit_code == 0, out.output
    saved = yaml.safe_load((r / "runs" / "irope-micro-s0" / "config.yaml").read_text())
    assert [x["pe"] for x in saved["model"]["layers"]] == ["rope", "rope", "rope", "none"]
    out = invoke("eval", "--run", "irope-micro-s0", "--results", r, "--logit-scale", "llama4@none", "--window", "8")
    assert out.exit_code == 0, out.output
    recs = [json.loads(p.read_text()) for p in (r / "records").rglob("*.json")]
    assert {x["variant"].split("+")[-2:] == ["w8", "k4"] for x in recs} == {True}
    assert {x["length"] for x in recs} == {16, 256} and {x["scheme"] for x in recs} == {"irope"}
    explicit = invoke("train", "--config", cfg, "--layers", "rope@w4,alibi,none,rope@c8", "--results", r)
    assert explicit.exit_code == 0, explicit.output
    bad = invoke("train", "--config", cfg, "--layers", "rope@w4,none", "--results", r)
    assert bad.exit_code != 0 and "one per layer" in bad.output and "Traceback" not in bad.output
    bad = invoke("eval", "--run", "irope-micro-s0", "--results", r, "--keep", "2")
    assert bad.exit_code != 0 and "--window" in bad.output
