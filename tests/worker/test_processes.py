"""Real ``runworker`` subprocesses: kill -9 and rescue, SIGTERM drain, hand-back, many workers."""

import signal

import pytest
from django.db import connection

from django_jobs.models import Job, JobAttempt, Worker
from tests.conftest import requires_row_locks, wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
OUT = JobAttempt.Outcome
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


# The same process tests for a sync handler and its ``async def`` twin (tests/async_handlers.py).
slow_kinds = pytest.mark.parametrize("slow", ["slow", "async_slow"])


def status_of(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


@slow_kinds
def test_kill_9_mid_job_is_rescued_and_completed_by_another_worker(start_worker, tmp_path, slow):
    marker = tmp_path / "started"
    job = Job.enqueue(slow, {"seconds": 1.5, "marker": str(marker)})
    first = start_worker("--worker-id", "doomed", *FAST)
    wait_for(marker.exists)
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert status_of(job) == S.PROCESSING  # nobody finished it
    second = start_worker("--worker-id", "rescuer", *FAST)
    wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
    job.refresh_from_db()
    assert job.attempt == 2 and job.worker_id == "rescuer"
    attempts = list(job.attempts.values_list("number", "worker_id", "outcome"))
    assert attempts == [(1, "doomed", OUT.LOST), (2, "rescuer", OUT.COMPLETED)]
    lost = job.attempts.get(number=1)
    assert lost.error["type"] == "WorkerLost" and "doomed" in lost.error["message"]
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


@slow_kinds
def test_sigterm_lets_the_running_job_finish_then_exits(start_worker, tmp_path, slow):
    marker = tmp_path / "started"
    job = Job.enqueue(slow, {"seconds": 1.0, "marker": str(marker)})
    waiting = Job.enqueue("echo", delay=0.5)
    worker = start_worker("--worker-id", "drainer", "--shutdown-timeout", "30", *FAST)
    wait_for(marker.exists)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert status_of(job) == S.COMPLETED
    assert status_of(waiting) == S.PENDING  # no new claims after the signal
    assert not Worker.objects.filter(pk="drainer").exists()
    assert "stopping" in worker.output()


@slow_kinds
def test_job_still_running_at_shutdown_timeout_is_handed_back_unspent(start_worker, tmp_path, slow):
    marker = tmp_path / "started"
    job = Job.enqueue(slow, {"seconds": 30, "marker": str(marker)})
    worker = start_worker("--shutdown-timeout", "0.5", *FAST)
    wait_for(marker.exists)
    worker.signal(signal.SIGINT)
    assert worker.wait(timeout=20) == 0
    job.refresh_from_db()
    assert (job.status, job.attempt, job.leased_until) == (S.PENDING, 0, None)
    assert job.attempts.get().outcome == OUT.RELEASED


@slow_kinds
def test_second_signal_exits_at_once(start_worker, tmp_path, slow):
    marker = tmp_path / "started"
    job = Job.enqueue(slow, {"seconds": 30, "marker": str(marker)})
    worker = start_worker("--shutdown-timeout", "600", *FAST)
    wait_for(marker.exists)
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in worker.output())
    worker.signal(signal.SIGTERM)
    worker.wait(timeout=20)  # far less than the 600 s shutdown timeout or the 30 s job
    job.refresh_from_db()
    assert job.status == S.PENDING and job.attempt == 0


def test_handler_raising_system_exit_does_not_kill_the_process(start_worker):
    bad = Job.enqueue("system_exit", max_attempts=1)
    good = Job.enqueue("echo", {"x": 1}, priority="low")
    worker = start_worker("--burst", "--concurrency", "1", *FAST)
    assert worker.wait() == 0, worker.output()
    assert status_of(bad) == S.DEAD and status_of(good) == S.COMPLETED
    assert "worker finished: 2 job(s) run" in worker.output()


@requires_row_locks
def test_four_workers_drain_2000_jobs_each_exactly_once(start_worker):
    jobs = Job.enqueue_many("record", [{} for _ in range(2000)])
    workers = [start_worker("--burst", "--concurrency", "4", "--worker-id", f"w{i}", *FAST)
               for i in range(4)]
    for worker in workers:
        assert worker.wait(timeout=300) == 0, worker.output()
    assert Job.objects.filter(status=S.COMPLETED).count() == 2000
    assert Execution.objects.count() == 2000
    assert Execution.objects.values("job_public_id").distinct().count() == 2000
    assert {e for e in Execution.objects.values_list("job_public_id", flat=True)} == {
        j.public_id for j in jobs}
    assert JobAttempt.objects.filter(outcome=OUT.COMPLETED).count() == 2000
    by_worker = Job.objects.values_list("worker_id", flat=True).distinct()
    assert len(set(by_worker)) > 1  # really shared between processes
    assert connection.vendor in ("postgresql", "mysql")


