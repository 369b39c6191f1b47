"""Attention backends agree on every scheme (forward and gradients); compiled == eager."""

import warnings

import pytest
import torch

from pebench.model import attention
from pebench.model.attention import attend
from pebench.model.decoder import DecoderLM
from pebench.model.pe import PEContext, build_pe
from support import SCHEMES, tiny_model_config

BIASED = ["shaw", "t5", "alibi", "kerple", "sandwich", "fire", "fox", "cope"]
FLEX = ["shaw", "t5", "alibi", "kerple", "sandwich", "fox"]  # fire and cope are materialized (flex_ok False)


def _qkv(T=24, H=4, dh=8, B=2):
    return [torch.randn(B, H, T, dh, dtype=torch.float64, requires_grad=True) for _ in range(3)]


def _mod(pe, q, k):
    """The scheme's term with the keys and a layer input (FoX's gates read it), like the model passes them."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(q.shape[0], q.shape[2], pe.ctx.d_model, generator=gen, dtype=q.dtype)
    return pe.score_mod(q, 0, k, x)


def _pe(name, H=4, dh=8):
    pe = build_pe(name, PEContext(H * dh, H, 1, 16), {"k_max": 5} if name == "shaw" else None).double()
    with torch.no_grad():
        for p in pe.parameters():
            p.normal_(0, 0.5)
    return pe


@pytest.mark.parametrize("name", BIASED)
def test_score_mod_reference_equals_materialized_bias_path(name):
    pe = _pe(name)
    q, k, v = _qkv()
    ref = attend(q, k, v, _mod(pe, q, k), "math")
    grads_ref = torch.autograd.grad(ref.square().sum(), [q, k, v, *pe.parameters()])
    for backend in ("sdpa", "chunked", "relative", "flex"):
        if backend == "flex" and name in FLEX:
            continue  # flex runs without gradients on CPU: compared below
        out = attend(q, k, v, _mod(pe, q, k), backend)
        assert torch.allclose(out, ref, atol=1e-5), backend
        grads = torch.autograd.grad(out.square().sum(), [q, k, v, *pe.parameters()])
        for a, b in zip(grads, grads_ref):
            assert torch.allclose(a, b, atol=1e-5), backend


@pytest.mark.parametrize("name", BIASED)
def test_cpu_inference_with_a_term_matches_the_reference_and_rebuilds_a_changed_term(name):
    """CPU inference gives the fused causal kernel the term unmasked (it skips the blocks above the diagonal); a
    term with a key is built once and reused, and a change to its scheme's parameters is a new key, never a stale
    term. Training never keeps one."""
    pe = _pe(name).float()
    q, k, v = (t.detach().float() for t in _qkv(T=300))  # past one kernel block, and ragged
    attention._BIAS_CACHE.clear()
    with torch.no_grad():
        ref = attend(q, k, v, _mod(pe, q, k), "math")
        out = attend(q, k, v, _mod(pe, q, k), "sdpa")
        assert torch.allclose(out, ref, atol=1e-5)
        keyed = _mod(pe, q, k).key is not None
        assert keyed == (name in ("t5", "alibi", "kerple", "sandwich"))
        assert len(attention._BIAS_CACHE) == int(keyed)
        assert torch.equal(attend(q, k, v, _mod(pe, q, k), "sdpa"), out)  # the kept term gives the same
        for t in list(pe.parameters()) + list(pe.buffers()):
            t.mul_(0.7)
        ref2 = attend(q, k, v, _mod(pe, q, k), "math")
        assert torch.allclose(attend(q, k, v, _mod(pe, q, k), "sdpa"), ref2, atol=1e-5)
        assert not torch.allclose(ref2, ref, atol=1e-4)  # the term did change
    attention._BIAS_CACHE.clear()
    qg = q.clone().requires_grad_()
    attend(qg, k, v, _mod(pe, qg, k), "sdpa").sum().backward()
    assert not attention._BIAS_CACHE and qg.grad is not None


@pytest.mark.parametrize("name", FLEX)
def test_flex_attention_matches_reference(name):
    pe = _pe(name)
    q, k, v = (t.detach().float() for t in _qkv(T=40))
    pe = pe.float()
    attention.set_flex_compile(False)  # eager flex: same kernel semantics, no compile cost in tests
    try:
        with torch.no_grad():
            out = attend(q, k, v, _mod(pe, q, k), "flex")
            ref = attend(q, k, v, _mod(pe, q, k), "math")
    finally:
        attention.set_flex_compile(True)
    assert torch.allclose(out, ref, atol=1e-5)


def test_compiled_flex_matches_reference_on_cpu():
    pe = _pe("alibi").float()
    q, k, v = (t.detach().float() for t in _qkv(T=128, B=1))
    with torch.no_grad():
        out = attention.attention_flex(q, k, v, pe.score_mod(q, 0), q.shape[-1] ** -0.5)[0]
        ref = attend(q, k, v, pe.score_mod(q, 0), "math")
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("T", [3, 5, 6, 40, 97])
def test_banded_attention_is_exact(T):
    """Shaw's band split (fused causal far part + explicit band) equals the reference, at lengths
    below, at and beyond the band."""
    pe = _pe("shaw")
    q, k, v = (t.detach() for t in _qkv(T=T))
    with torch.no_grad():
        ref = attend(q, k, v, pe.score_mod(q, 0), "math")
        out = attend(q, k, v, pe.score_mod(q, 0), "banded")
    assert torch.allclose(out, ref, atol=1e-10)


@pytest.mark.parametrize("T", [1, 4, 5, 6, 40, 97])
def test_relative_attention_is_exact_with_gradients(T):
    """The hand-written forward and backward of the relative path equal autograd through the
    reference, below, at and beyond the band, for several batch rows and heads (the strided diagonal
    view of one matrix must never read or write its neighbour's entries)."""
    pe = _pe("shaw")
    q, k, v = _qkv(T=T, B=3)
    weight = torch.randn(3, 4, T, 8, dtype=torch.float64)
    results = []
    for backend in ("math", "relative"):
        out = attend(q, k, v, pe.score_mod(q, 0), backend)
        grads = torch.autograd.grad((out * weight).sum(), [q, k, v, pe.a_k, pe.a_v])
        results.append([out, *grads])
    for name, a, b in zip(["out", "q", "k", "v", "a_k", "a_v"], *results):
        assert torch.allclose(a, b, atol=1e-10), name
    # both terms get a gradient (the logit term's is zero at T = 1: one key's weight is 1 whatever its logit)
    assert (results[0][4].abs().sum() > 0 or T == 1) and results[0][5].abs().sum() > 0
    if T == 1:
        assert results[0][4].abs().max() < 1e-12


def test_relative_attention_under_bf16_autocast_computes_in_float32():
    pe = _pe("shaw").float()
    q, k, v = (t.detach().float() for t in _qkv(T=20))
    ref = attend(q, k, v, pe.score_mod(q, 0), "math")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q, k, v, pe.score_mod(q, 0), "relative")
    assert out.dtype == torch.float32
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("pe", SCHEMES)
def test_model_backends_agree(pe):
    m = DecoderLM(tiny_model_config(pe)).double()
    with torch.no_grad():
        for p in m.pe.parameters():
            p.normal_(0, 0.3)
    x = torch.randint(0, 256, (2, 16))
    losses = {}
    for backend in ("math", "sdpa", "chunked", "relative"):
        m.set_attention_backend(backend)
        m.zero_grad()
        _, loss = m(x, x)
        loss.backward()
        losses[backend] = (loss.item(), [p.grad.clone() for p in m.parameters()])
    for b in ("sdpa", "chunked", "relative"):
        assert abs(losses[b][0] - losses["math"][0]) < 1e-9
        for g1, g2 in zip(losses[b][1], losses["math"][1]):
            assert torch.allclose(g1, g2, atol=1e-8)


