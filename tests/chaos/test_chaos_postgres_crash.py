"""Chaos: PostgreSQL stopped in immediate mode mid-drain, left down a while, started again.

On a throwaway cluster the test creates (tests/chaos/cluster.py), never the shared server. The
workers lose their connections, come back when the server does, and the drain finishes: every
job completed, none lost, and a job ran more than once only where an interrupted attempt is
recorded. It needs PostgreSQL's server binaries, and runs in the PostgreSQL run of the suite
(on SQLite it is skipped: the SQLite run tests SQLite). By hand::

    CHAOS_JOBS=20000 CHAOS_WORKERS=8 CHAOS_CRASHES=3 DJANGO_JOBS_TEST_DB=postgres \\
        .venv/bin/python -m pytest tests/chaos/test_chaos_postgres_crash.py -s -p no:cacheprovider
"""

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from django_jobs.models import Job
from tests.chaos import remote
from tests.chaos.cluster import throwaway
from tests.chaos.ledger import count_runs, read_runs, verify
from tests.chaos.scale import env_float, env_int, report
from tests.conftest import ROOT, requires_postgres, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.chaos, requires_postgres]
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]
DATABASE = "chaos_jobs"


@pytest.fixture
def cluster():
    with throwaway(DATABASE) as made:
        yield made


def unfinished(port: int) -> int | None:
    """Jobs not yet finished, or None while the server is away."""
    statuses = [Job.Status.PENDING, Job.Status.FAILED, Job.Status.PROCESSING]
    try:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=DATABASE,
                             connect_timeout=5) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {Job._meta.db_table} WHERE status = ANY(%s)",
                [[str(s) for s in statuses]],
            ).fetchone()
            return row[0]
    except psycopg.OperationalError:
        return None


def test_postgres_crashing_mid_drain_loses_no_job_and_reruns_only_interrupted_attempts(
    cluster, start_worker, tmp_path
):
    jobs = env_int("CHAOS_JOBS", 1000)
    workers_wanted = env_int("CHAOS_WORKERS", 3)
    crashes = env_int("CHAOS_CRASHES", 2)
    outage = env_float("CHAOS_OUTAGE", 3.0)
    env = {"DJANGO_JOBS_TEST_DB": "postgres", "PGHOST": "127.0.0.1",
           "PGPORT": str(cluster.port), "JOBS_DB_NAME": DATABASE}
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--settings=tests.settings", "-v", "0"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    log = str(tmp_path / "runs.log")
    remote.call(env, "enqueue", str(jobs), log, "0.05")

    workers = [start_worker("--concurrency", "4", "--worker-id", f"crash-{i}", *FAST, env=env)
               for i in range(workers_wanted)]
    began = time.monotonic()
    runs_at_crash = []
    for crash in range(crashes):
        target = jobs * (crash + 1) // (2 * crashes + 1)
        wait_for(lambda target=target: count_runs(log) >= target, timeout=300)
        cluster.crash()
        runs_at_crash.append(count_runs(log))
        time.sleep(outage)  # the outage itself: workers poll a server that is not there
        cluster.start()
    # The crashes landed mid-drain: jobs were still to start when the server went down.
    assert all(runs < jobs for runs in runs_at_crash), runs_at_crash
    wait_for(lambda: unfinished(cluster.port) == 0, timeout=max(300, jobs / 10), interval=0.5)
    wall = time.monotonic() - began

    for worker in workers:
        assert worker.proc.poll() is None, worker.output()[-2000:]  # none died of the outage
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=60) == 0, worker.output()[-2000:]
    figures = verify(remote.summary(env), read_runs(log))
    assert figures.jobs == jobs
    report("postgres crash", {
        **figures.as_dict(), "workers": workers_wanted, "crashes": crashes,
        "outage_s": outage, "runs_at_each_crash": runs_at_crash, "wall_s": round(wall, 1),
    })
