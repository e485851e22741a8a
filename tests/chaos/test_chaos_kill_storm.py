"""Chaos: storms of ``kill -9`` (each worker replaced at once) and of SIGSTOP past the lease, on
real workers, until the queue drains.

Every job must complete, and a job may have run more than once only where the database records
an interrupted (lost) attempt for it (tests/chaos/ledger.py). Small in CI; by hand::

    CHAOS_JOBS=20000 CHAOS_WORKERS=8 CHAOS_KILLS=30 DJANGO_JOBS_TEST_DB=postgres \\
        .venv/bin/python -m pytest tests/chaos/test_chaos_kill_storm.py -s -p no:cacheprovider
"""

import random
import signal
import time

import pytest
from django.db import connection

from django_jobs.models import Job
from django_jobs.models import Worker as WorkerRow
from tests.chaos.ledger import collect, count_runs, read_runs, verify
from tests.chaos.scale import env_float, env_int, report
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.chaos]
S = Job.Status
# Short leases, so the jobs of a killed worker are rescued within seconds.
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def unfinished() -> int:
    return Job.objects.filter(status__in=[S.PENDING, S.FAILED, S.PROCESSING]).count()


def stop_and_verify(workers, jobs: int, log: str):
    """The survivors are not stuck: SIGTERM stops each cleanly. Then every job ran, and ran
    more than once only where a lost attempt is recorded (the ledger's figures)."""
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=60) == 0, worker.output()[-2000:]
    figures = verify(collect(), read_runs(log))
    assert figures.jobs == jobs
    return figures


def test_kill_9_storm_with_replacement_workers_runs_every_job_once_modulo_lost_attempts(
    start_worker, tmp_path
):
    sqlite = connection.vendor == "sqlite"
    jobs = env_int("CHAOS_JOBS", 1000)
    workers_wanted = env_int("CHAOS_WORKERS", 2 if sqlite else 4)
    kills_wanted = env_int("CHAOS_KILLS", 8)
    interval = env_float("CHAOS_KILL_INTERVAL", 0.5)
    seed = env_int("CHAOS_SEED", random.randrange(1_000_000))
    rng = random.Random(seed)
    log = str(tmp_path / "runs.log")
    # A few milliseconds a job, so the drain outlasts the workers' start-up and kills land on
    # workers that hold jobs.
    Job.enqueue_many("chaos_record", [{"log": log, "sleep": 0.02}] * jobs)

    started = 0

    def launch():
        nonlocal started
        started += 1
        worker = start_worker("--concurrency", "4", "--worker-id", f"storm-{started}", *FAST)
        worker.worker_id = f"storm-{started}"
        return worker

    workers = [launch() for _ in range(workers_wanted)]
    began = time.monotonic()
    wait_for(lambda: count_runs(log) > 0, timeout=120)
    kills = 0
    deadline = time.monotonic() + max(300, jobs / 10)
    while unfinished():
        assert time.monotonic() < deadline, f"{unfinished()} job(s) never finished (seed {seed})"
        if kills < kills_wanted:
            victim = workers.pop(rng.randrange(len(workers)))
            victim.signal(signal.SIGKILL)
            assert victim.wait(timeout=30) == -signal.SIGKILL
            kills += 1
            workers.append(launch())
        time.sleep(interval)
    wall = time.monotonic() - began

    # A replacement started a moment ago may not have installed its signal handlers yet (it
    # registers its row right after), and a SIGTERM before that ends it as Python's default
    # would: wait for the survivors' rows first.
    ids = [worker.worker_id for worker in workers]
    wait_for(lambda: WorkerRow.objects.filter(pk__in=ids).count() == len(ids), timeout=60)
    figures = stop_and_verify(workers, jobs, log)
    # Otherwise the storm tested nothing: no kill landed on a worker holding a job.
    assert figures.interrupted_attempts > 0, f"no attempt was interrupted (seed {seed})"
    report(f"kill storm ({connection.vendor})", {
        **figures.as_dict(), "workers": workers_wanted, "kills": kills,
        "workers_started": started, "seed": seed, "wall_s": round(wall, 1),
    })


def test_freeze_storm_past_the_lease_runs_every_job_once_modulo_lost_attempts(
    start_worker, tmp_path
):
    """Workers stopped with SIGSTOP for longer than their lease (a VM pause, a swap storm), then
    resumed: their jobs are rescued and rerun meanwhile, and what they finish late is dropped."""
    sqlite = connection.vendor == "sqlite"
    jobs = env_int("CHAOS_JOBS", 1000)
    workers_wanted = env_int("CHAOS_WORKERS", 2 if sqlite else 4)
    freezes_wanted = env_int("CHAOS_FREEZES", 6)
    # Twice the 2 s lease: the awake workers get two seconds, not one, to see a lease run out
    # and rescue its job, even on a loaded machine.
    frozen_for = env_float("CHAOS_FREEZE_SECONDS", 4.0)
    seed = env_int("CHAOS_SEED", random.randrange(1_000_000))
    rng = random.Random(seed)
    log = str(tmp_path / "runs.log")
    # Handlers of 0.1 s: a worker spends most of its time in them, so a freeze usually lands
    # while it holds a job. On SQLite a freeze that lands inside the worker's write transaction
    # holds the database's one write lock until the thaw, and no rescue can run meanwhile.
    Job.enqueue_many("chaos_record", [{"log": log, "sleep": 0.1}] * jobs)
    workers = [start_worker("--concurrency", "4", "--worker-id", f"frozen-{i}", *FAST)
               for i in range(workers_wanted)]
    began = time.monotonic()
    wait_for(lambda: count_runs(log) > 0, timeout=120)
    frozen: dict[int, float] = {}  # index of the worker -> when to resume it
    freezes = 0
    deadline = time.monotonic() + max(300, jobs / 10)
    while unfinished() or frozen:
        assert time.monotonic() < deadline, f"{unfinished()} job(s) never finished (seed {seed})"
        now = time.monotonic()
        for index, thaw_at in list(frozen.items()):
            if now >= thaw_at:
                workers[index].signal(signal.SIGCONT)
                del frozen[index]
        awake = [i for i in range(len(workers)) if i not in frozen]
        if freezes < freezes_wanted and len(awake) > 1 and unfinished():
            # A worker that holds jobs, where one does: freezing an idle one tests nothing.
            holding = set(
                Job.objects.filter(status=S.PROCESSING).values_list("worker_id", flat=True)
            )
            index = rng.choice([i for i in awake if f"frozen-{i}" in holding] or awake)
            workers[index].signal(signal.SIGSTOP)
            frozen[index] = now + frozen_for
            freezes += 1
        time.sleep(0.5)
    wall = time.monotonic() - began

    figures = stop_and_verify(workers, jobs, log)
    assert figures.interrupted_attempts > 0, f"no lease ran out while frozen (seed {seed})"
    report(f"freeze storm ({connection.vendor})", {
        **figures.as_dict(), "workers": workers_wanted, "freezes": freezes,
        "frozen_s": frozen_for, "seed": seed, "wall_s": round(wall, 1),
    })
