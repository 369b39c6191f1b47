"""STRING on an outside model (``eval --hf --rope-scaling string``, ``eval.outside_string``). The attention function
is checked against the oracle of tests/pe/test_string.py (per-pair rotations in float64 from the reference code's
semantics) with grouped keys and a cache before the queries; on tiny random Llama and Gemma 3 models (built here, no
download) a window streamed through the KV cache scores as in one pass, STRING with a shift past every distance is
the model as trained, and on Gemma 3 it is set on the global layers only."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from pe.test_string import oracle_scores, reference_map, rot  # noqa: E402
from test_streaming import CONTEXT, built, losses, tokens  # noqa: E402

from pebench.eval import hf, outside_string  # noqa: E402


class FakeLayer:
    """What the attention function reads of a layer: STRING's setting on it."""

    def __init__(self, setting):
        setattr(self, outside_string.ATTR, setting)


def test_the_attention_function_is_the_references_two_passes_with_grouped_keys_and_a_cache():
    T, n_q, d, shift, local = 24, 10, 8, 12, 3
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, n_q, d, generator=g, dtype=torch.float64)  # two query heads, one key head
    k = torch.randn(1, T, d, generator=g, dtype=torch.float64)
    v = torch.randn(1, T, d, generator=g, dtype=torch.float64)
    qr = torch.stack([torch.stack([rot(q[h, i], T - n_q + i) for i in range(n_q)]) for h in range(2)])
    kr = torch.stack([rot(k[0, j], j) for j in range(T)])[None]
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    layer = FakeLayer((inv, d, shift, local))
    out, _ = outside_string.string_attention(layer, qr[None], kr[None], v[None], None, d**-0.5)
    for h in range(2):
        full_q = torch.cat([torch.zeros(T - n_q, d, dtype=torch.float64), q[h]])  # queries at T - n_q ..
        s = oracle_scores(full_q, k[0], reference_map(shift, local))[T - n_q :]
        want = torch.softmax(s, -1) @ v[0]
        assert torch.allclose(out[0, :, h], want, atol=1e-5)  # scores in fp32
        wrong = torch.softmax(oracle_scores(full_q, k[0], lambda d: d if d < shift else d - shift)[T - n_q :], -1)
        assert not torch.allclose(out[0, :, h], wrong @ v[0], atol=1e-4)


def _outside(model):
    with torch.no_grad():  # logits large enough that attention reads positions (near uniform at initialisation)
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(20)
    return hf.Outside("tiny", hf.HFLM(model, hf.OutsidePE(None)), None, model.config, CONTEXT, True, {})


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_string_on_a_tiny_model_streams_as_one_pass_and_is_rope_where_no_distance_reaches_the_shift(kind):
    model, idx = built(kind), tokens(4 * CONTEXT)
    o = _outside(model)
    plain = losses(model, idx, None)
    (far,) = hf.parse_hf_scalings(f"string:offset={8 * CONTEXT}")
    hf.apply_scaling(o, far, 4 * CONTEXT)
    assert torch.allclose(losses(model, idx, None), plain, atol=1e-5)
    (s,) = hf.parse_hf_scalings("string:local=8")  # the default 128 is S itself at 256 tokens: no shift
    state = hf.apply_scaling(o, s, 4 * CONTEXT)
    assert state["string"] == {"shift": int(0.33 * 4 * CONTEXT), "local": 8}
    one = losses(model, idx, None)
    assert torch.allclose(losses(model, idx, CONTEXT), one, atol=1e-4)  # streamed, 64 tokens per pass
    assert (one - plain).abs().max() > 1e-3
    assert torch.allclose(one[:, :84], plain[:, :84], atol=1e-5)  # every distance below S: as trained
    hf.apply_scaling(o, None, 4 * CONTEXT)  # back to the model's own attention
    assert torch.allclose(losses(model, idx, None), plain, atol=1e-5)


def test_on_gemma_3_string_is_set_on_the_global_layers_only():
    model = built("gemma3")
    o = _outside(model)
    (s,) = hf.parse_hf_scalings("string:layers=all")
    hf.apply_scaling(o, s, 4 * CONTEXT)
    layers = outside_string.installed(model)
    kinds = model.config.layer_types
    assert sorted(layers) == [i for i, t in enumerate(kinds) if t == "full_attention"] and len(layers) == 1
    want = 1.0 / (model.config.rope_parameters["full_attention"]["rope_theta"] ** (torch.arange(0, 32, 2) / 32))
    assert torch.allclose(layers[5][0].float(), want, rtol=1e-5)
    hf.apply_scaling(o, None, 4 * CONTEXT)
    assert not outside_string.installed(model) and model.config._attn_implementation == "sdpa"


def test_eval_hf_runs_string_and_the_soft_clip_with_the_new_tasks(tmp_path):
    import json

    from support import invoke, tiny_outside

    model, _ = tiny_outside(tmp_path / "tiny", " ".join(["The grass is green. count of @ 12345"] * 200))
    args = ["--rope-scaling", "string,clip-soft", "--task", "ppl,count", "--lengths", "4x", "--trials", "2"]
    r = invoke("eval", "--hf", model, *args, "--max-tokens", "2000", "--results", tmp_path / "r")
    assert r.exit_code == 0, r.output
    recs = [json.loads(p.read_text()) for p in (tmp_path / "r" / "records").rglob("*.json")]
    got = {(x["label"].split("+")[-1], x["task"]) for x in recs}
    assert {("string", "ppl"), ("string", "count"), ("clip-soft", "ppl"), ("clip-soft", "count")} <= got
    rec = next(x for x in recs if x["label"].endswith("+string") and x["task"] == "ppl")
    assert rec["pe_state"]["string"] == {"shift": int(0.33 * 256), "local": 84}


def test_rope_report_says_what_string_reads(tmp_path):
    from transformers import LlamaConfig

    LlamaConfig(vocab_size=300, hidden_size=64, num_attention_heads=4, max_position_embeddings=64).save_pretrained(
        tmp_path
    )
    rep = hf.rope_report(str(tmp_path), "string:local=8", "4x")
    assert rep.facts["string_shift"] == 84 and rep.facts["string_local"] == 8
    assert rep.facts["max_position_read"] == 256 - 1 - 84 + 8
