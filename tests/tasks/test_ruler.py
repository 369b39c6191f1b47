"""RULER-style tasks (niah variants, vt, mqar): prompts decode to the intended text with keys, values and queries
where stated; a model handed the answer scores 1.0 and a uniform one exactly the stated chance; impossible settings
get one line; effective length by its rule; the training-document kinds; the context suite's settings."""

import math

import numpy as np
import pytest
import torch

from pebench.data import ruler
from pebench.data.needles import FILLER, training_document
from pebench.eval.scoring import Protocol
from pebench.eval.tasks import TASKS, task_options
from pebench.eval.tasks import mqar as mqar_task
from pebench.eval.tasks import niah as niah_task
from pebench.util.errors import UsageError
from support import Oracle, Uniform, invoke, task_ctx

NIAH_OPTS = {**TASKS.get("niah").options, "trials": 4, "depths": "0,0.5,1"}


def text(p):
    return bytes(p.tokens).decode()


# -- prompts ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ruler.NIAH_VARIANTS)
@pytest.mark.parametrize("length,form", [(128, "compact"), (512, "compact"), (1200, "standard")])
def test_niah_prompt_decodes_to_its_needles_question_and_answers(variant, length, form):
    rng = np.random.default_rng(1)
    p = ruler.niah_prompt(rng, variant, length, 0.5, form, keys=4, values=4, queries=2, distractors=3)
    s = text(p)
    assert len(p.tokens) == length and p.form == form
    assert s.startswith(ruler.HEAD) == (form == "standard")
    keys, values = p.meta["keys"], p.meta["values"]
    n = {"single": 1, "multikey": 4, "multivalue": 4, "multiquery": 4}[variant]
    assert len(keys) == len(values) == len(p.inserts) == n
    assert len(set(values)) == n and all(len(v) == p.meta["digits"] and v.isdigit() for v in values)
    assert len(set(keys)) == (1 if variant == "multivalue" else n)
    for start, k, v in zip(p.inserts, keys, values):  # every needle where the prompt says, with its key and value
        needle = ruler.NEEDLE[form].format(key=k, value=v)
        assert s[start : start + len(needle)] == needle and s[start - 1] == " "
    asked = [keys[i] for i in p.meta["asked"]]
    for (a, b), want in zip(p.answers, p.texts if variant != "multivalue" else p.texts[:1]):
        assert s[a:b] == want  # the answer bytes scored are the asked key's value
    assert p.answers[-1][1] in (length, length - 1)  # the answer ends the window (multiquery standard: then '.')
    q = ruler.ASK_ALL if variant in ("multivalue", "multiquery") else ruler.ASK_ONE
    if variant == "multiquery":
        assert [values[i] for i in p.meta["asked"]] == p.texts and len(p.texts) == 2
        if form == "compact":
            assert s.endswith(" ".join(f"{k}: {values[keys.index(k)]}." for k in asked))
        else:
            assert q[form].format(key=", ".join(asked)) in s
    else:
        assert s[: p.answers[0][0]].endswith(q[form].format(key=keys[0]) + " ")
    if variant == "multivalue":
        assert sorted(p.texts) == sorted(values) and len(p.candidates) == 3
        assert not set(p.candidates) & set(values) and all(len(c) == p.meta["digits"] for c in p.candidates)


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
def test_niah_single_needle_sits_at_its_depth_of_the_haystack(depth):
    p = ruler.niah_prompt(np.random.default_rng(0), "single", 600, depth, "compact")
    needle = ruler.NEEDLE["compact"].format(key=p.meta["keys"][0], value=p.meta["values"][0])
    tail = ruler.ASK_ONE["compact"].format(key=p.meta["keys"][0]) + " " + p.texts[0]
    room = 600 - ruler.fixed_bytes([needle], tail)
    assert p.inserts[0] == round(depth * room) + 1
    hay = text(p)[: p.inserts[0] - 1] + text(p)[p.inserts[0] + len(needle) + 1 : -len(tail) - 1]
    assert len(hay) == room and ((FILLER + " ") * 20).startswith(hay)


