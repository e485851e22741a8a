"""Real workers, the web side, the admin and the API through a real PgBouncer (Debian's
package, started by each test on a port of its own), in transaction and in session pooling,
with django-jobs at its defaults: exactly once, rescue, SIGTERM drain, wake-ups, and database
outages that back off and are logged once."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from datetime import UTC

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.test import Client

from django_jobs.core import clock
from django_jobs.engine.postgres import pooler
from django_jobs.engine.postgres.cursor import run
from django_jobs.models import Job, JobAttempt
from tests.api_support import Api, make_token, submit
from tests.conftest import requires_postgres, wait_for
from tests.models import Execution
from tests.pgbouncer import default_through, pgbouncer

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.slow,
              pytest.mark.pooler]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]
MODES = ["transaction", "session"]


def status_of(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def db_name() -> str:
    return connection.settings_dict["NAME"]


# What a worker logs, once, on finding out what the pooler keeps (pooler.py, listener.py).
POOLER_LINES = {
    "transaction": ["reached through a connection pooler: statements are sent unprepared",
                    "notifications do not arrive"],
    "session": ["reached through a connection pooler", "statements are prepared"],
}


@pytest.mark.parametrize("mode", MODES)
def test_four_workers_drain_through_pgbouncer_each_job_exactly_once(start_worker, mode):
    """2,000 jobs, four workers of four threads: each worker finds out what the pooler keeps
    and says so once (not once per thread or connection), and no job runs twice."""
    jobs = Job.enqueue_many("record", [{} for _ in range(2000)])
    # A session pooler lends each client connection a server connection for as long as it is
    # open: the pool must hold every worker's --concurrency + 2. A transaction pooler shares
    # the harness's 20 among the workers' 24.
    sized = {"default_pool_size": 4 * (4 + 2) + 2} if mode == "session" else {}
    with pgbouncer(mode, **sized) as bouncer:
        workers = [start_worker("--concurrency", "4", "--worker-id", f"w{i}",
                                env=bouncer.env()) for i in range(4)]
        wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 2000, timeout=300)
        # The notification probe ends a few seconds after start, perhaps after the drain.
        wait_for(lambda: all(line in worker.output() for worker in workers
                             for line in POOLER_LINES[mode]), timeout=60)
        for worker in workers:
            worker.signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0, worker.output()
    assert Job.objects.filter(status=S.COMPLETED).count() == 2000
    assert Execution.objects.count() == 2000
    assert set(Execution.objects.values_list("job_public_id", flat=True)) == {
        job.public_id for job in jobs}
    assert JobAttempt.objects.count() == 2000
    for worker in workers:
        output = worker.output()
        assert "Traceback" not in output and "already exists" not in output, output
        assert "does not keep prepared statements" not in output, output
        for line in POOLER_LINES[mode]:
            assert output.count(line) == 1, (line, output)
        if mode == "session":
            assert "notifications do not arrive" not in output, output
    assert len(set(Job.objects.values_list("worker_id", flat=True))) > 1


def waiters() -> int:
    """Workers registered as waiting (engine/postgres/waiters.py)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_jobs_waiter WHERE waiting IS NOT NULL")
        return cursor.fetchone()[0]


@pytest.mark.parametrize("mode", MODES)
def test_worker_finds_out_how_it_is_woken_and_whether_to_prepare(start_worker, mode):
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")  # not a model's: no flush empties it
    with pgbouncer(mode) as bouncer:
        worker = start_worker("--worker-id", "probe", "--poll-interval", "0.2", env=bouncer.env())
        said = ("notifications do not arrive" if mode == "transaction"
                else "the pooler keeps sessions")
        wait_for(lambda: said in worker.output(), timeout=60)
        assert "reached through a connection pooler" in worker.output()
        jobs = [Job.enqueue("echo", {"n": n}) for n in range(20)]
        wait_for(lambda: all(status_of(job) == S.COMPLETED for job in jobs), timeout=60)
        # Woken by its own channel in session pooling, it registers as waiting; in transaction
        # pooling it never does, and an enqueue spends no notification on it.
        if mode == "session":
            wait_for(lambda: waiters() == 1, timeout=60)
        assert waiters() == (mode == "session")
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    assert waiters() == 0  # a worker that stops removes its row
    output = worker.output()
    assert output.count("notifications do not arrive") == (mode == "transaction")
    assert "Traceback" not in output and "database error" not in output


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_through_pgbouncer_is_rescued_by_another_worker(start_worker, tmp_path, mode):
    marker = tmp_path / "started"
    job = Job.enqueue("slow", {"seconds": 1.5, "marker": str(marker)})
    with pgbouncer(mode) as bouncer:
        first = start_worker("--worker-id", "doomed", *FAST, env=bouncer.env())
        wait_for(marker.exists)
        first.signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
        second = start_worker("--worker-id", "rescuer", *FAST, env=bouncer.env())
        wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
        second.signal(signal.SIGTERM)
        assert second.wait() == 0, second.output()
    attempts = list(job.attempts.values_list("number", "worker_id", "outcome"))
    assert attempts == [(1, "doomed", "lost"), (2, "rescuer", "completed")]


