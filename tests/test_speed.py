"""What `pebench run` does for speed: where jobs run (one worker per core for long CPU jobs), in which order, the
hand-off of an idle worker's cores, and the profile against the floor. Timings are measured by `bench` and the
profile, never asserted here."""
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from pebench.config import load_config
from pebench.plan import default_devices, eval_request, plan_runs
from pebench.profile import Phase, Profile, collect, markdown, train_flops
from pebench.results import ResultsDir
from pebench.sweep import THREADS_ENV, Job, jobs_for, share_cores


def test_training_flops_are_steps_times_tokens_times_flops_per_token():
    from pebench.checkpoint import build_model

    cfg = load_config("tiny")
    per_token = build_model(cfg).flops_per_token(cfg.model.context)
    assert train_flops(cfg) == cfg.train.steps * cfg.train.batch_size * cfg.model.context * per_token
    assert 5.0e6 < per_token < 6.5e6  # the ~5.7 MFLOP per token the main job's floor is computed from


def test_long_cpu_jobs_go_to_one_worker_per_core_and_short_ones_stay_in_process():
    tiny = plan_runs(load_config("tiny"), ["rope", "alibi", "none"], [0])
    assert default_devices(tiny, "cpu", cores=2) == "cpu:2"
    assert default_devices(tiny, "cpu", cores=16) == "cpu:3"  # never more workers than jobs
    assert default_devices(tiny, "cpu", cores=1) == "local"
    assert default_devices(tiny[:1], "cpu", cores=2) == "local"  # one job: nothing to share
    short = [(n, replace(c, train=replace(c.train, steps=2))) for n, c in tiny]
    assert default_devices(short, "cpu", cores=2) == "local"  # a process start would cost more than the job


def test_the_longest_job_starts_first(tmp_path):
    runs = plan_runs(load_config("tiny"), ["alibi", "rope", "none"], [0])
    jobs = jobs_for(ResultsDir(tmp_path), runs, eval_request(rope_scaling="all"), overwrite=False)
    assert jobs[0].scheme == "rope"  # six evaluation variants
    assert jobs[0].cost > jobs[1].cost == jobs[2].cost


CHILD = textwrap.dedent("""
    import sys, time, torch
    torch.set_num_threads(1)
    from pebench.sweep import accept_more_cores
    accept_more_cores()
    print("start", torch.get_num_threads(), flush=True)
    t = time.time()
    while torch.get_num_threads() == 1 and time.time() - t < 20:
        time.sleep(0.05)
    print("now", torch.get_num_threads(), flush=True)
""")


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR1"), reason="POSIX signals")
def test_an_idle_workers_cores_go_to_the_job_still_running(tmp_path):
    spec = tmp_path / "job.json"
    job = Job("late", "rope", 0, spec)
    env = {**os.environ, THREADS_ENV: str(job.threads_file())}
    job.proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True)
    job.state, job.device = "running", "cpu"
    assert job.proc.stdout.readline().split() == ["start", "1"]
    assert job.ready_file().exists()
    share_cores([job, Job("done", "alibi", 0, tmp_path / "d.json", state="done", device="cpu")], cores=4)
    out, _ = job.proc.communicate(timeout=30)
    assert out.split() == ["now", "4"]  # the one job still running took all four cores


def test_a_job_not_ready_yet_reads_its_share_when_it_starts(tmp_path):
    job = Job("early", "rope", 0, tmp_path / "job.json")
    job.threads_file().write_text("2")  # written before the job installed its handler
    env = {**os.environ, THREADS_ENV: str(job.threads_file())}
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.split()[:2] == ["start", "2"]


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
