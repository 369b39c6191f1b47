"""Outside models read a long window through their KV cache (``hf.HFLM.stream`` tokens per pass) and, where the model
gives its RoPE per layer type (Gemma 3), scalings apply to the global layers unless ``:layers=all``.

The tolerance, fixed before the comparison was run: in fp32, a streamed window's per-token losses equal the one-pass
ones within 1e-4 nats each and its mean loss within 1e-6 relative (perplexity within 0.0001%), the scalings that do
not follow the sequence length included. Dynamic NTK does follow it: streamed, a key keeps the rotation of the pass
that cached it (what ``generate`` computes), so its first pass, shorter than the original context, is the unscaled
model's. Tiny random Llama and Gemma 3 models built here; nothing is downloaded."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402

from pebench.eval import hf  # noqa: E402

CONTEXT, VOCAB = 64, 300


def gemma_config(**kw) -> Gemma3TextConfig:
    """Gemma 3's pattern in small: five sliding-window layers (window 16, base 10,000), then one global (base 1e6)."""
    return Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        sliding_window=16,
        max_position_embeddings=CONTEXT,
        attn_implementation="sdpa",
        **kw,
    )


def llama_config(**kw) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=CONTEXT,
        attn_implementation="sdpa",
        **kw,
    )


MODELS = {"gemma3": (gemma_config, Gemma3ForCausalLM), "llama": (llama_config, LlamaForCausalLM)}


def built(kind: str, scaling: str | None = None, length: int = 4 * CONTEXT):
    """The tiny model of ``kind`` (seeded weights), its config scaled as ``eval --hf`` scales it at ``length``."""
    make, cls = MODELS[kind]
    cfg = make()
    if scaling:
        (s,) = hf.parse_hf_scalings(scaling)
        cfg = hf.scaled_config(cfg, s, length, CONTEXT)
    torch.manual_seed(0)
    return cls(cfg).eval()


def losses(model, idx: torch.Tensor, stream: int | None, on_tokens=None) -> torch.Tensor:
    with torch.inference_mode():
        return hf.HFLM(model, hf.OutsidePE(None), stream=stream).token_losses(idx, 0, on_tokens)


def tokens(T: int = 4 * CONTEXT, rows: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, T), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("scaling", [None, "linear", "yarn", "llama3", "yarn:layers=all"])
@pytest.mark.parametrize("stream", [5, 48])  # shorter than Gemma's window (16), and longer
def test_a_streamed_window_scores_as_one_pass(kind, scaling, stream):
    model, idx = built(kind, scaling), tokens()
    one, streamed = losses(model, idx, None), losses(model, idx, stream)
    assert (one - streamed).abs().max() < 1e-4
    assert math.isclose(float(one.mean()), float(streamed.mean()), rel_tol=1e-6)


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("scaling", [None, "yarn"])
@pytest.mark.parametrize("stream", [None, 5, 48])
def test_rows_sharing_a_prefix_run_it_once_and_score_as_each_row_whole(kind, scaling, stream):
    """``logits_from``: two groups of rows (answers tried in one slot) whose rows share their first 150 tokens; the
    prefix run once through the cache, then each group's rows together up to ``stop``, give the logits of every row
    run whole, within the streaming tolerance; a row that differs before the split would not."""
    model, idx = built(kind, scaling), tokens(rows=5)
    idx[1:3, :150] = idx[0, :150]
    idx[4, :150] = idx[3, :150]
    lm = hf.HFLM(model, hf.OutsidePE(None), stream=stream)
    with torch.inference_mode():
        whole = model(input_ids=idx).logits.float()[:, 150:200]
        got = lm.logits_from(idx, 150, [3, 2], 200)
        assert got.shape == whole.shape and (got - whole).abs().max() < 1e-4
        idx[2, 10] = (idx[2, 10] + 1) % VOCAB  # the planted bug: row 2 no longer shares the prefix run once
        assert (lm.logits_from(idx, 150, [3, 2], 200)[2] - model(input_ids=idx).logits[2, 150:200]).abs().max() > 1e-3
    with pytest.raises(hf.UsageError, match="logits_from"):
        lm.logits_from(idx, 150, [3, 2], 120)


def test_streaming_reports_each_pass_and_a_cacheless_chunking_is_caught():
    model, idx = built("gemma3"), tokens()
    seen: list[int] = []
    streamed = losses(model, idx, 48, seen.append)
    assert seen == [48, 96, 144, 192, 240, 256]
    # the planted bug: chunks scored without the cache each see only themselves
    with torch.inference_mode():
        decoder = model.get_decoder()
        h = torch.cat([decoder(input_ids=idx[:, a : a + 48]).last_hidden_state for a in range(0, idx.shape[1], 48)], 1)
        logits = model.get_output_embeddings()(h[:, :-1]).float()
        wrong = torch.nn.functional.cross_entropy(logits.transpose(1, 2), idx[:, 1:], reduction="none")
    assert (wrong - streamed).abs().max() > 1e-2


