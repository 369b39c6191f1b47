"""What `pebench run` does for speed: on workers, in which order and with how many threads its jobs run, and the
profile against the floor. Timings are measured by `bench` and the
profile, never asserted here."""

import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from pebench.config import load_config
from pebench.eval.flags import EvalFlags
from pebench.jobs.plan import eval_request, plan_runs
from pebench.jobs.profile import Phase, Profile, collect, markdown, peak_for_work
from pebench.jobs.sweep import Job, jobs_for
from pebench.model.checkpoint import train_flops
from pebench.results import ResultsDir


def test_training_flops_are_steps_times_tokens_times_flops_per_token():
    from pebench.model.checkpoint import build_model

    cfg = load_config("tiny")
    per_token = build_model(cfg).flops_per_token(cfg.model.context)
    assert train_flops(cfg) == cfg.train.steps * cfg.train.batch_size * cfg.model.context * per_token
    assert 5.0e6 < per_token < 6.5e6  # the ~5.7 MFLOP per token the main job's floor is computed from


def test_the_longest_job_starts_first(tmp_path):
    runs = plan_runs(load_config("tiny"), ["alibi", "rope", "none"], [0])
    jobs = jobs_for(ResultsDir(tmp_path), runs, eval_request(EvalFlags(rope_scaling="all")), overwrite=False)
    assert jobs[0].scheme == "rope"  # six evaluation variants
    assert jobs[0].cost > jobs[1].cost == jobs[2].cost


@pytest.mark.parametrize(
    "n, workers, cores, threads, last",
    [
        (7, 2, 2, [1] * 6 + [2], [False] * 6 + [True]),  # the main job: three pairs, then the cheapest with both cores
        (6, 2, 2, [1] * 6, [False] * 6),
        (5, 4, 8, [2, 2, 2, 2, 8], [False] * 4 + [True]),
        (3, 4, 4, [1, 1, 1], [True] * 3),  # fewer jobs than workers: one wave sharing every core
    ],
)
def test_threads_are_a_function_of_the_plan_never_of_timing(tmp_path, n, workers, cores, threads, last):
    """A job's thread count changes its floating-point results, so it is fixed by its place in the plan."""
    from pebench.jobs.sweep import assign_threads

    jobs = assign_threads([Job(f"j{i}", "rope", 0, tmp_path / f"j{i}.json") for i in range(n)], workers, cores)
    assert [j.threads for j in jobs] == threads and [j.last_wave for j in jobs] == last


def test_the_last_wave_starts_after_every_other_job(tmp_path, monkeypatch):
    """Workers run the first waves; the final partial wave starts only when all of them are done."""
    import pebench.jobs.sweep as sw

    order = []

    def fake(job, device):
        order.append(("start", job.name, job.threads))
        time.sleep(0.05 if job.name != "j0" else 0.3)  # j0 is slow: the last wave must wait for it
        order.append(("end", job.name, job.threads))
        job.state = "done"

    monkeypatch.setattr(sw, "_run_job", fake)
    monkeypatch.setattr(sw.os, "cpu_count", lambda: 2)
    jobs = [Job(f"j{i}", "rope", 0, tmp_path / f"j{i}.json") for i in range(3)]
    sw.run_sweep(jobs, ["cpu", "cpu"], ResultsDir(tmp_path), show=False)
    assert order.index(("start", "j2", 2)) > order.index(("end", "j0", 1))
    assert all(j.state == "done" for j in jobs)


def test_first_wave_jobs_split_into_training_then_evaluation_shares(tmp_path):
    """The main job's plan on two workers: six trainings, then each of their runs' evaluations in two shares (the
    longest length, the others) that wait for that training, costliest first; the last wave's job stays whole."""
    import json

    from pebench.jobs.sweep import assign_threads, read_job, split_evaluations

    runs = plan_runs(load_config("tiny"), ["none", "sinusoidal", "learned", "shaw", "t5", "rope", "alibi"], [0])
    jobs = assign_threads(
        jobs_for(ResultsDir(tmp_path), runs, eval_request(EvalFlags(rope_scaling="all")), False), 2, 2
    )
    items = split_evaluations(jobs)
    trains, shares, last = items[:6], items[6:18], items[18:]
    assert [j.name for j in trains] == [j.name for j in jobs[:6]] and len(items) == 19
    assert [j.name for j in last] == [jobs[6].name] and last[0].spec == jobs[6].spec and last[0].threads == 2
    assert [j.cost for j in shares] == sorted((j.cost for j in shares), reverse=True)
    assert shares[0].name == "rope-tiny-s0 eval L=2048" and shares[0].after is trains[0]
    for t in trains:
        part = json.loads(t.spec.read_text())
        assert (part["train"], part["evaluate"], t.threads, t.after) == (True, False, 1, None)
        mine = [j for j in shares if j.after is t]
        got = sorted(L for j in mine for L in read_job(j.spec)[3].only_lengths)
        assert got == [128, 256, 512, 1024, 2048] and all(j.run == t.name and j.threads == 1 for j in mine)
        assert all(json.loads(j.spec.read_text())["train"] is False for j in mine)
    assert read_job(shares[0].spec)[3].lengths is None  # the whole list still comes from the config


