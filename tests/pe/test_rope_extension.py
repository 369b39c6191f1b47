"""RoPE extension end to end: variants at evaluation, a short long-context fine-tune with its parent."""

import json

import pytest
import torch
import yaml

from pebench.cli import app
from support import MICRO, runner


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def rope_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("ext")
    cfg = root / "micro.yaml"
    cfg.write_text(yaml.safe_dump(MICRO))
    res = root / "results"
    r = invoke("train", "--pe", "rope,alibi", "--config", cfg, "--results", res)
    assert r.exit_code == 0, r.output
    return res


def test_two_variants_write_two_rows(rope_run):
    r = invoke(
        "eval", "--run", "rope-micro-s0", "--rope-scaling", "none,yarn", "--lengths", "16,64", "--results", rope_run
    )
    assert r.exit_code == 0, r.output
    recs = [json.loads(p.read_text()) for p in (rope_run / "records" / "rope-micro-s0").glob("*.json")]
    by = {(x["label"], x["length"]): x for x in recs}
    assert set(by) == {("rope", 16), ("rope", 64), ("rope+yarn", 16), ("rope+yarn", 64)}
    y = by[("rope+yarn", 64)]["pe_state"]
    assert y["variant"] == "yarn" and y["factor"] == 4.0 and y["attention_factor"] == pytest.approx(1.1386294)
    assert by[("rope+yarn", 16)]["pe_state"]["factor"] == 1.0
    # at 1x yarn with factor 1 is exactly the default rotation
    assert by[("rope+yarn", 16)]["metrics"]["ppl"] == pytest.approx(by[("rope", 16)]["metrics"]["ppl"], rel=1e-6)
    r = invoke("report", "--format", "csv", "--results", rope_run)
    assert r.exit_code == 0 and "rope+yarn" in r.output


def test_scaling_applies_to_the_rope_runs_and_the_others_are_evaluated_as_trained(rope_run):
    """The README's workflow: `eval --rope-scaling ...` over RoPE and ALiBi runs scales the RoPE run and evaluates
    ALiBi as trained, with a note (exit 0); named for an ALiBi run alone, the scaling is an error for that run."""
    args = ["--rope-scaling", "linear", "--lengths", "16", "--results", rope_run]
    r = invoke("eval", "--run", "alibi-micro-s0", "--run", "rope-micro-s0", *args)
    assert r.exit_code == 0, r.output
    assert "note: run 'alibi-micro-s0' uses 'alibi', which has no RoPE scaling: evaluated as trained" in r.output
    assert "rope+linear" in r.output and not [x for x in r.output.splitlines() if x.startswith("error:")]
    r = invoke("eval", "--run", "alibi-micro-s0", *args)
    errors = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert r.exit_code == 1 and len(errors) == 1 and "RoPE family only" in errors[0]


def test_fixed_rope_factor(rope_run):
    r = invoke(
        "eval",
        "--run",
        "rope-micro-s0",
        "--rope-scaling",
        "linear",
        "--rope-factor",
        "2",
        "--lengths",
        "64",
        "--results",
        rope_run,
    )
    assert r.exit_code == 0, r.output
    folder = rope_run / "records" / "rope-micro-s0"
    rec = json.loads((folder / "rope-linear_factor2__nonoverlap__L64.json").read_text())
    assert rec["pe_state"]["factor"] == 2.0 and rec["variant"] == "linear:factor=2"
    # the fixed factor is named: it never takes the place of the automatic factor's record at the same length
    r = invoke("eval", "--run", "rope-micro-s0", "--rope-scaling", "linear", "--lengths", "64", "--results", rope_run)
    auto = json.loads((folder / "rope-linear__nonoverlap__L64.json").read_text())
    assert r.exit_code == 0 and auto["pe_state"]["factor"] == 4.0 and auto["variant"] == "linear"
    assert auto["metrics"]["ppl"] != rec["metrics"]["ppl"]


