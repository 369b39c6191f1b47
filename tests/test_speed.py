"""What `pebench run` does for speed: on workers, in which order and with how many threads its jobs run, and the
profile against the floor. Timings are measured by `bench` and the
profile, never asserted here."""
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from pebench.config import load_config
from pebench.plan import eval_request, plan_runs
from pebench.checkpoint import train_flops
from pebench.profile import Phase, Profile, collect, markdown
from pebench.results import ResultsDir
from pebench.sweep import Job, jobs_for


def test_training_flops_are_steps_times_tokens_times_flops_per_token():
    from pebench.checkpoint import build_model

    cfg = load_config("tiny")
    per_token = build_model(cfg).flops_per_token(cfg.model.context)
    assert train_flops(cfg) == cfg.train.steps * cfg.train.batch_size * cfg.model.context * per_token
    assert 5.0e6 < per_token < 6.5e6  # the ~5.7 MFLOP per token the main job's floor is computed from


def test_the_longest_job_starts_first(tmp_path):
    runs = plan_runs(load_config("tiny"), ["alibi", "rope", "none"], [0])
    jobs = jobs_for(ResultsDir(tmp_path), runs, eval_request(rope_scaling="all"), overwrite=False)
    assert jobs[0].scheme == "rope"  # six evaluation variants
    assert jobs[0].cost > jobs[1].cost == jobs[2].cost


@pytest.mark.parametrize("n, workers, cores, threads, last", [
    (7, 2, 2, [1] * 6 + [2], [False] * 6 + [True]),  # the main job: three pairs, then the cheapest with both cores
    (6, 2, 2, [1] * 6, [False] * 6),
    (5, 4, 8, [2, 2, 2, 2, 8], [False] * 4 + [True]),
    (3, 4, 4, [1, 1, 1], [True] * 3),  # fewer jobs than workers: one wave sharing every core
])
def test_threads_are_a_function_of_the_plan_never_of_timing(tmp_path, n, workers, cores, threads, last):
    """A job's thread count changes its floating-point results, so it is fixed by its place in the plan."""
    from pebench.sweep import assign_threads

    jobs = assign_threads([Job(f"j{i}", "rope", 0, tmp_path / f"j{i}.json") for i in range(n)], workers, cores)
    assert [j.threads for j in jobs] == threads and [j.last_wave for j in jobs] == last


def test_the_last_wave_starts_after_every_other_job(tmp_path, monkeypatch):
    """Workers run the first waves; the final partial wave starts only when all of them are done."""
    import pebench.sweep as sw

    order = []

    def fake(job, device, workers):
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


def test_the_profile_counts_this_invocations_work_against_the_floor(tmp_path):
    rd = ResultsDir(tmp_path)
    (name, cfg), (old, _) = plan_runs(load_config("tiny"), ["rope", "alibi"], [0])
    since = datetime.now(timezone.utc).replace(microsecond=0)
    for n, when, wall in ((name, since + timedelta(seconds=1), 100.0), (old, since - timedelta(days=1), 90.0)):
        rd.run_dir(n).mkdir(parents=True)
        (rd.run_dir(n) / "status.json").write_text(f'{{"state": "finished", "wall_s": {wall}, '
                                                   f'"updated": "{when.isoformat()}"}}')
    p = collect(rd, [(name, cfg), (old, cfg)], since, wall_s=200.0, peak_flops=1e11, workers=1)
    trained = [x for x in p.phases if x.kind == "train"]
    assert [x.name for x in trained] == [name]  # the run finished before this invocation is not counted
    assert p.floor_s == pytest.approx(train_flops(cfg) / 1e11)
    md = markdown(p)
    assert f"{200.0 / p.floor_s:.2f}x the floor" in md and f"| train | {name} | 100.00 |" in md
    assert Profile(10.0, 0.0, 1, [Phase("train", "x", 1.0, 5.0)]).floor_s == 0.0  # no peak: no floor claimed


def test_a_job_that_cannot_start_fails_alone_and_the_sweep_finishes(tmp_path, monkeypatch):
    import pebench.sweep as sw

    def fake(job, device, workers):
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
from pebench.device import tune_cpu_allocator
print(tune_cpu_allocator())
def churn():  # a training step's pattern: several large activations written, then all freed
    xs = [torch.ones(1 << 21) for _ in range(6)]
    del xs
for _ in range(3):  # the heap settles within a few rounds
    churn()
f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    churn()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f) / 10)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="the allocator setting is glibc's")
def test_the_tuned_allocator_keeps_freed_tensor_memory_in_the_process():
    """glibc's defaults give freed memory back to the kernel (trimming the heap's top past an adaptive threshold), so
    reusing it faults in fresh zeroed pages; tuned, once the heap has settled (three rounds), the same allocations fault no page. PEBENCH_MALLOC=system opts out."""
    import os
    import subprocess
    import sys

    def run(**env):
        out = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, check=True,
                             env={**os.environ, **env}).stdout.split()
        return out[0] == "True", float(out[1])

    tuned, faults = run()
    default, faults_default = run(PEBENCH_MALLOC="system")
    assert tuned and not default
    assert faults_default > 200  # glibc trims the heap's freed top: hundreds of fresh pages every round
    assert faults < 20


def test_the_optimizer_is_fused_on_the_cpu_and_takes_the_reference_step():
    """make_optimizer uses the fused AdamW kernel on the CPU too; its updates equal the reference (for-loop) AdamW's
    with the same groups (decay on matrices, none on norms) up to rounding, over several steps."""
    import torch

    from pebench.checkpoint import build_model
    from pebench.train import make_optimizer

    cfg = load_config("tiny")
    cfg = replace(cfg, model=replace(cfg.model, d_model=32, n_layers=2, d_mlp=64, context=16))
    torch.manual_seed(0)
    a, b = build_model(cfg), build_model(cfg)
    b.load_state_dict(a.state_dict())
    start = {k: v.clone() for k, v in a.state_dict().items()}
    opt = make_optimizer(a, cfg.train, torch.device("cpu"))
    assert opt.defaults["fused"] is True
    name_of = {id(p): n for n, p in a.named_parameters()}
    mine = dict(b.named_parameters())
    ref = torch.optim.AdamW([{"params": [mine[name_of[id(p)]] for p in g["params"]], "weight_decay": g["weight_decay"]}
                             for g in opt.param_groups], lr=cfg.train.lr, betas=(cfg.train.beta1, cfg.train.beta2),
                            foreach=False)
    assert sum(len(g["params"]) for g in ref.param_groups) == len(mine)
    x = torch.randint(0, 256, (4, 16))
    for _ in range(5):
        for m, o in ((a, opt), (b, ref)):
            o.zero_grad()
            m(x, x)[1].backward()
            o.step()
    moved = max((a.state_dict()[k] - v).abs().max().item() for k, v in start.items())
    diff = max((a.state_dict()[k] - v).abs().max().item() for k, v in b.state_dict().items())
    assert diff < 1e-5 and moved > 1e-3
