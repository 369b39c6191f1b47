"""Every scheme in the model: causality, gradients, long inputs, registry errors."""

import pytest
import torch

from pebench.model.decoder import DecoderLM
from pebench.model.pe import SCHEMES as REGISTRY
from pebench.model.pe import scheme_names
from pebench.util.errors import PositionOutOfRange, UsageError
from support import CLASSIC, MODERN, SCHEMES, tiny_model_config


def test_groups_are_registered_schemes_and_classic_is_the_surveys_seven():
    from pebench.model.pe import GROUPS, resolve_schemes

    assert GROUPS["classic"] == ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"]  # the survey's
    assert all(n in REGISTRY for g in GROUPS.values() for n in g)
    assert scheme_names()[: len(CLASSIC + MODERN)] == CLASSIC + MODERN  # table order: the groups, then the others
    assert set(scheme_names()) == set(REGISTRY.names())
    assert resolve_schemes("classic") == CLASSIC and resolve_schemes("all") == SCHEMES
    assert resolve_schemes("modern,rope") == MODERN + ["rope"]


def test_unknown_scheme_suggests_a_name():
    with pytest.raises(UsageError) as e:
        REGISTRY.get("alibl")
    msg = str(e.value)
    assert "did you mean 'alibi'" in msg and "rope" in msg and "\n" not in msg


def test_bad_scheme_option_is_named():
    with pytest.raises(UsageError, match="k_maxx"):
        DecoderLM(tiny_model_config("shaw", pe_options={"shaw": {"k_maxx": 3}}))
    with pytest.raises(UsageError, match="k_max"):
        DecoderLM(tiny_model_config("shaw", pe_options={"shaw": {"k_max": "big"}}))


@pytest.mark.parametrize("pe", SCHEMES)
def test_causality(pe):
    m = DecoderLM(tiny_model_config(pe)).eval()
    x = torch.randint(0, 256, (1, 16))
    t = 9
    y = x.clone()
    y[0, t] = (y[0, t] + 1) % 256
    with torch.no_grad():
        a, b = m(x), m(y)
    assert torch.allclose(a[:, :t], b[:, :t], atol=1e-5)
    assert not torch.allclose(a[:, t:], b[:, t:], atol=1e-5)


@pytest.mark.parametrize("pe", SCHEMES)
def test_gradients_reach_every_parameter(pe):
    m = DecoderLM(tiny_model_config(pe))
    with torch.no_grad():  # zero-initialised tables would hide a missing path behind a zero gradient
        for p in m.pe.parameters():
            p.normal_(0, 0.1).abs_().add_(0.05)  # positive: KERPLE clamps its scalars at 0.01
    x = torch.randint(0, 256, (2, 16))
    _, loss = m(x, x)
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("pe", SCHEMES)
def test_forward_at_four_times_the_training_context(pe):
    m = DecoderLM(tiny_model_config(pe)).eval()
    x = torch.randint(0, 256, (1, 64))
    if pe == "learned":
        with pytest.raises(PositionOutOfRange, match="defined for 0..15"):
            m(x)
        return
    with torch.no_grad():
        out = m(x)
    assert out.shape == (1, 64, 256) and torch.isfinite(out).all()


def _slot_rows(n: int, T: int, start: int) -> torch.Tensor:
    """n rows equal before ``start``, each with its own tokens from there (answers tried in one slot)."""
    torch.manual_seed(1)
    rows = torch.randint(0, 256, (1, T)).repeat(n, 1)
    rows[:, start:] = torch.randint(0, 256, (n, T - start))
    return rows


@pytest.mark.parametrize("pe", SCHEMES)
def test_logits_tail_equal_the_whole_forward(pe):
    """Every scheme (its terms perturbed): the last layer and head run from ``start`` only give the whole forward's
    logits there; start 0 is the whole forward."""
    m = DecoderLM(tiny_model_config(pe)).eval()
    with torch.no_grad():
        for p in m.pe.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    T = 16 if pe == "learned" else 48
    x = torch.randint(0, 256, (3, T))
    with torch.inference_mode():
        whole = m(x)
        for start in (T - 1, T - 12):
            got = m.logits_tail(x, start)
            assert got.shape == (3, T - start, 256)
            torch.testing.assert_close(got, whole[:, start:], rtol=1e-5, atol=1e-5)
        assert torch.equal(m.logits_tail(x, 0), whole)


@pytest.mark.parametrize(
    "pe,logit_scale", [(pe, ls) for pe in SCHEMES for ls in ("none", "logn") if (pe, ls) != ("shaw", "logn")]
)  # that pair is refused elsewhere
def test_logits_from_a_shared_prefix_equal_the_whole_forward(pe, logit_scale):
    """Every scheme (its terms perturbed off their initialisation), at 3x the training context where the scheme
    can: the rows' logits from ``start`` on, with the prefix run once, are the whole forward's."""
    m = DecoderLM(tiny_model_config(pe, logit_scale=logit_scale)).eval()
    with torch.no_grad():
        for p in m.pe.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    T = 16 if pe == "learned" else 48
    rows = _slot_rows(4, T, T - 6)
    with torch.inference_mode():
        whole = m(rows)
        got = m.logits_from(rows, T - 7)
    assert got.shape == (4, 7, 256)
    torch.testing.assert_close(got, whole[:, T - 7 :], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got[0], got[1], atol=1e-3)  # the rows' own answers are read


