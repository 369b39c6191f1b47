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