def test_dynamic_ntk_streamed_keeps_each_keys_rotation_and_one_pass_does_not():
    """Streamed, the first pass (48 positions, under the original 64) is the unscaled model's; in one pass over 256
    positions every key is rotated at the grown base, so the same tokens score differently."""
    dyn, plain, idx = built("llama", "dynamic-ntk"), built("llama"), tokens()
    streamed, one, unscaled = losses(dyn, idx, 48), losses(dyn, idx, None), losses(plain, idx[:, :49], None)
    assert (streamed[:, :48] - unscaled).abs().max() < 1e-4
    assert (one[:, :48] - unscaled).abs().max() > 1e-3


def test_gemma_scalings_apply_to_the_global_layers_unless_all_are_asked():
    base = gemma_config()
    both = {"full_attention", "sliding_attention"}
    for spec, scaled in [("linear", {"full_attention"}), ("linear:layers=all", both)]:
        (s,) = hf.parse_hf_scalings(spec)
        cfg = hf.scaled_config(base, s, 4 * CONTEXT, CONTEXT)
        rope = Gemma3ForCausalLM(cfg).model.rotary_emb
        for kind, theta in (("sliding_attention", 1e4), ("full_attention", 1e6)):
            plain = 1.0 / theta ** (torch.arange(0, 32, 2, dtype=torch.float) / 32)  # RoPE's own frequencies
            want = plain / 4 if kind in scaled else plain  # linear: positions divided by the factor, 4x here
            assert torch.allclose(getattr(rope, f"{kind}_inv_freq"), want, rtol=1e-6), (spec, kind)
        assert s.label == spec
    assert hf.parse_hf_scalings("yarn")[0].layers == "global" and hf.global_type(base) == "full_attention"
    with pytest.raises(hf.UsageError, match="global, all"):
        hf.parse_hf_scalings("yarn:layers=some")


def test_rope_report_shows_each_layer_type_and_scales_the_global_ones(tmp_path):
    """`pebench rope --hf` on a Gemma 3 config: one block of rows per layer type; YaRN on the global layers changes
    their frequencies (pebench's own YaRN agrees) and leaves the sliding layers' as trained."""
    from support import invoke

    gemma_config().save_pretrained(tmp_path)
    r = hf.rope_report(str(tmp_path / "config.json"), "yarn", "4x")
    by_type = {t: [row for row in r.rows if row["layer_type"] == t] for t in ("full_attention", "sliding_attention")}
    assert len(by_type["full_attention"]) == len(by_type["sliding_attention"]) == 16  # head_dim 32: 16 pairs each
    assert r.facts["rope_type"] == "yarn" and r.facts["rope_theta"] == 1e6 and r.facts["max_rel_diff"] < 1e-6
    assert r.facts["sliding_attention.rope_type"] == "default" and r.facts["sliding_attention.rope_theta"] == 1e4
    assert all(row["ratio"] == 1.0 for row in by_type["sliding_attention"])
    assert by_type["full_attention"][-1]["ratio"] == pytest.approx(1 / 4, rel=1e-6)  # the slowest pair interpolated
    out = invoke("rope", "--hf", tmp_path / "config.json", "--rope-scaling", "yarn:layers=all", "--lengths", "4x")
    assert out.exit_code == 0 and "sliding_attention.rope_type: yarn" in out.output