@pytest.mark.parametrize("mode", MODES)
def test_sigterm_through_pgbouncer_lets_the_running_job_finish(start_worker, tmp_path, mode):
    marker = tmp_path / "started"
    job = Job.enqueue("slow", {"seconds": 1.0, "marker": str(marker)})
    waiting = Job.enqueue("echo", delay=0.5)
    with pgbouncer(mode) as bouncer:
        worker = start_worker("--worker-id", "drainer", "--shutdown-timeout", "30", *FAST,
                              env=bouncer.env())
        wait_for(marker.exists)
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    assert status_of(job) == S.COMPLETED
    assert status_of(waiting) == S.PENDING


@pytest.mark.parametrize("outage", ["refused", "stopped"])
def test_outage_behind_pgbouncer_is_logged_once_and_loses_nothing(start_worker, outage):
    """Mid-drain, the pooler drops every connection and refuses new ones (``refused``), or its
    process stops and comes back on the same port (``stopped``), for a few seconds: every job
    runs once, and each worker finishes the batches it claimed itself."""
    jobs = Job.enqueue_many("slow", [{"seconds": 0.02} for _ in range(300)])
    with pgbouncer("transaction") as bouncer:
        workers = [start_worker("--concurrency", "4", "--poll-interval", "0.1",
                                "--worker-id", f"w{i}", env=bouncer.env()) for i in range(2)]
        wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() >= 20, timeout=60)
        if outage == "refused":
            bouncer.admin(f"DISABLE {db_name()}")
            bouncer.admin(f"KILL {db_name()}")
        else:
            bouncer.kill()
        wait_for(lambda: all("database unavailable" in w.output() for w in workers))
        time.sleep(3)  # the outage lasts: the workers keep failing meanwhile
        if outage == "refused":
            bouncer.admin(f"ENABLE {db_name()}")
            bouncer.admin(f"RESUME {db_name()}")
        else:
            bouncer.start()
        wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 300, timeout=120)
        for worker in workers:
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0, worker.output()
    assert not Job.objects.exclude(status=S.COMPLETED).exists()
    # No batch was left in processing by a live worker: one whose lease ran out would have
    # been rescued by the heartbeat, with an attempt ended as lost before the completed one.
    # A claim whose reply the pooler cut off is handed back by its worker (released).
    A = JobAttempt.Outcome
    others = JobAttempt.objects.exclude(outcome__in=[A.COMPLETED, A.RELEASED])
    assert not others.exists(), list(others.values_list("job_id", "worker_id", "outcome"))
    if JobAttempt.objects.filter(outcome=A.RELEASED).exists():
        assert any("of a claim whose reply was lost" in w.output() for w in workers)
    completed = JobAttempt.objects.filter(outcome=A.COMPLETED)
    assert completed.count() == 300
    assert set(completed.values_list("job__public_id", flat=True)) == {j.public_id for j in jobs}
    for worker in workers:
        output = worker.output()
        assert output.count("database unavailable") == 1, output
        assert output.count("database available again after") == 1, output
        assert "Traceback" not in output


def test_pooler_refusing_logins_at_start_is_waited_out_quietly(start_worker):
    job = Job.enqueue("echo", {"n": 1})
    with pgbouncer("transaction") as bouncer:
        bouncer.admin(f"DISABLE {db_name()}")
        worker = start_worker("--worker-id", "patient", *FAST, env=bouncer.env())
        wait_for(lambda: "database unavailable" in worker.output(), timeout=60)
        time.sleep(2)  # several refused logins
        assert status_of(job) == S.PENDING
        bouncer.admin(f"ENABLE {db_name()}")
        wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    output = worker.output()
    assert output.count("database unavailable") == 1, output
    assert "does not allow connections" in output or "disabled" in output, output
    assert output.count("database available again after") == 1, output
    assert "Traceback" not in output