def test_an_evaluation_share_waits_for_its_training_and_fails_with_it(tmp_path, monkeypatch):
    import pebench.jobs.sweep as sw

    order = []

    def fake(job, device):
        order.append(("start", job.name))
        time.sleep(0.2 if job.name == "a" else 0.01)
        order.append(("end", job.name))
        job.state = "failed" if job.name == "b" else "done"

    monkeypatch.setattr(sw, "_run_job", fake)
    a, b = (Job(n, "rope", 0, tmp_path / f"{n}.json", threads=1) for n in "ab")
    jobs = [
        a,
        b,
        Job("a eval", "rope", 0, tmp_path / "ae.json", threads=1, run="a", after=a),
        Job("b eval", "rope", 0, tmp_path / "be.json", threads=1, run="b", after=b),
    ]
    sw.run_sweep(jobs, ["cpu", "cpu"], ResultsDir(tmp_path), show=False)
    assert order.index(("start", "a eval")) > order.index(("end", "a"))
    assert ("start", "b eval") not in order and jobs[3].error == "not started: b failed"
    assert [j.state for j in jobs] == ["done", "failed", "done", "failed"]


def test_the_profile_counts_this_invocations_work_against_the_floor(tmp_path):
    rd = ResultsDir(tmp_path)
    (name, cfg), (old, _) = plan_runs(load_config("tiny"), ["rope", "alibi"], [0])
    since = datetime.now(timezone.utc).replace(microsecond=0)
    for n, when, wall in ((name, since + timedelta(seconds=1), 100.0), (old, since - timedelta(days=1), 90.0)):
        rd.run_dir(n).mkdir(parents=True)
        (rd.run_dir(n) / "status.json").write_text(
            f'{{"state": "finished", "wall_s": {wall}, '
            f'"updated": "{when.isoformat()}", '
            '"env": {"device": "cpu", "threads": 2}}'
        )
    p = collect(rd, [(name, cfg), (old, cfg)], since, wall_s=200.0, peak_flops=1e11, workers=1)
    trained = [x for x in p.phases if x.kind == "train"]
    assert [x.name for x in trained] == [name]  # the run finished before this invocation is not counted
    assert p.floor_s == pytest.approx(train_flops(cfg) / 1e11)
    md = markdown(p)
    assert f"{200.0 / p.floor_s:.2f}x the floor" in md and f"| train | {name} | 100.00 |" in md
    assert Profile(10.0, 0.0, 1, [Phase("train", "x", 1.0, 5.0)]).floor_s == 0.0  # no peak: no floor claimed
    assert trained[0].threads == 2 and p.core_use == pytest.approx(100.0 * 2 / (p.cores * 200.0))
    assert f"The cores were busy {p.core_use:.0%} of the wall" in md


def test_the_profile_counts_only_the_segment_a_resumed_run_trained_here(tmp_path):
    """A run resumed in this invocation: its status's whole training time (``wall_s``) spans earlier invocations,
    so the profile takes this segment's seconds and its steps' share of the FLOPs."""
    rd = ResultsDir(tmp_path)
    ((name, cfg),) = plan_runs(load_config("tiny"), ["rope"], [0])
    since = datetime.now(timezone.utc).replace(microsecond=0)
    rd.run_dir(name).mkdir(parents=True)
    (rd.run_dir(name) / "status.json").write_text(
        f'{{"state": "finished", "steps": 400, "wall_s": 100.0, "segment_s": 25.0, "resumed_from": 300, '
        f'"updated": "{(since + timedelta(seconds=1)).isoformat()}", "env": {{"device": "cpu", "threads": 2}}}}'
    )
    (train,) = [x for x in collect(rd, [(name, cfg)], since, 50.0, 1e11, 1).phases if x.kind == "train"]
    assert train.seconds == 25.0 and train.flops == pytest.approx(train_flops(cfg) / 4)
    assert train.name == f"{name} (resumed at step 300)"