def test_vt_prompt_chains_are_in_order_and_the_answer_is_a_name_of_the_asked_chain():
    for length, form in [(128, "compact"), (900, "standard")]:
        p = ruler.vt_prompt(np.random.default_rng(3), length, form, chains=2, hops=2)
        s = text(p)
        names, values = p.meta["names"], p.meta["values"]
        assert len(p.tokens) == length and s.endswith(" " + names[0])
        assert p.texts == names[:3] and p.candidates == names[3:]
        for (c, h), start in zip(p.meta["statements"], p.inserts):
            chain = names[c * 3 : (c + 1) * 3]
            want = (
                ruler.VT_VALUE[form].format(name=chain[0], value=values[c])
                if h == 0
                else ruler.VT_COPY[form].format(name=chain[h], source=chain[h - 1])
            )
            assert s[start : start + len(want)] == want
        for c in range(2):  # each chain's statements appear in hop order
            starts = [st for (cc, _), st in zip(p.meta["statements"], p.inserts) if cc == c]
            assert starts == sorted(starts)
        assert ruler.VT_ASK[form].format(value=values[0], n=3) in s


def test_mqar_prompt_opens_with_the_pairs_and_queries_them_at_spread_depths():
    p = ruler.mqar_prompt(np.random.default_rng(5), 256, pairs=6, queries=3)
    s = text(p)
    keys, vals = p.meta["keys"], p.meta["values"]
    block = " ".join(f"{k}={v}" for k, v in zip(keys, vals))
    assert s[p.inserts[0] : p.inserts[0] + len(block)] == block and p.inserts[0] == 1
    assert len(set(p.meta["asked"])) == 3 and s.endswith(f"{keys[p.meta['asked'][-1]]}={vals[p.meta['asked'][-1]]}")
    for (a, b), i, start in zip(p.answers, p.meta["asked"], p.inserts[1:]):
        assert s[start:b] == f"{keys[i]}={vals[i]}" and s[a:b] == vals[i]
    gaps = np.diff([p.inserts[0] + len(block)] + [a for a, _ in p.answers])
    assert gaps.min() > 40  # spread out, not bunched


# -- scoring: handed the answer scores 1, uniform scores chance ------------------------------------------------------
class AnswerOracle(torch.nn.Module):
    """Handed the answers: the copier's one-hot logits on rows that hold a true answer, uniform logits elsewhere."""

    def __init__(self, true_rows):
        super().__init__()
        self.true = true_rows

    def forward(self, x):
        out = torch.zeros(*x.shape, 256)
        hot = Oracle()(x)
        for i, row in enumerate(x):
            if bytes(row.to(torch.uint8).tolist()) in self.true:
                out[i] = hot[i]
        return out


def true_rows(prompts):
    rows = set()
    for p in prompts:
        a, b = p.answers[0]
        for t in p.texts:
            r = np.array(p.tokens, copy=True)
            r[a:b] = np.frombuffer(t.encode(), dtype=np.uint8)
            rows.add(bytes(r))
    return rows


def niah_prompts(length, opts):
    depths = [0.0, 0.5, 1.0]
    return {
        v: [p for i, d in enumerate(depths) for p in niah_task.cell_prompts(v, length, i, d, opts, 0)]
        for v in ruler.NIAH_VARIANTS
    }