def test_eval_hf_streams_by_default_and_the_table_puts_both_ways_side_by_side(tmp_path):
    """`eval --hf` on a saved tiny Llama (a byte tokenizer): streamed 32 tokens per pass, then in one pass
    (`--stream 0`); each record says how it read its windows, and scripts/outside_tables.py finds the two within the
    tolerance it states."""
    import importlib.util
    import json
    from pathlib import Path

    from support import invoke, tiny_llama

    model = tiny_llama(tmp_path / "tiny", context=64)
    for stream, res in (("32", "streamed"), ("0", "one-pass")):
        args = ["--lengths", "4x", "--max-tokens", "2000", "--stream", stream, "--results", tmp_path / res]
        r = invoke("eval", "--hf", model, *args)
        assert r.exit_code == 0, r.output
        (rec,) = [json.loads(p.read_text()) for p in Path(tmp_path / res, "records").rglob("*.json")]
        assert rec["provenance"]["stream"] == (32 if stream == "32" else None)
    spec = importlib.util.spec_from_file_location(
        "outside_tables", Path(__file__).parents[1] / "scripts/outside_tables.py"
    )
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    text = tables.stream(tmp_path / "streamed", tmp_path / "one-pass", tmp_path / "streaming.md", "tiny")
    assert "| 256 | tiny (hf) |" in text and text.rstrip().endswith("within it.")
    assert "through the KV cache 32 tokens per pass" in text  # the compared cells' passes
    row = [c.strip() for c in next(x for x in text.splitlines() if x.startswith("| 256 |")).split("|")[1:-1]]
    # 2,000 tokens at 256: seven full windows and a short one of 215 tokens, 2,007 positions run in all (not 8 x 256)
    assert row[2] == "7 + 1 of 215 tokens"
    for res, col in (("one-pass", 9), ("streamed", 10)):  # tokens per second: positions run over the cell's wall time
        (rec,) = [json.loads(p.read_text()) for p in Path(tmp_path / res, "records").rglob("*.json")]
        assert rec["details"]["tokens_scored"] + rec["details"]["windows"] == 2007
        assert row[col] == f"{2007 / rec['provenance']['wall_s']:,.0f}"
        assert row[col - 2] == f"{256 * rec['provenance']['wall_s'] / 2007:.1f}"  # seconds per full window
    assert "| 256 | tiny (hf) |" in tables.profile([tmp_path / "streamed"], tmp_path / "profile.md", "tiny")
    named = tables.profile(
        [tmp_path / "streamed"], tmp_path / "profile.md", "tiny", untimed=frozenset({"tiny (hf)@256"})
    )
    assert "| 32 | n/a | n/a |" in named and "n/a: 1 cell(s) resumed" in named  # a cell named untimed: no time shown
    (path,) = Path(tmp_path / "streamed", "records").rglob("*.json")
    rec = json.loads(path.read_text())
    rec["provenance"]["resumed"] = {"windows_before": 3, "seconds_before": None, "segment_s": 1.0}
    path.write_text(json.dumps(rec))  # resumed from a journal that did not keep its time
    assert "| 32 | n/a | n/a |" in tables.profile([tmp_path / "streamed"], tmp_path / "profile.md", "tiny")
    for stream, res in (("32", "streamed"), ("0", "one-pass")):  # dynamic NTK: two forms, shown, not held to it
        args = ["--lengths", "4x", "--max-tokens", "2000", "--stream", stream, "--results", tmp_path / res]
        assert invoke("eval", "--hf", model, "--rope-scaling", "dynamic-ntk", *args).exit_code == 0
    dyn = tables.stream(tmp_path / "streamed", tmp_path / "one-pass", tmp_path / "streaming.md", "tiny")
    (row,) = [x for x in dyn.splitlines() if x.startswith("| 256 | tiny (hf)+dynamic-ntk |")]
    assert "(dynamic: differs by design)" in row and float(row.split("|")[6].strip().split("%")[0]) != 0
    assert dyn.rstrip().endswith("within it. Left out of it: 1 dynamic NTK row(s), whose two forms differ by design.")
    for res in ("streamed", "one-pass"):  # packed beside a set (scripts/real.sh), the same table from the packs
        r = invoke("pack", tmp_path / "set" / res, "--results", tmp_path / res)
        assert r.exit_code == 0, r.output
    packed = tables.stream(tmp_path / "set/streamed", tmp_path / "set/one-pass", tmp_path / "packed.md", "tiny")
    assert packed == dyn
    r = invoke("eval", "--stream", "8", "--results", tmp_path / "streamed")
    assert r.exit_code == 2 and "--stream reads an outside model's windows" in r.output


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("stream", [None, 48])
def test_answers_are_scored_a_chunk_of_positions_at_a_time_as_from_the_whole_logits(kind, stream, monkeypatch):
    """``scoring.score_positions`` on an outside model (the answers of mqar, index, niah, passkey, copy): the head
    never sees more than ``LOSS_CHUNK`` positions at once (before, a long answer span took the whole row's logits,
    8.6 GB of float32 a row for Gemma 3 at 8,192 tokens), and the credits and log-probabilities are those of the
    model's whole logits, for rows whose positions differ in number, one of them none."""
    from pebench.eval.scoring import score_positions
    from support import task_ctx

    monkeypatch.setattr(hf, "LOSS_CHUNK", 7)
    model, idx = built(kind), tokens(rows=3)
    seen = []
    model.get_output_embeddings().register_forward_hook(lambda m, a, out: seen.append(a[0].shape[-2]))
    positions = [torch.arange(30, 4 * CONTEXT).numpy(), torch.tensor([1, 5, 200]).numpy(), torch.zeros(0).numpy()]
    ctx = task_ctx(hf.HFLM(model, hf.OutsidePE(None), stream=stream))
    credit, logprob = score_positions(ctx, idx.numpy(), positions)
    assert seen and max(seen) <= 7
    with torch.inference_mode():
        whole = torch.log_softmax(model(input_ids=idx).logits.double(), -1)
    for row, p in enumerate(positions):
        p = torch.as_tensor(p, dtype=torch.long)
        lg = whole[row, p - 1]
        want_lp = lg.gather(1, idx[row, p][:, None])[:, 0]
        want_credit = (lg.argmax(-1) == idx[row, p]).double()
        assert logprob[row].shape == (len(p),) and credit[row].shape == (len(p),)
        assert torch.allclose(torch.from_numpy(logprob[row]), want_lp, atol=1e-4)
        assert torch.equal(torch.from_numpy(credit[row]), want_credit)