def test_scaling_settings_in_the_form_hf_takes(rope_run):
    """``yarn:factor=2:beta_fast=16`` works for pebench's runs as for --hf; the same as --rope-factor 2 with the
    option set, and a setting the scaling lacks is one line naming the ones it has."""
    args = ("--run", "rope-micro-s0", "--lengths", "64", "--results", rope_run)
    r = invoke("eval", "--rope-scaling", "yarn:factor=2:beta_fast=16,ntk:factor=2", *args)
    assert r.exit_code == 0, r.output
    folder = rope_run / "records" / "rope-micro-s0"
    yarn = json.loads((folder / "rope-yarn_beta_fast16_factor2__nonoverlap__L64.json").read_text())
    assert yarn["label"] == "rope+yarn:beta_fast=16:factor=2" and yarn["pe_state"]["factor"] == 2.0
    from pebench.model.pe import PEContext, build_pe

    pe = build_pe("rope", PEContext(256, 4, 2, 2048))
    ramp16 = pe.with_variant("yarn", 2.0, beta_fast=16.0).resolved(4096)[0]
    assert not torch.equal(ramp16, pe.with_variant("yarn", 2.0).resolved(4096)[0])  # the setting reaches the maths
    bad = invoke("eval", "--rope-scaling", "yarn:alpha=3", *args)
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    line = [x for x in bad.output.splitlines() if x.startswith("error:")][0]
    assert "'alpha=3'" in line and "beta_fast" in line and "factor" in line
    low = invoke("eval", "--rope-scaling", "linear:factor=0.5", *args)
    assert low.exit_code != 0 and "factor must be >= 1" in low.output


def test_finetune_records_parent_and_appears_in_report(rope_run):
    r = invoke(
        "train",
        "--pe",
        "rope",
        "--init-from",
        "rope-micro-s0",
        "--context",
        "4x",
        "--rope-scaling",
        "yarn",
        "--steps",
        "2",
        "--results",
        rope_run,
    )
    assert r.exit_code == 0, r.output
    name = "rope-micro-s0-ft-yarn-64"
    cfg = yaml.safe_load((rope_run / "runs" / name / "config.yaml").read_text())
    assert cfg["run"]["parent"] == "rope-micro-s0"
    assert cfg["model"]["context"] == 64
    assert cfg["model"]["pe_options"]["rope"] == {"scaling": "yarn", "factor": 4.0, "original_context": 16}
    r = invoke("eval", "--run", name, "--lengths", "64,128", "--results", rope_run)
    assert r.exit_code == 0, r.output
    rec = json.loads(next((rope_run / "records" / name).glob("*L64.json")).read_text())
    assert rec["label"] == "rope+yarn ft64" and rec["provenance"]["parent"] == "rope-micro-s0"
    assert rec["pe_state"]["factor"] == 4.0
    r = invoke("report", "--format", "md", "--results", rope_run)
    assert "rope+yarn ft64" in r.output
    # a scaling applied at evaluation over the baked one is another measurement: its own label, no overwrite
    r = invoke("eval", "--run", name, "--lengths", "128", "--rope-scaling", "yarn", "--results", rope_run)
    assert r.exit_code == 0, r.output
    baked = json.loads((rope_run / "records" / name / "rope-yarn_ft64__nonoverlap__L128.json").read_text())
    over = json.loads((rope_run / "records" / name / "rope-yarn_ft64_eval-yarn__nonoverlap__L128.json").read_text())
    assert baked["pe_state"]["factor"] == 4.0 and over["pe_state"]["factor"] == 8.0


def test_finetune_needs_a_rope_parent(rope_run):
    r = invoke(
        "train", "--init-from", "alibi-micro-s0", "--context", "2x", "--rope-scaling", "yarn", "--results", rope_run
    )
    assert r.exit_code == 2 and "needs a run of the RoPE family" in r.output


def test_the_clips_are_evaluated_when_named(rope_run):
    """`--rope-scaling none,clip-soft,clip-hard` writes their rows (the same at every length: no factor); the hard
    clip changes a RoPE run's 1x loss, where every scaling with a factor leaves 1x as trained."""
    args = ["--run", "rope-micro-s0", "--lengths", "16", "--results", rope_run]
    r = invoke("eval", "--rope-scaling", "none,clip-soft,clip-hard", *args)
    assert r.exit_code == 0, r.output
    recs = {x["label"]: x for x in (json.loads(p.read_text()) for p in (rope_run / "records").rglob("*.json"))}
    assert {"rope", "rope+clip-soft", "rope+clip-hard"} <= set(recs)
    assert recs["rope+clip-hard"]["pe_state"]["variant"] == "clip-hard"
    assert recs["rope+clip-hard"]["metrics"]["ppl"] != pytest.approx(recs["rope"]["metrics"]["ppl"], rel=1e-6)


def test_string_is_evaluated_when_named(rope_run):
    """`--rope-scaling string` writes its row (STRING's shifted positions, tests/pe/test_string.py)."""
    r = invoke("eval", "--run", "rope-micro-s0", "--lengths", "64", "--rope-scaling", "string", "--results", rope_run)
    assert r.exit_code == 0, r.output
    recs = [json.loads(p.read_text()) for p in (rope_run / "records").rglob("*.json")]
    rec = next(x for x in recs if x["label"] == "rope+string" and x["length"] == 64)
    assert rec["pe_state"]["variant"] == "string" and rec["metrics"]["ppl"] > 1