@pytest.mark.parametrize("mode", MODES)
def test_web_side_admin_and_api_through_pgbouncer(mode):
    """Enqueue in the caller's transaction, submit and read through the API, and browse the
    admin, on a Django connection that goes through the pooler, with Django's defaults."""
    get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    token = make_token("submit", "read", "manage")
    with pgbouncer(mode) as bouncer, default_through(bouncer):
        for n in range(5):  # a new server connection, or another's, each time
            with transaction.atomic():
                Job.enqueue("echo", {"n": n})
            connection.close()
        api = Api(token)
        submitted = [submit(api, type="echo", payload={"n": n}) for n in range(5)]
        listed = api.get("/api/jobs", limit=50)
        assert listed.status_code == 200
        assert {row["job_id"] for row in listed.json()["results"]} >= set(submitted)
        admin = Client()
        admin.login(username="admin", password="pw")
        for path in ("/admin/django_jobs/job/", "/admin/django_jobs/job/?status=pending"):
            assert admin.get(path).status_code == 200, path
    assert Job.objects.filter(status=S.PENDING).count() == 10


def test_first_prepared_statement_error_turns_preparing_off(caplog):
    """A pooler that passes the server's process id through escapes the login check; the
    first prepared statement that another client's session already holds turns preparing off
    for the process, with one warning, and the next statements run unprepared."""
    caplog.set_level(logging.INFO, logger="django_jobs.pooler")
    errors: list[Exception] = []
    answers: list[list[tuple]] = []

    def another_client() -> None:
        from django.db import connection as own

        try:
            run(own, "SELECT %s::int", [2])  # prepares _pg3_0: the one server session has it
        except DatabaseError as exc:
            errors.append(exc)
        answers.append(run(own, "SELECT %s::int", [2]))
        own.close()

    with pgbouncer("transaction", default_pool_size=1) as bouncer, default_through(bouncer):
        pooler.route(connection).pooled = False  # as if the login check had been fooled
        assert run(connection, "SELECT %s::int", [1]) == [(1,)]  # prepared as _pg3_0
        thread = threading.Thread(target=another_client)
        thread.start()
        thread.join()
        assert run(connection, "SELECT %s::int", [3]) == [(3,)]
    assert len(errors) == 1 and "_pg3_0" in str(errors[0]), errors
    assert answers == [[(2,)]]
    warned = [r for r in caplog.records if "does not keep prepared statements" in r.message]
    assert len(warned) == 1


@pytest.mark.parametrize("prepare", [None, True])
def test_through_a_transaction_pooler_the_worker_sets_nothing_on_a_shared_session(
        settings, prepare):
    """The worker asks its loop connection's server session for generic plans
    (``keep_generic_plans``) only where that session is its own. Through a transaction pooler
    of one server connection, shared by every client, the setting would reach them all: it is
    not sent, whether the worker prepares its statements there (``PREPARED_STATEMENTS = True``,
    as with a pooler that keeps them) or not. Directly, it is."""
    from django_jobs.engine.postgres.cursor import keep_generic_plans

    settings.DJANGO_JOBS = {"PREPARED_STATEMENTS": prepare}

    def session_setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            return cursor.fetchone()[0]

    try:
        with pgbouncer("transaction", default_pool_size=1) as bouncer, default_through(bouncer):
            keep_generic_plans(connection)
            assert run(connection, "SELECT %s::int", [1]) == [(1,)]
            assert not pooler.keeps_session(connection, connection.connection)
            assert session_setting() == "auto"
        keep_generic_plans(connection)  # directly: the session is the connection's own
        assert run(connection, "SELECT %s::int", [1]) == [(1,)]
        assert session_setting() == "force_generic_plan"
    finally:
        keep_generic_plans(connection, keep=False)
        connection.close()


