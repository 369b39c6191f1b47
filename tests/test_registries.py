"""Everything a user can add is a registry entry, and these tests iterate the registries: a built-in scheme, task,
RoPE variant, logit scale, training-document kind or report format added as one new entry needs no test edit."""

import json
import re

import numpy as np
import pytest
import torch

from pebench.eval.tasks import TASKS, Metric, Task, register_task, task_names, task_options, unregister_task
from pebench.util.errors import UsageError
from pebench.util.parsing import parse_list
from support import invoke, write_micro


@pytest.mark.parametrize("name", task_names())
def test_every_task_option_is_set_through_the_one_channel(name):
    task = TASKS.get(name)
    for opt, default in task.options.items():
        text = {bool: "true", int: "7", float: "0.5", str: "x"}[type(default)]
        got = task_options([task], {f"{name}.{opt}": text})[name][opt]
        assert type(got) is type(default) and str(got).lower() == text
        assert task_options([task], {opt: text})[name][opt] == got  # unqualified: every task that takes it


def test_task_options_name_what_is_wrong():
    ppl, copy = TASKS.get("ppl"), TASKS.get("copy")
    having = ", ".join(sorted(n for n in task_names() if "depths" in TASKS.get(n).options))  # every task with depths
    with pytest.raises(UsageError, match=re.escape(f"'depths' is an option of {having}")):
        task_options([ppl, copy], {"depths": "0,1"})
    with pytest.raises(UsageError, match="task 'passkey' is not evaluated here"):
        task_options([ppl], {"passkey.trials": "3"})
    with pytest.raises(UsageError, match="must be int"):
        task_options([copy], {"copy.trials": "many"})


@pytest.mark.parametrize("name", task_names())
def test_every_task_declares_metrics_with_direction_and_a_version(name):
    task = TASKS.get(name)
    assert task.metrics and all(isinstance(m.higher_is_better, bool) for m in task.metrics)
    assert isinstance(task.version, int) and task.version >= 1
    assert all(m in {x.name for x in task.metrics} for m in task.summary_metrics())


class Constant(Task):
    name = "constant"
    description = "a stand-in: one metric equal to the length"
    metrics = (Metric("constant_len", "constant", True, "the length"),)
    fields = {}
    options = {"scale": 1.0}
    version = 1

    def measure(self, ctx, length):
        return {
            "status": "ok",
            "reason": None,
            "metrics": {"constant_len": length * ctx.options["scale"]},
            "intervals": {},
            "details": {},
        }


def test_records_of_another_task_version_are_never_reused_or_mixed(tmp_path):
    task = register_task(Constant())
    try:
        cfg = write_micro(tmp_path)
        res = tmp_path / "res"
        assert invoke("train", "--pe", "alibi", "--config", cfg, "--results", res).exit_code == 0
        r = invoke("eval", "--task", "constant", "--task-opt", "scale=2", "--lengths", "16", "--results", res)
        assert r.exit_code == 0, r.output
        (path,) = (res / "records" / "alibi-micro-s0").glob("constant__*.json")
        assert json.loads(path.read_text())["task_version"] == 1
        task.version = 2  # a changed template: the old record no longer counts
        r = invoke("report", "--metric", "constant_len", "--results", res)
        assert r.exit_code == 1 and "no records to report" in r.output and "version 1" in r.output
        r = invoke("run", "--pe", "alibi", "--config", cfg, "--task", "constant", "--lengths", "16", "--results", res)
        assert r.exit_code == 0, r.output
        assert json.loads(path.read_text())["task_version"] == 2  # measured again, not reused
    finally:
        unregister_task("constant")


@pytest.fixture
def tilted_variant():
    """A RoPE variant with an option of its own, registered from outside rope.py."""
    from pebench.model.pe.rope import ROPE_VARIANTS, default_inv_freq

    @ROPE_VARIANTS.register("tilted")
    def _tilted(head_dim, base, factor, original_context, tilt: float = 1.0):
        return default_inv_freq(head_dim, base) / tilt, 1.0

    yield
    ROPE_VARIANTS.unregister("tilted")