def test_auto_backend_choice():
    q = torch.zeros(1, 1, 4096, 8)
    alibi = _pe("alibi").score_mod(q, 0)
    shaw = _pe("shaw").score_mod(q.double(), 0)
    choose = attention.choose_backend
    assert choose("cpu", 4096, None, training=False) == "sdpa"
    assert choose("cuda", 4096, None, training=True) == "sdpa"
    assert choose("cpu", 128, alibi, training=True) == "sdpa"
    assert choose("cuda", 512, shaw, training=True) == "relative"
    assert choose("cpu", 128, shaw, training=True) == "relative"
    assert choose("cpu", 8192, shaw, training=True) == "chunked"
    assert choose("cpu", 40, shaw, training=False) == "relative"  # k_max 5: up to 8 band widths
    assert choose("cpu", 41, shaw, training=False) == "banded"
    assert choose("cpu", 8192, alibi, training=True) == "chunked"
    assert choose("cpu", 4096, alibi, training=False) == "flex"
    assert choose("cpu", 128, alibi, training=False) == "sdpa"
    assert choose("cpu", 4096, shaw, training=False) == "banded"
    assert choose("cpu", 4096, _pe("t5").score_mod(q.double(), 0), training=False) == "flex"
    assert choose("cuda", 32768, shaw, training=False) == "flex"
    assert choose("cuda", 128, alibi, training=False) == "flex"
    cope = _pe("cope").score_mod(q, 0, q)  # needs a whole row of scores: never flex
    for dev in ("cpu", "cuda"):
        assert choose(dev, 512, cope, training=False) == "sdpa"
        assert choose(dev, 4096, cope, training=False) == "chunked"
        assert choose(dev, 1024, cope, training=True) == "chunked"
    assert attention._runnable("flex", q, cope) == "chunked"