@pytest.mark.parametrize("variant", ["linear", "ntk", "dynamic-ntk", "yarn", "llama3"])
def test_logits_from_keep_the_rope_scalings(variant):
    m = DecoderLM(tiny_model_config("rope")).eval()
    m.pe = m.pe.with_variant(variant, 4.0)
    rows = _slot_rows(3, 64, 60)
    with torch.inference_mode():
        torch.testing.assert_close(m.logits_from(rows, 59), m(rows)[:, 59:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pe", ["rope", "t5", "shaw"])
def test_logits_from_under_bf16_autocast_stay_with_the_whole_forward(pe):
    """Evaluation on CUDA runs under bf16 autocast: the slot's rows keep the whole forward's accuracy there."""
    m = DecoderLM(tiny_model_config(pe)).eval()
    rows = _slot_rows(3, 48, 42)
    with torch.inference_mode():
        exact = m(rows)[:, 41:]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            whole, got = m(rows)[:, 41:].float(), m.logits_from(rows, 41).float()
    assert torch.isfinite(got).all()
    assert (got - exact).abs().max() <= 2 * (whole - exact).abs().max() + 1e-3


def test_logits_from_groups_each_read_their_own_prefix():
    """Rows of two prompts, each group its own shared prefix: each row's logits are its whole forward's."""
    m = DecoderLM(tiny_model_config("t5")).eval()
    a, b = _slot_rows(3, 32, 28), _slot_rows(2, 32, 28)
    b[:, :28] = torch.randint(0, 256, (1, 28))  # another prompt: another shared prefix
    rows = torch.cat([a, b])
    with torch.inference_mode():
        torch.testing.assert_close(m.logits_from(rows, 27, [3, 2]), m(rows)[:, 27:], rtol=1e-5, atol=1e-5)


def test_logits_from_refuses_a_start_outside_the_rows_and_stops_where_asked():
    m = DecoderLM(tiny_model_config("rope")).eval()
    for bad, stop in ((0, None), (16, None), (8, 8), (8, 17)):
        with pytest.raises(UsageError, match=r"need 0 < start < stop <= 16 and sizes summing to 2"):
            m.logits_from(torch.zeros(2, 16, dtype=torch.long), bad, stop=stop)
    rows = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    rows[1, :9] = rows[0, :9]
    with torch.inference_mode():
        torch.testing.assert_close(m.logits_from(rows, 9, stop=12), m(rows)[:, 9:12], rtol=1e-5, atol=1e-5)


EXPECTED_PARAMS = {
    "none": 0,
    "sinusoidal": 0,
    "learned": 16 * 32,
    "shaw": 2 * 2 * (4 + 1) * 8,
    "t5": 8 * 4,
    "rope": 0,
    "alibi": 0,
    "kerple": 2 * 4,
    "fire": (32 + 32) + (32 * 4 + 4) + 2,
    "xpos": 0,
    "p-rope": 0,
    "sandwich": 0,
    "fox": 2 * 4 * (32 + 1),
    "cope": 2 * 64 * 8,
}


@pytest.mark.parametrize("pe", SCHEMES)
def test_positional_parameter_counts(pe):
    """Each scheme adds exactly its own parameters (counted by hand for the built-in ones; any other: none lost)."""
    extra = DecoderLM(tiny_model_config(pe)).num_params() - DecoderLM(tiny_model_config("none")).num_params()
    assert extra == EXPECTED_PARAMS[pe] if pe in EXPECTED_PARAMS else extra >= 0


def test_model_code_never_names_a_scheme():
    import inspect

    import pebench.model.attention
    import pebench.model.decoder

    for mod in (pebench.model.decoder, pebench.model.attention):
        src = inspect.getsource(mod)
        for name in SCHEMES:
            if name in ("none",):
                continue
            assert f'"{name}"' not in src and f"'{name}'" not in src, (mod.__name__, name)


def test_flops_per_token_is_a_count_of_every_matmul():
    """6N + 12 L T d (full score matrix, PaLM's convention), by hand and by torch's FLOP counter."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = tiny_model_config("none")  # d 32, 2 layers, d_mlp 64, vocab 256
    model = DecoderLM(cfg)
    model.set_attention_backend("math")  # the whole T x T score matrix as two explicit matmuls
    B, T, d, L = 3, 16, cfg.d_model, cfg.n_layers
    n_matmul = L * (3 * d * d + d * d + 2 * d * cfg.d_mlp) + cfg.vocab_size * d  # qkv, proj, mlp; tied head
    assert model.flops_per_token(T) == 6 * n_matmul + 12 * L * T * d
    x = torch.randint(0, cfg.vocab_size, (B, T))
    with FlopCounterMode(display=False) as counter:
        _, loss = model(x, x)
        loss.backward()
    assert counter.get_total_flops() == B * T * model.flops_per_token(T)
