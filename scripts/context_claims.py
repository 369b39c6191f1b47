"""Write a context set's claims.yaml: each finding of the suite stated as the count of draws (a seed in a training
precision) in which it holds, the count the set's records show, so every claim is decided seed by seed by the
engine's own rules and fails when a later draw changes the count. Run it after packing new draws into the set.

Usage: python scripts/context_claims.py results/context"""

import sys
from pathlib import Path

import yaml

from pebench.findings import claims as cl
from pebench.findings import rules

ROOT = Path(sys.argv[1])
NAME = {
    "rope": "RoPE",
    "shaw": "Shaw",
    "alibi": "ALiBi",
    "none": "NoPE",
    "sinusoidal": "sinusoidal positions",
    "learned": "learned positions",
    "t5": "T5",
}
COPY = dict(metric="copy_acc", protocol="text-k24-t20")
PASSKEY = dict(metric="passkey_exact", protocol="filler-t20")
MQAR = dict(metric="mqar_acc", protocol="filler-P4-Q4-t40")
MULTIV = dict(metric="niah_multivalue", protocol="filler-compact-D3-K4-Q2-t10-V4")
VT = dict(metric="vt_recall", protocol="filler-compact-C2-H2-t40")
PPL = dict(metric="ppl", protocol="sliding-s64")
plans = []


def plan(id_: str, tag: str, text: str, relation: str, a: dict, **rest) -> None:
    """One claim to decide: its id, tag, text ({k} of {n} filled in from the draws), relation and cells."""
    plans.append(dict(id=id_, tags=[tag], text=text, a=a, relation=relation, **rest))


CIRCUIT = "copy accuracy over text at 1x above 0.5 by the seed's prompts' interval"
for s in ("rope", "shaw", "alibi", "none", "sinusoidal", "learned", "t5"):
    text = f"The induction warm-up's copying circuit forms in {NAME[s]} in {{k}} of {{n}} draws ({CIRCUIT})."
    plan(f"circuit-{s}", "circuit", text, "above", dict(label=s, length="1x", **COPY), value=0.5)
for prec in ("bf16", "fp32"):
    text = f"In {prec} alone, RoPE's circuit forms in {{k}} of {{n}} draws (copy accuracy at 1x above 0.5 by the prompts' interval)."
    plan(
        f"circuit-rope-{prec}",
        "circuit",
        text,
        "above",
        dict(label="rope", length="1x", precision=prec, **COPY),
        value=0.5,
    )
for s in ("rope", "shaw", "alibi"):
    text = (
        f"{NAME[s]} writes the passkey (exact match at 1x above 0.4 by the prompts' interval) in {{k}} of {{n}} draws."
    )
    plan(f"passkey-{s}", "retrieval", text, "above", dict(label=s, length="1x", **PASSKEY), value=0.4)
    text = f"{NAME[s]} learns associative recall (mqar accuracy at 1x above 0.5 by the prompts' interval) in {{k}} of {{n}} draws."
    plan(f"mqar-{s}", "retrieval", text, "above", dict(label=s, length="1x", **MQAR), value=0.5)
plan(
    "multivalue-rope",
    "retrieval",
    "RoPE ranks a key's values above random ones (niah multivalue recall at 1x above 0.8 by the prompts' interval) in {k} of {n} draws.",
    "above",
    dict(label="rope", length="1x", **MULTIV),
    value=0.8,
)
plan(
    "rope-passkey-gone-at-4x",
    "extension",
    "Plain RoPE's passkey exact match at 4x is below 0.1 by the prompts' interval in {k} of {n} draws.",
    "below",
    dict(label="rope", length="4x", **PASSKEY),
    value=0.1,
)
plan(
    "yarn-passkey-at-4x",
    "extension",
    "YaRN keeps RoPE's passkey exact match above 0.4 at 4x in {k} of {n} draws.",
    "above",
    dict(label="rope+yarn", length="4x", **PASSKEY),
    value=0.4,
)
plan(
    "yarn-ppl-flat-at-2x",
    "extension",
    "YaRN's perplexity at 2x stays within 10% of its 1x value in {k} of {n} draws ...",
    "flat",
    dict(label="rope+yarn", length="2x", **PPL),
    b=dict(length="1x"),
    within=1.1,
)
plan(
    "yarn-passkey-falls-at-2x",
    "extension",
    "... while YaRN's passkey exact match at 2x is below its 1x value in {k} of {n} draws (disjoint intervals over each seed's prompts).",
    "lower",
    dict(label="rope+yarn", length="2x", **PASSKEY),
    b=dict(length="1x"),
)
for s in ("rope", "shaw", "alibi", "none", "sinusoidal", "learned", "t5"):
    text = f"{NAME[s]} does not track variables at 1x: vt recall below 0.5 by the prompts' interval (chance 0.25) in {{k}} of {{n}} draws."
    plan(f"vt-below-half-{s}", "retrieval", text, "below", dict(label=s, length="1x", **VT), value=0.5)
ev = cl.Evidence(ROOT)
out = []
for p in plans:
    probe = {**p, "rule": "seeds", "count": 0, "of": 1, "text": p["text"].format(k=0, n=1), "b_inherits": []}
    probe["a"] = {"split": "validation", **p["a"]}
    if "b" in p:
        probe["b"] = {**probe["a"], **p["b"]}
        probe["b_inherits"] = sorted(set(probe["a"]) - set(p["b"]))
    else:
        probe["b"] = None
    v = cl.check_claim(ev, probe)
    a = v.cells[0]
    b = v.cells[1] if p.get("b") else None
    draws = sorted(set(a.values) & set(b.values)) if b else sorted(a.values)
    held = [
        s
        for s in draws
        if rules.decide(
            {
                **probe,
                "rule": "ratio"
                if p["relation"] == "flat"
                else "intervals"
                if rules._has_trials(a.seed(s), None if b is None else b.seed(s))
                else "one-seed",
            },
            a.seed(s),
            None if b is None else b.seed(s),
        )[0]
    ]
    k, n = len(held), len(draws)
    c = {"id": p["id"], "tags": p["tags"], "text": p["text"].format(k=k, n=n), "a": p["a"]}
    if "b" in p:
        c["b"] = p["b"]
    c.update(relation=p["relation"], rule="seeds", count=k, of=n)
    for key in ("value", "within"):
        if key in p:
            c[key] = p[key]
    out.append(c)
    print(f"{p['id']}: {k} of {n}  held={[rules.draw_name(s) for s in held]}")
head = (
    "# The context suite's findings (configs/context.yaml, validation), each a count over every committed draw of the\n"
    "# suite (a draw: a seed in a training precision, bf16 (this CPU's default) or fp32; records.jsonl.gz), decided\n"
    "# draw by draw by the 95% interval over that draw's prompts (Wilson's at least). docs/context.md shows them.\n"
)
(ROOT / "claims.yaml").write_text(
    head + yaml.safe_dump({"defaults": {"split": "validation"}, "claims": out}, sort_keys=False, width=200)
)