@pytest.mark.parametrize("pe", ["none", "sinusoidal", "shaw", "t5", "rope", "alibi", "xpos", "fire", "cope"])
def test_long_sequence_evaluation_on_cpu(pe):
    """4096 tokens on a tiny model through the automatic (fast) path: finite, and equal to the chunked path."""
    m = DecoderLM(tiny_model_config(pe, n_layers=1)).eval()
    x = torch.randint(0, 256, (1, 4096))
    with torch.inference_mode():
        out = m(x)
        m.set_attention_backend("chunked")
        ref = m(x)
    assert torch.isfinite(out).all()
    assert torch.allclose(out, ref, atol=1e-4)


def test_compiled_shaw_training_step_matches_eager():
    """torch.compile traces the hand-written relative attention (no graph break): same loss and grads."""
    from torch._dynamo.utils import counters

    m = DecoderLM(tiny_model_config("shaw", n_layers=1))
    x = torch.randint(0, 256, (2, 16))
    _, eager = m(x, x)
    g_eager = torch.autograd.grad(eager, list(m.parameters()))
    counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, compiled = torch.compile(m)(x, x)
    g_compiled = torch.autograd.grad(compiled, list(m.parameters()))
    assert not counters["graph_break"], dict(counters["graph_break"])
    # nothing in the forward makes Dynamo warn (a cache wrapper it cannot see through, a call it skips)
    assert not [str(w.message)[:120] for w in caught if "Dynamo" in str(w.message)]
    assert abs(eager.item() - compiled.item()) < 1e-5
    for a, b in zip(g_eager, g_compiled):
        assert torch.allclose(a, b, atol=1e-5)


def test_compiled_model_gives_the_same_loss_as_eager():
    m = DecoderLM(tiny_model_config("alibi", n_layers=1))
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        _, eager = m(x, x)
        _, compiled = torch.compile(m)(x, x)
    assert abs(float(eager) - float(compiled)) < 1e-5


def test_forced_flex_for_shaw_on_cpu_uses_an_exact_path():
    pe = _pe("shaw").float()
    q, k, v = (t.detach().float() for t in _qkv(T=70, B=1))
    with torch.no_grad():
        out = attend(q, k, v, pe.score_mod(q, 0), "flex")
        ref = attend(q, k, v, pe.score_mod(q, 0), "math")
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("path", ["chunked", "spanned"])
def test_half_precision_attention_is_computed_in_fp32_like_sdpas_math_kernel(path):
    """bf16 q, k, v (training under autocast): the exact chunked and spanned paths score, normalise and weigh in
    fp32, so the log-sum-exp (which a sink reads) matches an fp64 computation on the same rounded inputs; all in
    bf16 it drifted by tenths of a nat at T = 128, and sink runs diverged in training."""
    from pebench.model.spans import Span

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 32).bfloat16() * 3 for _ in range(3))
    scale, span = 32**-0.5, Span(window=40)

    def run(q, k, v):
        if path == "chunked":
            return attention.attention_math(q, k, v, None, scale, chunk=64)
        return attention.attention_spanned(q, k, v, None, scale, span, chunk=64)

    with torch.autocast("cpu", dtype=torch.bfloat16):  # as in training: autocast would cast the matmuls to bf16
        out, lse = run(q.float(), k.float(), v)  # q and k in fp32 (as RoPE's rotation leaves them), v in bf16
    ref_out, ref_lse = run(q.double(), k.double(), v.double())
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert (lse.double() - ref_lse).abs().max() < 1e-4
    assert (out.double() - ref_out).abs().max() < 0.05  # the output's own rounding to bf16