def test_the_cpu_peak_is_the_whole_machines_whatever_this_process_threads(monkeypatch):
    """A sweep's parent may run with OMP_NUM_THREADS=1 (its workers take a core each): the floor must still be the
    machine's, so the peak is measured with a thread per core, and the process's own count comes back after."""
    import os

    import torch

    import pebench.perf.bench as bench

    seen = []
    monkeypatch.setattr(bench, "matmul_peak", lambda *a, **k: seen.append(torch.get_num_threads()) or 1e9)
    own = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert peak_for_work("cpu", 1e6) == 1e9 and peak_for_work("cpu", 1e13) == 1e9
        assert seen == [os.cpu_count(), os.cpu_count()]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(own)


def test_core_use_counts_each_items_seconds_times_its_threads():
    """Two workers: a 1-thread training of 100 s and one of 60 s, then a 2-thread one of 30 s, an evaluation of
    20 s at 1 thread, a wall of 140 s on 2 cores: (100 + 60 + 60 + 20) / 280 busy. A GPU item: no claim."""
    items = [
        Phase("train", "a", 100.0, 1.0, 1),
        Phase("train", "b", 60.0, 1.0, 1),
        Phase("train", "c", 30.0, 1.0, 2),
        Phase("eval", "a L=16", 20.0, 0.0, 1),
        Phase("setup", "s", 5.0),
    ]
    assert Profile(140.0, 1e11, 2, items, cores=2).core_use == pytest.approx(240 / 280)
    assert Profile(140.0, 1e11, 2, items + [Phase("eval", "gpu", 3.0, 0.0, 0)], cores=2).core_use is None
    assert Profile(140.0, 1e11, 2, items).core_use is None  # cores unknown


def test_a_job_that_cannot_start_fails_alone_and_the_sweep_finishes(tmp_path, monkeypatch):
    import pebench.jobs.sweep as sw

    def fake(job, device):
        if job.name == "j0":
            raise OSError("no such interpreter")
        job.state = "done"

    monkeypatch.setattr(sw, "_run_job", fake)
    monkeypatch.setattr(sw.os, "cpu_count", lambda: 2)
    jobs = [Job(f"j{i}", "rope", 0, tmp_path / f"j{i}.json") for i in range(3)]
    sw.run_sweep(jobs, ["cpu", "cpu"], ResultsDir(tmp_path), show=False)  # returns: no worker waits forever
    assert [j.state for j in jobs] == ["failed", "done", "done"] and "no such interpreter" in jobs[0].error