def test_niah_handed_the_answer_scores_one_and_uniform_scores_chance():
    task, L = TASKS.get("niah"), 256
    prompts = niah_prompts(L, NIAH_OPTS)
    oracle = AnswerOracle(
        true_rows(prompts["multivalue"])
        | {bytes(p.tokens) for v in ("single", "multikey", "multiquery") for p in prompts[v]}
    )
    out = task.measure(task_ctx(oracle, **NIAH_OPTS), L)
    assert out["metrics"] == {f"niah_{v}": 1.0 for v in ruler.NIAH_VARIANTS}
    assert [(c["variant"], c["depth"]) for c in out["details"]["cells"]][:3] == [("single", d) for d in (0, 0.5, 1)]
    uni = task.measure(task_ctx(Uniform(), **NIAH_OPTS), L)["metrics"]
    for v in ("single", "multikey", "multiquery"):  # every digit a tenth: a value's chance is 10^-digits
        assert uni[f"niah_{v}"] == pytest.approx(np.mean([10.0 ** -p.meta["digits"] for p in prompts[v]]))
    assert uni["niah_multivalue"] == pytest.approx(1 / (1 + NIAH_OPTS["distractors"]))


def test_vt_and_mqar_handed_the_answer_score_one_and_uniform_scores_chance():
    vt = TASKS.get("vt")
    opts = {**vt.options, "trials": 6, "form": "compact"}
    rng = np.random.default_rng([0, ruler_eval(), 4, 200])
    prompts = [ruler.vt_prompt(rng, 200, "compact", 2, 2) for _ in range(6)]
    out = vt.measure(task_ctx(AnswerOracle(true_rows(prompts)), **opts), 200)
    assert out["metrics"] == {"vt_recall": 1.0, "vt_direct": 1.0} and len(out["details"]["hops"]) == 3
    uni = vt.measure(task_ctx(Uniform(), **opts), 200)["metrics"]
    assert uni["vt_recall"] == pytest.approx(1 / 4) and uni["vt_direct"] == pytest.approx(1 / 4)
    mq = mqar_task.MqarTask()
    o = {**mq.options, "trials": 5}
    assert mq.measure(task_ctx(Oracle(), **o), 256)["metrics"]["mqar_acc"] == 1.0
    u = mq.measure(task_ctx(Uniform(), **o), 256)["metrics"]
    assert u["mqar_acc"] == pytest.approx(1e-3) and u["mqar_loss"] == pytest.approx(math.log(256), rel=1e-5)