def test_a_rope_variant_takes_its_options_from_its_signature(tilted_variant):
    from pebench.model.pe import PEContext, build_pe
    from pebench.model.pe.rope import default_inv_freq

    pe = build_pe("rope", PEContext(32, 4, 2, 16), {"scaling": "tilted", "tilt": 4.0})
    assert torch.allclose(pe.resolved(64)[0], default_inv_freq(8, 10000.0) / 4.0)
    assert torch.allclose(pe.with_variant("tilted").resolved(64)[0], pe.resolved(64)[0])  # kept by eval copies
    assert torch.allclose(
        build_pe("xpos", PEContext(32, 4, 2, 16), {"scaling": "tilted"}).resolved(64)[0], default_inv_freq(8, 10000.0)
    )  # its default, in a subclass too
    with pytest.raises(UsageError, match="must be float"):
        build_pe("rope", PEContext(32, 4, 2, 16), {"scaling": "tilted", "tilt": "steep"})
    with pytest.raises(UsageError, match="tilt"):  # the unknown-option message lists the variants' options
        build_pe("rope", PEContext(32, 4, 2, 16), {"tiltt": 2.0})


def test_every_logit_scale_is_one_at_and_below_the_context_and_runs_in_the_model():
    from dataclasses import replace

    from pebench.model.decoder import DecoderLM
    from pebench.model.logit_scales import LOGIT_SCALES, logit_scale_factors
    from support import tiny_model_config

    for name in LOGIT_SCALES:
        assert logit_scale_factors(name, 16, 16, 0.4, "cpu") is None
        f = logit_scale_factors(name, 64, 16, 0.4, "cpu")
        assert f is None or (f.shape == (64,) and bool((f >= 1).all()))
        model = DecoderLM(replace(tiny_model_config("alibi"), logit_scale=name))
        assert torch.isfinite(model(torch.randint(0, 256, (1, 40)))).all()
    with pytest.raises(UsageError, match="unknown logit scale 'bogus'"):
        DecoderLM(replace(tiny_model_config("alibi"), logit_scale="bogus"))


def test_every_training_document_kind_fills_its_window_and_is_seeded():
    from pebench.data.needles import DOC_KINDS, training_document

    bg = np.frombuffer(b"the quick brown fox " * 20, dtype=np.uint8)[:129]
    for kind in DOC_KINDS:
        a = training_document(np.random.default_rng(3), bg, (4, 16), {kind: 1})
        b = training_document(np.random.default_rng(3), bg, (4, 16), {kind: 1})
        assert a.shape == bg.shape and a.dtype == np.uint8 and np.array_equal(a, b)


def test_every_report_format_renders_a_table():
    import pandas as pd

    from pebench.findings import report as rp

    df = pd.DataFrame(
        [
            {
                "task": "ppl",
                "run": f"{s}-s0",
                "label": s,
                "scheme": s,
                "variant": "none",
                "seed": 0,
                "protocol": "nonoverlap",
                "length": L,
                "train_context": 16,
                "status": "ok",
                "ppl": 2.0 + L / 16 + (s == "alibi"),
                "intervals": {},
                "details": {},
                "split": "validation",
                "position_buckets": None,
            }
            for s in ("rope", "alibi")
            for L in (16, 32)
        ]
    )
    t = rp.build_table(df)
    for name, fmt in rp.REPORT_FORMATS.items():
        out = fmt(t)
        text = out if isinstance(out, str) else str(out.columns[0].header)
        assert text and (not isinstance(out, str) or "rope" in out), name


def test_one_row_order_everywhere():
    from pebench.util.groups import SCHEME_ORDER, row_key

    labels = ["zzz-user", "rope+yarn", "alibi", "rope", "none", "rope ft512", "kerple"]
    assert sorted(labels, key=row_key) == ["none", "rope", "rope ft512", "rope+yarn", "alibi", "kerple", "zzz-user"]
    assert sorted(SCHEME_ORDER[::-1], key=row_key) == SCHEME_ORDER


@pytest.mark.parametrize(
    "spec, kw, want",
    [
        ("1,2,3", {"item": int}, [1, 2, 3]),
        (["a", "b"], {}, ["a", "b"]),
        (None, {}, None),
        (" 0.5 , 2 ", {"item": float, "lo": 0}, [0.5, 2.0]),
    ],
)
def test_one_list_parser(spec, kw, want):
    assert parse_list(spec, "--x", **kw) == want


@pytest.mark.parametrize(
    "spec, kw, msg",
    [
        ("1,,2", {"item": int}, "comma-separated list of integers"),
        ("1,a", {"item": int}, "must be integers"),
        ("1,1", {"item": int}, "twice"),
        ("1,0", {"item": int, "lo": 1}, "must be >= 1 each"),
        ("", {}, "list of names"),
    ],
)
def test_one_list_parser_says_what_is_wrong(spec, kw, msg):
    with pytest.raises(UsageError, match=msg):
        parse_list(spec, "--x", **kw)