def test_a_long_transaction_holding_a_day_drop_through_a_transaction_pooler_stalls_no_worker(
        start_worker):
    """Two workers prune every half second through PgBouncer in transaction mode, handing out
    its server connections in turn (``server_round_robin``), while a report's transaction holds
    the jobs table and so the drop of today's partitions. No server session is left with a
    changed ``lock_timeout`` for another client, no worker's heartbeat waits on the detach:
    no job is rescued from a live worker or runs twice; the day is dropped once the report
    ends."""
    from django_jobs.engine.postgres import partitions

    now = clock.now("default").astimezone(UTC)
    if now.hour < 1:
        pytest.skip("a pass drops today's partitions from DROP_GRACE (an hour) into the day")
    today = now.date()
    partitions.make_day("default", today)  # the day the workers' passes drop
    jobs = Job.enqueue_many("record", [{"sleep": 0.5} for _ in range(24)])
    settings = connection.settings_dict
    report = psycopg.connect(host=settings["HOST"], port=settings["PORT"],
                             user=settings["USER"], dbname=settings["NAME"])
    seen: list[str] = []
    stop = threading.Event()
    try:
        report.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT count(*) FROM django_jobs_job")
        with pgbouncer("transaction", server_round_robin=1) as bouncer:

            def watch() -> None:  # another client of the pooler, on each server session in turn
                with psycopg.connect(host="127.0.0.1", port=bouncer.port, user=settings["USER"],
                                     dbname=settings["NAME"], autocommit=True,
                                     prepare_threshold=None) as client:
                    while not stop.is_set():
                        seen.append(client.execute("SHOW lock_timeout").fetchone()[0])
                        time.sleep(0.002)

            watcher = threading.Thread(target=watch)
            watcher.start()
            env = {**bouncer.env(),
                   "DJANGO_JOBS_TEST_EXTRA": json.dumps({"PRUNE_INTERVAL": 0.5})}
            workers = [start_worker(*FAST, "--concurrency", "2", "--worker-id", f"w{i}",
                                    env=env) for i in range(2)]
            try:
                wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == len(jobs),
                         timeout=120)
                time.sleep(3)  # passes go on meeting the report
                runs = list(Execution.objects.values_list("job_public_id", flat=True))
                assert sorted(runs) == sorted(job.public_id for job in jobs)
                for worker in workers:
                    assert "rescued job" not in worker.output(), worker.output()
                assert len(seen) > 100 and set(seen) == {"0"}, sorted(set(seen))
                # the passes met the report and left the day for later
                assert any("waits for a later pass" in worker.output() for worker in workers)
            finally:
                report.rollback()
                stop.set()
                watcher.join()
            wait_for(lambda: today not in day_partitions(partitions), timeout=60)
            for worker in workers:
                worker.signal(signal.SIGTERM)
                assert worker.wait(timeout=60) == 0, worker.output()
        for worker in workers:
            assert "Traceback" not in worker.output(), worker.output()
    finally:
        report.close()
        partitions.make_day("default", today)  # for the tests after this one


def day_partitions(partitions) -> set:
    with connection.cursor() as cursor:
        return set(partitions.attached_days(cursor, partitions.JOBS))


def test_a_prune_pass_through_a_transaction_pooler_leaves_no_lock_on_a_server_session():
    """The lock that lets one worker at a time make and drop partitions is a transaction's
    through a transaction pooler: a session's, taken on one server session and released on
    another, would stay on the first for whichever client goes on to use it, and hold every
    later pass off. Server sessions handed out in turn (``server_round_robin``)."""
    from datetime import date, timedelta

    from django_jobs.engine.postgres import day_drops
    from django_jobs.features.dependencies import waited_on

    settings = connection.settings_dict

    def advisory_locks() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                           "AND objid = %s", [day_drops.LOCK_KEY])
            return cursor.fetchone()[0]

    with pgbouncer("transaction", server_round_robin=1) as bouncer:
        clients = [psycopg.connect(host="127.0.0.1", port=bouncer.port, user=settings["USER"],
                                   dbname=settings["NAME"]) for _ in range(3)]
        for client in clients:  # three transactions at once: three server sessions
            client.execute("SELECT 1")
        for client in clients:  # each then idle in the pool
            client.commit()
            client.close()
        with default_through(bouncer):
            passes = [day_drops.upkeep("default", date.today(), [timedelta(days=7)],
                                       waited_on(), 100, drop_through=date(2000, 1, 1))
                      for _ in range(3)]
            assert not pooler.keeps_session(connection, connection.connection)
        assert advisory_locks() == 0
    assert all(done is not None for done in passes), passes


def test_through_a_transaction_pooler_a_wait_reads_the_job_until_it_ends(start_worker):
    """The wait listener's test notification never arrives through a transaction pooler: it
    gives up, and ``Job.wait`` reads the job's row instead."""
    from django_jobs.core.contract import engine

    start_worker(*FAST)
    with pgbouncer("transaction") as bouncer, default_through(bouncer):
        waiting = engine("default")
        waiting._wakeups = None  # type: ignore[attr-defined]  # a listener of this test's own
        try:
            job = Job.enqueue("echo", {"n": 1})
            assert job.wait(timeout=30) == {"echo": {"n": 1}}
            assert wait_for(lambda: waiting.wakeups().gave_up, timeout=10)
            assert not waiting.wakeups().listening
            assert Job.enqueue("echo", {"n": 2}).wait(timeout=30) == {"echo": {"n": 2}}
        finally:
            waiting._wakeups = None  # type: ignore[attr-defined]
            connection.close()