@pytest.mark.parametrize("name", [None, "alibi", "t5"])
def test_cpu_bf16_training_attention_is_computed_in_fp32(name):
    """bf16 training on the CPU (q, k, v in bf16 under autocast): the sdpa path scores, normalises and weighs in fp32
    (the fused causal kernel in fp32 without a term; one fp32 matmul plus the fp32 term with one), so its output and
    its gradients (to q, k, v and to a learned term) match an fp64 computation on the same rounded inputs to within
    the output's own bf16 rounding."""
    torch.manual_seed(0)
    pe = _pe(name, dh=32) if name else None
    q0, k0, v0 = (torch.randn(2, 4, 128, 32).bfloat16() * 3 for _ in range(3))

    def run(dtype, backend):
        # the scheme's parameters in fp32 as autocast keeps them (fp64 for the reference), never rounded to bf16
        scheme = pe.to(torch.float64 if dtype == torch.float64 else torch.float32) if pe is not None else None
        q, k, v = (t.to(dtype).requires_grad_() for t in (q0, k0, v0))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = attend(q, k, v, _mod(scheme, q, k) if scheme else None, backend)
        params = list(scheme.parameters()) if scheme else []
        return out.double(), [g.double() for g in torch.autograd.grad(out.float().square().sum(), [q, k, v, *params])]

    out, grads = run(torch.bfloat16, "sdpa")
    ref, ref_grads = run(torch.float64, "math")
    assert out.dtype == torch.float64 and len(grads) == len(ref_grads) == 3 + (name == "t5")
    assert (out - ref).abs().max() <= 0.01 * ref.abs().max()  # the output's own rounding to bf16 (2^-8)
    for g, r in zip(grads[:3], ref_grads):  # q, k, v
        assert (g - r).abs().max() <= 0.03 * r.abs().max()
    for g, r in zip(grads[3:], ref_grads[3:]):  # T5's table: a sum over every pair, of the bf16 output gradient
        assert (g - r).abs().max() <= 0.06 * r.abs().max()


def test_weights_and_their_log_sum_exp_equal_exp_and_logsumexp_with_gradients():
    """``_weights`` (softmax's kernel; the log-sum-exp as the largest score less the log of the largest weight)
    gives exp(s - logsumexp(s)) and logsumexp(s) on masked rows, and autograd through both the same gradient, ties
    at the maximum included."""
    torch.manual_seed(0)
    s = (torch.randn(3, 4, 16, 40, dtype=torch.float64) * 5).requires_grad_()
    masked = torch.ones(16, 40, dtype=torch.bool).triu(25)
    w, wp = torch.randn(3, 4, 16, dtype=torch.float64), torch.randn(3, 4, 16, 40, dtype=torch.float64)
    grads = []
    for form in ("pebench", "reference"):
        sm = s.masked_fill(masked, float("-inf"))
        if form == "pebench":
            p, lse = attention._weights(sm)
        else:
            lse = torch.logsumexp(sm, dim=-1)
            p = torch.exp(sm - lse.unsqueeze(-1))
        grads.append((p.detach(), lse.detach(), *torch.autograd.grad((lse * w).sum() + (p * wp).sum(), s)))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)
    tied = torch.zeros(2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(
        torch.autograd.grad(attention._weights(tied)[1].sum(), tied)[0], torch.full((2, 5), 0.2, dtype=torch.float64)
    )