def test_several_workers_on_sqlite_run_each_job_once(start_worker):
    """SQLite allows one writer at a time; claims still never overlap."""
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL and MariaDB variant above covers this with 2,000 jobs")
    Job.enqueue_many("record", [{} for _ in range(300)])
    workers = [start_worker("--burst", "--concurrency", "2", *FAST) for _ in range(3)]
    for worker in workers:
        assert worker.wait(timeout=300) == 0, worker.output()
    assert Job.objects.filter(status=S.COMPLETED).count() == 300
    assert Execution.objects.values("job_public_id").distinct().count() == 300
    assert Execution.objects.count() == 300


def kill_other_connections() -> int:
    """End every other session on the test database, as a server restart would."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute("SELECT id FROM information_schema.processlist "
                           "WHERE db = DATABASE() AND id <> CONNECTION_ID()")
            ids = [row[0] for row in cursor.fetchall()]
            for session in ids:
                cursor.execute(f"KILL {int(session)}")
            return len(ids)
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@requires_row_locks
def test_worker_survives_its_database_connections_being_killed(start_worker):
    """Like a database restart for the worker: it reconnects and carries on, losing nothing."""
    first = Job.enqueue("echo", {"n": 1})
    worker = start_worker("--worker-id", "survivor", *FAST)
    wait_for(lambda: status_of(first) == S.COMPLETED)
    assert kill_other_connections() >= 1
    second = Job.enqueue("echo", {"n": 2})
    wait_for(lambda: status_of(second) == S.COMPLETED, timeout=60)
    assert worker.proc.poll() is None  # still running
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert "database unavailable" in worker.output()


@requires_row_locks
def test_async_handlers_recover_their_connections_after_they_are_killed(start_worker):
    """The async ORM's queries run in another thread than the handler's: its connection is
    closed once the database ended it, as a sync handler's is, and the jobs complete."""
    jobs = Job.enqueue_many("async_record", [{"sleep": 0.05} for _ in range(10)])
    worker = start_worker("--worker-id", "async", "--concurrency", "2", *FAST)
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() >= 3, timeout=60)
    assert kill_other_connections() >= 1
    ids = [job.pk for job in jobs]
    wait_for(lambda: not Job.objects.filter(pk__in=ids, status__in=[S.PENDING, S.PROCESSING,
                                                                    S.FAILED]).exists(),
             timeout=90)
    statuses = dict(Job.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert set(statuses.values()) == {S.COMPLETED}, (statuses, worker.output())
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert "did not stop" not in worker.output()  # the query threads are not strays


@requires_row_locks
@pytest.mark.parametrize("handler", ["record", "async_record"])
def test_after_an_outage_no_handler_meets_a_connection_the_database_ended(start_worker, handler):
    """The job threads' idle connections end with the worker's own (a restart, a failover):
    the first query of the next handler in each thread runs on a new connection, so no attempt
    fails for the outage."""
    first = Job.enqueue_many(handler, [{} for _ in range(4)])
    worker = start_worker("--worker-id", "idle-threads", "--concurrency", "2", *FAST)
    ids = [job.pk for job in first]
    wait_for(lambda: Job.objects.filter(pk__in=ids, status=S.COMPLETED).count() == 4,
             timeout=60)
    assert kill_other_connections() >= 1  # the loop's, the listener's and both threads'
    second = Job.enqueue_many(handler, [{} for _ in range(4)])
    ids += [job.pk for job in second]
    wait_for(lambda: Job.objects.filter(pk__in=ids, status=S.COMPLETED).count() == 8,
             timeout=60)
    failed = list(JobAttempt.objects.filter(job_id__in=ids).exclude(outcome=OUT.COMPLETED)
                  .values_list("outcome", "error"))
    assert failed == [], (failed, worker.output())
    assert Execution.objects.count() == 8  # each handler once
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