class WholeRows(torch.nn.Module):
    """The same model without ``logits_from``: every row runs whole (the path of a model that cannot share a prefix)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


@pytest.mark.parametrize("pe", ["alibi", "rope", "shaw"])
def test_ranking_with_the_prefix_run_once_equals_every_row_run_whole(pe):
    """niah multivalue and vt rank answers tried in one slot; running the shared prefix once per prompt gives the
    slot log-likelihoods, hence the records, of running every row whole (a trained-like model: weights perturbed)."""
    from pebench.eval.scoring import score_positions, slot_logprobs
    from pebench.model.decoder import DecoderLM
    from support import tiny_model_config

    torch.manual_seed(0)
    m = DecoderLM(tiny_model_config(pe, context=64)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    p = niah_prompts(200, NIAH_OPTS)["multivalue"][0]
    s, e = p.answers[0]
    rows = np.stack([p.tokens] * 7)
    for r, c in zip(rows, list(p.texts) + list(p.candidates)):
        r[s:e] = np.frombuffer(c.encode(), dtype=np.uint8)
    (once,) = slot_logprobs(task_ctx(m), [(rows, s, e)])
    whole = np.stack(score_positions(task_ctx(WholeRows(m)), rows, [np.arange(s, e)] * 7)[1])
    np.testing.assert_allclose(once, whole, rtol=1e-5, atol=1e-5)
    assert np.ptp(once.sum(1)) > 1e-3  # the answers score differently: the slot is read
    vt = TASKS.get("vt")
    opts = {**vt.options, "trials": 6, "form": "compact"}
    for task, o, L in ((TASKS.get("niah"), NIAH_OPTS, 200), (vt, opts, 200)):
        a, b = task.measure(task_ctx(m, **o), L), task.measure(task_ctx(WholeRows(m), **o), L)
        assert a["metrics"] == pytest.approx(b["metrics"], rel=1e-9)
        assert all(a["intervals"][k] == pytest.approx(b["intervals"][k], rel=1e-9) for k in b["intervals"])


def ruler_eval():
    from pebench.data.needles import EVAL

    return EVAL


# -- bad input ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "task,opts,msg",
    [
        ("niah", {"queries": 0}, "niah.queries must be an integer >= 1"),
        ("niah", {"queries": 5}, r"niah.queries \(5\) must be at most niah.keys \(4\)"),
        ("niah", {"depths": "0,1.5"}, "niah.depths"),
        ("niah", {"keys": 9}, "niah multikey with keys=9.*needs windows of at least"),
        ("niah", {"variants": "single,many"}, "variants are single, multikey"),
        ("vt", {"chains": 1}, "vt.chains must be an integer >= 2"),
        ("vt", {"hops": 6}, "vt with 2 chains of 6 hops needs windows of at least"),
        (
            "mqar",
            {"pairs": 20},
            r"mqar with 20 pairs and 4 queries needs windows of at least \d+ tokens.*at most \d+ pairs",
        ),
        ("mqar", {"queries": 0}, "mqar.queries must be an integer >= 1"),
    ],
)
def test_impossible_settings_get_one_line(task, opts, msg):
    t = TASKS.get(task)
    with pytest.raises(UsageError, match=msg):
        t.check({**t.options, **opts}, [128, 256], 128, 10_000, Protocol())


def test_an_impossible_setting_on_the_command_line_exits_2_with_one_line(tmp_path):
    r = invoke("eval", "--run", tmp_path / "nothing", "--task", "mqar", "--task-opt", "pairs=40", "--lengths", "128")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


# -- effective length ----------------------------------------------------------------------------------------------
def table(values, one=None, metric="niah_single"):
    from pebench.findings.report import Table

    lengths = [128, 256, 512, 1024]
    cells = {("m", L): (v, 0.0, 1, (one or {}).get(L)) for L, v in zip(lengths, values)}
    return Table(
        metric, "p", lengths, {L: f"{L // 128}x" for L in lengths}, ["m"], cells, {}, 128, "validation", True, 2, "niah"
    )


def test_effective_length_is_the_longest_length_within_both_rules():
    from pebench.findings.effective import effective_length, effective_text

    assert effective_length(table([0.9, 0.8, 0.7, 0.9]), "m")[0] == 256  # 0.7 < 0.85 * 0.9: stops, never resumes
    assert effective_length(table([0.9, 0.9, 0.8, 0.77]), "m")[0] == 1024  # 0.77 >= 0.765
    assert effective_length(table([0.55, 0.5, 0.49, 0.6]), "m")[0] == 256  # absolute 0.5: 0.49 fails
    assert effective_length(table([0.4, 0.4, 0.4, 0.4]), "m")[0] == 0  # below the threshold at 1x
    assert effective_length(table([0.9, 0.9, 0.9, 0.9], metric="mqar_loss"), "m") is None  # no threshold
    one = {128: (0.8, 1.0), 256: (0.7, 0.95), 512: (0.6, 0.9), 1024: (0.3, 0.8)}
    t = table([0.9, 0.85, 0.8, 0.5], one)
    # point: 0.5 < 0.765 at 1024 -> 512; lo: 0.7 < 0.85 * 1.0 at 256 -> 128; hi: 0.8 >= 0.85 * 0.8 -> 1024
    assert effective_length(t, "m") == (512, 128, 1024) and effective_text(t, "m") == "512 [128, 1024]"
    from pebench.findings.report import to_markdown

    md = to_markdown(t)
    assert "effective length |" in md and "| 512 [128, 1024] |" in md


# -- training documents and the suite -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["niah", "vt", "mqar"])
def test_training_documents_are_answered_prompts_of_the_window(kind):
    bg = np.frombuffer(b"The quick brown fox jumps over the lazy dog. " * 3, dtype=np.uint8)[:129]
    docs = [bytes(training_document(np.random.default_rng(s), bg, (16, 32), {kind: 1})) for s in range(20)]
    assert all(len(d) == 129 for d in docs) and len(set(docs)) == 20
    for d in docs:
        s = d.decode()
        if kind == "mqar":  # every query repeats a pair of the block
            pairs = [w for w in s.split() if "=" in w]
            n = next(i for i, w in enumerate(s.split()) if "=" not in w)
            assert set(pairs[n:]) <= set(pairs[:n]) and len(pairs) > n
        elif kind == "vt":
            value, name = s.split(" in ")[-2][-5:], s.split(" in ")[-1]
            assert value.isdigit() and f"{name} = " in s
        else:
            key, value = s.rsplit(": ", 1)[0].split()[-1], s.rsplit(": ", 1)[1].strip(".").split(".")[0]
            assert f"{key}: {value}" in s[: s.rindex(f"{key}: ")]  # the answer is a needle of the window


def test_the_context_suite_sets_its_task_options_and_a_users_key_wins():
    from pebench.eval.tasks import parse_task_opts, resolve_tasks
    from pebench.jobs.plan import suite_task_opts
    from pebench.jobs.suites import get_suite

    st = get_suite("context")
    tasks = resolve_tasks(st.tasks)
    opts = task_options(tasks, {**parse_task_opts(suite_task_opts(st, tasks, None)), "trials": 20})
    assert opts["niah"]["form"] == "compact" and opts["niah"]["trials"] == 10 and opts["passkey"]["trials"] == 20
    mine = suite_task_opts(st, tasks, ["niah.trials=3"])
    assert "niah.trials=10" not in mine and task_options(tasks, parse_task_opts(mine))["niah"]["trials"] == 3
    only = resolve_tasks("ppl,passkey")
    assert suite_task_opts(st, only, None) == []  # options of tasks not evaluated are left out


def test_effective_length_plot_and_html_column(tmp_path):
    from pebench.findings.effective import plots
    from pebench.findings.html import table_html

    one = {128: (0.8, 1.0), 256: (0.7, 0.95), 512: (0.6, 0.9), 1024: (0.3, 0.8)}
    t = table([0.9, 0.85, 0.8, 0.5], one)
    (path,) = plots({"niah": [t]}, tmp_path)
    assert path.name == "effective_niah.png" and path.read_bytes()[:4] == b"\x89PNG"
    html = table_html(t)
    assert "<th>effective length</th>" in html and "<td>512 [128, 1024]</td>" in html


@pytest.mark.parametrize("merge_space", [False, True])
def test_a_token_niah_answer_is_the_values_own_tokens_never_a_lone_space_before_it(merge_space):
    """A tokenizer that writes the space before a number as its own token (SmolLM2's) keeps that token in the prompt
    but does not score it (after "is" the needle read "is: ", so a model may expect ":" there); one that merges it
    into the first digit (GPT-2's) scores that token. Either way the prompt is exactly L tokens."""

    def encode(text):  # one token a character; with merge_space, " d" (a space and a digit) is one token
        out, i = [], 0
        while i < len(text):
            if merge_space and text[i] == " " and i + 1 < len(text) and text[i + 1].isdigit():
                out.append(1000 + ord(text[i + 1]))
                i += 2
            else:
                out.append(ord(text[i]))
                i += 1
        return np.asarray(out, dtype=np.int64)

    for variant in ("single", "multiquery"):
        p = ruler.niah_prompt(np.random.default_rng(3), variant, 400, 0.5, "compact", encode=encode)
        assert len(p.tokens) == 400
        for (a, b), value in zip(p.answers, p.texts):
            whole = encode(" " + value)
            assert p.tokens[a - len(whole) + (b - a) : b].tolist() == whole.tolist()  # the value as encoded
            if merge_space:  # " 1" is one token: it is the value's first, scored
                assert p.tokens[a:b].tolist() == whole.tolist() and p.tokens[a] == 1000 + ord(value[0])
            else:  # " " then the digits: the space stays before the span, unscored
                assert p.tokens[a - 1] == ord(" ") and "".join(chr(t) for t in p.tokens[a:b]) == value