_FAULTS = """
import resource, sys
import torch
from pebench.model.device import tune_cpu_allocator
print(tune_cpu_allocator())
def churn():  # a training step's pattern: several large activations written, then all freed
    xs = [torch.ones(1 << 21) for _ in range(6)]
    del xs
for _ in range(3):  # the heap settles within a few rounds
    churn()
rounds = []
for _ in range(10):
    f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn()
    rounds.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
print(",".join(map(str, rounds)))
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="the allocator setting is glibc's")
def test_the_tuned_allocator_keeps_freed_tensor_memory_in_the_process():
    """glibc's defaults give freed memory back to the kernel (trimming the heap's top past an adaptive threshold), so
    reusing it faults in fresh zeroed pages; tuned, once the heap has settled (three rounds), the same allocations
    fault no page. PEBENCH_MALLOC=system opts out."""
    import os
    import statistics
    import subprocess
    import sys

    def run(**env):
        out = subprocess.run(
            [sys.executable, "-c", _FAULTS], capture_output=True, text=True, check=True, env={**os.environ, **env}
        ).stdout.split()
        return out[0] == "True", [int(x) for x in out[1].split(",")]

    # Faults per round of 48 MB allocated and freed. With glibc's defaults the mmap threshold adapts to the first
    # freed 8 MB blocks, so the default's faults come in the rounds right after (one heap growth, about 4,100 faults)
    # and in some processes every round; a process's heap layout is random (address randomisation), so the default's
    # side takes up to five processes. The tuned allocator (thresholds fixed up front) faults nothing in its median
    # round (a rare single growth is one round).
    tuned, rounds = run()
    assert tuned and statistics.median(rounds) < 20, rounds
    tries = []
    while len(tries) < 5 and not any(statistics.mean(r) > 200 for r in tries):
        default, r = run(PEBENCH_MALLOC="system")
        assert not default
        tries.append(r)
    assert any(statistics.mean(r) > 200 for r in tries), tries  # glibc trims the heap's freed top


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    from pebench.model.device import native_bf16_cpu

    for flags, native in (
        ("fpu avx2 avx512f avx512_bf16 avx512bw", True),
        ("fpu avx2 amx_tile amx_bf16", True),
        ("fpu avx2 avx512f avx512bw avx512_vnni", False),
    ):
        info = tmp_path / f"cpuinfo-{native}-{len(flags)}"
        info.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
        assert native_bf16_cpu(str(info)) is native, flags
    assert native_bf16_cpu(str(tmp_path / "absent")) is False  # not Linux: fp32


def test_training_precision_auto_is_bf16_on_cuda_and_native_bf16_cpus_only(monkeypatch):
    import torch

    from pebench.model import device

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    for native, want in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(device, "native_bf16_cpu", lambda native=native: native)
        assert device.train_precision(cpu) == want and device.train_precision(cuda) == "bf16"
        assert device.train_precision(cpu, "fp32") == "fp32" and device.train_precision(cpu, "bf16") == "bf16"
        assert device.train_precision(cuda, "fp32") == "fp32"


def test_bf16_asked_for_on_a_cpu_that_emulates_it_is_noted_and_its_peak_measured_quickly(monkeypatch):
    """Without native bf16 matmuls oneDNN emulates them (here many times slower than fp32): a run asked to train in
    bf16 on such a CPU says so before it starts, and its bf16 floor takes the quick measure, not the seconds-long
    one. Not on CUDA, GPU workers, native CPUs or fp32."""
    import torch

    from pebench.jobs import profile
    from pebench.jobs.plan import cpu_bf16_notes
    from pebench.model import device
    from pebench.perf import bench

    sizes = []
    monkeypatch.setattr(bench, "matmul_peak", lambda dev, n=2048, dtype=None, **kw: sizes.append((n, dtype)) or 1e9)
    for native in (False, True):
        monkeypatch.setattr(device, "native_bf16_cpu", lambda native=native: native)
        notes = cpu_bf16_notes("local", "cpu", {"bf16", "fp32"}) + cpu_bf16_notes("cpu:2", "auto", {"bf16"})
        assert len(notes) == (0 if native else 2)
        assert all("bf16 on a CPU without native bf16 matmuls" in n and "avx512_bf16" in n for n in notes)
        assert cpu_bf16_notes("local", "cpu", {"fp32", "auto"}) == [] and cpu_bf16_notes("auto", "cpu", {"bf16"}) == []
        assert device.emulated_bf16_note(torch.device("cuda"), "bf16") == []
        profile.peak_for_work("cpu", 1e15, torch.bfloat16)
        profile.peak_for_work("cpu", 1e15)
    assert sizes == [(512, torch.bfloat16), (2048, None), (2048, torch.bfloat16), (2048, None)]


def test_a_precision_outside_the_list_is_one_line_and_auto_keeps_the_config_hash():
    from pebench.util.errors import UsageError

    cfg = load_config("tiny")
    with pytest.raises(UsageError, match="train.precision must be one of auto, fp32, bf16, got 'fp16'"):
        replace(cfg, train=replace(cfg.train, precision="fp16")).validate()
    d = cfg.to_dict()
    assert d["train"]["precision"] == "auto"
    import hashlib
    import json

    d.pop("name"), d.pop("eval"), d["train"].pop("precision")
    for k in ("needles", "needle_lengths", "needle_kinds", "induction_steps", "induction_lengths", "induction_kinds"):
        d["train"].pop(k)
    d["train"].pop("random_positions_float")  # added later, left out at its default
    for k in (
        "attention_sinks",
        "ssmax",
        "output_gate",
        "layers",
        "canon",
        "normaliser",
        "entmax_alpha",
        "asentmax_bias",
        "selective",
        "scale_invariant_tau",
    ):
        d["model"].pop(k)  # added later, left out at their defaults
    from pebench.config import LR_HASHED  # the rates of schemes added later: resolved into train.lr, left out

    d["train"]["lr_by_scheme"] = {k: v for k, v in d["train"]["lr_by_scheme"].items() if k in LR_HASHED}
    assert cfg.hash() == hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]  # as before the key
    assert replace(cfg, train=replace(cfg.train, precision="fp32")).hash() != cfg.hash()


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_bf16_cpu_training_attention_takes_the_fp32_path_and_matches_fp32(scheme):
    """bf16 CPU training attention (the fp32 path: the fused causal kernel, or one fp32 matmul plus the term) agrees
    with the fp32 reference to bf16's precision, in values and in gradients; fp32 and inference keep the fused
    kernel."""
    import torch

    from pebench.model.attention import _cpu_half_training, attend, attention_math
    from pebench.model.pe import PEContext, build_pe

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 16) for _ in range(3))
    pe = build_pe(scheme, PEContext(64, 4, 1, 64, 0), {}, "")
    mod = pe.score_mod(q, 0, k, None)
    outs = {}
    for dt in (torch.float32, torch.bfloat16):
        leaves = [t.clone().to(dt).requires_grad_() for t in (q, k, v)]
        fn = (
            (lambda a, b, c: attend(a, b, c, mod))
            if dt == torch.bfloat16
            else (lambda a, b, c: attention_math(a, b, c, mod, 16**-0.5)[0])
        )
        out = fn(*leaves)
        out.float().pow(2).sum().backward()
        outs[dt] = [out.float()] + [t.grad.float() for t in leaves]
    assert not _cpu_half_training(q, v)  # fp32: the fused kernel
    assert _cpu_half_training(q.bfloat16(), v.bfloat16())  # bf16 training: the fp32 path
    with torch.no_grad():
        assert not _cpu_half_training(q.bfloat16(), v.bfloat16())  # not for inference
    for ref, got in zip(outs[torch.float32], outs[torch.bfloat16]):
        assert (ref - got).abs().max() <= 0.03 * ref.abs().max() + 1e-3


def test_a_bf16_run_is_put_against_both_floors_and_the_budget_table_is_generated_from_profile_json(tmp_path):
    import json

    from pebench.findings.docs import render
    from pebench.jobs import profile

    phases = [Phase("train", "a", 50.0, 2e13, 2), Phase("eval", "a L=128", 10.0, 0.0, 2)]
    fp32 = Profile(80.0, 2e11, 1, phases)  # cores unknown: no core use claimed
    bf16 = Profile(40.0, 2e11, 2, phases, peak_bf16=8e11, cores=4, bf16_measured=(8e11, 5e11))
    assert "Trained in bf16" not in markdown(fp32) and fp32.floor_bf16_s == 0.0
    md = markdown(bf16)
    assert "**0.40x the floor**" in md and "bf16 matmul peak of 800.0 GFLOP/s" in md and "floor is 25 s, 1.60x" in md
    assert "(the higher of 800.0 before the jobs and 500.0 after them)" in md  # how far the host moved the peak
    for name, p, prec in (("a", fp32, ["fp32"]), ("b", bf16, ["bf16", "bf16"])):
        rd = ResultsDir(tmp_path / name)
        rd.root.mkdir()
        profile.write(rd, p, prec)
    facts = json.loads((tmp_path / "b" / "profile.json").read_text())
    assert facts["ratio"] == 0.4 and facts["floor_bf16_s"] == 25.0 and facts["precision"] == ["bf16"]
    assert facts["peak_bf16_before_after_gflops"] == [800.0, 500.0]
    doc = "x\n<!-- pebench:budgets sets=a,b -->\nstale\n<!-- pebench:end -->\n"
    out = render(doc, tmp_path).splitlines()
    a, b = [x for x in out if x.startswith("| `")]
    assert "| fp32 | 1 |  | 80 s | 50 s / 10 s | 200 GFLOP/s | 100 s | **0.80x** |" in a and a.endswith("|  |")
    assert "| bf16 | 2 | 75% | 40 s |" in b and "**0.40x** | 800 GFLOP/s | 1.60x |" in b and "stale" not in out
    assert facts["core_use"] == 0.75 and json.loads((tmp_path / "a" / "profile.json").read_text())["core_use"] is None
