"""Real ``runworker`` processes woken on PostgreSQL: an enqueue wakes the one worker that began
waiting last, with concurrency and rate limits registered too, without writing its row; a killed
worker's row is passed over and then removed by another worker's heartbeat; a worker that stops
removes its waiting row (migrations 0018, 0024 and 0032, ``engine/postgres/waiters.py``)."""

from __future__ import annotations

import signal

import psycopg
import pytest
from django.db import connection

from django_jobs.models import Job
from tests.conftest import requires_postgres, wait_for
from tests.sched_jobs import register_limited, unregister_limited

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
# Polls and heartbeats far apart: within the waits below, only a notification wakes a worker.
ASLEEP = ["--poll-interval", "120", "--heartbeat", "60", "--lease", "300"]


def waiting() -> list[int]:
    """The pids of the waiting workers' listeners, longest waiting first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM django_jobs_waiter WHERE waiting IS NOT NULL "
                       "ORDER BY waiting, pid")
        return [pid for (pid,) in cursor.fetchall()]


def rows() -> dict[int, object]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, waiting FROM django_jobs_waiter")
        return dict(cursor.fetchall())


@pytest.fixture(autouse=True)
def no_waiters():
    """The waiters table is not a model's: the test database's flush leaves it as it is."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")


def start_waiting(start_worker, name: str, *options: str, env: dict | None = None):
    """A worker that has registered as waiting; returns it and its listener's pid."""
    before = set(waiting())
    worker = start_worker("--worker-id", name, *options, env=env)
    wait_for(lambda: set(waiting()) - before or worker.proc.poll() is not None, timeout=60)
    (pid,) = set(waiting()) - before
    return worker, pid


def test_an_enqueue_wakes_the_worker_that_began_waiting_last_alone(start_worker):
    first, first_pid = start_waiting(start_worker, "first", *ASLEEP)
    second, second_pid = start_waiting(start_worker, "second", *ASLEEP)
    since = rows()[first_pid]
    job = Job.enqueue("echo")
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=job.pk).worker_id == "second"
    wait_for(lambda: second_pid in waiting(), timeout=60)  # its next claim: waiting again
    assert rows()[first_pid] == since  # never taken
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    assert rows() == {}  # each removed its row on the way out


def told(pids: list[int], act) -> list[tuple[str, str]]:
    """The notifications sent to the listeners ``pids`` and to every worker while ``act()``
    runs, heard by a session of the test's own that listens on the same channels."""
    end = "django_jobs_test_end"
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as conn:
        for channel in [*(f"django_jobs_{pid}" for pid in pids), "django_jobs", end]:
            conn.execute(f"LISTEN {channel}")
        act()
        with connection.cursor() as cursor:  # after act's commits: heard after its notes
            cursor.execute("SELECT pg_notify(%s, '')", [end])
        heard = []
        for note in conn.notifies(timeout=30):
            if note.channel == end:
                return heard
            heard.append((note.channel, note.payload))
    raise AssertionError(f"the end marker never arrived; heard {heard}")


@pytest.fixture
def limited():
    register_limited()
    yield
    unregister_limited()


def test_with_limits_registered_an_enqueue_wakes_one_idle_worker(start_worker, limited):
    """The limits' claims take the ORM's path; they register their worker as waiting too, so
    one enqueue of a limited job tells one worker, not every worker."""
    env = {"DJANGO_JOBS_TEST_LIMITS": "1"}
    started = [start_waiting(start_worker, f"limited-{n}", *ASLEEP, env=env) for n in range(4)]
    pids = [pid for _, pid in started]
    since = rows()
    jobs = []
    heard = told(pids, lambda: jobs.append(Job.enqueue("capped")))
    assert heard == [(f"django_jobs_{pids[-1]}", "default")]  # the last to wait, alone
    wait_for(lambda: Job.objects.get(pk=jobs[0].pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=jobs[0].pk).worker_id == "limited-3"
    wait_for(lambda: pids[-1] in waiting(), timeout=60)  # its next claim: waiting again
    assert {pid: rows()[pid] for pid in pids[:-1]} == {pid: since[pid] for pid in pids[:-1]}
    for worker, _ in started:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()


def test_a_killed_workers_row_is_passed_over(start_worker):
    alive, alive_pid = start_waiting(start_worker, "alive", *ASLEEP)
    doomed, doomed_pid = start_waiting(start_worker, "doomed", *ASLEEP)
    doomed.signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL
    wait_for(lambda: not session_exists(doomed_pid), timeout=60)
    jobs = []
    heard = told([doomed_pid, alive_pid], lambda: jobs.append(Job.enqueue("echo")))
    # The row that began waiting last is the dead worker's: passed over, still waiting.
    assert heard == [(f"django_jobs_{alive_pid}", "default")]
    assert rows()[doomed_pid] is not None
    wait_for(lambda: Job.objects.get(pk=jobs[0].pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=jobs[0].pk).worker_id == "alive"
    alive.signal(signal.SIGTERM)
    assert alive.wait() == 0, alive.output()


def test_a_killed_workers_row_is_removed_by_another_workers_heartbeat(start_worker):
    doomed, doomed_pid = start_waiting(start_worker, "doomed", *ASLEEP)
    beating, _ = start_waiting(start_worker, "beating", "--poll-interval", "120",
                               "--heartbeat", "0.5", "--lease", "300")
    doomed.signal(signal.SIGKILL)
    assert doomed.wait() == -signal.SIGKILL
    wait_for(lambda: doomed_pid not in rows(), timeout=60)
    beating.signal(signal.SIGTERM)
    assert beating.wait() == 0, beating.output()


def session_exists(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = %s)", [pid])
        return cursor.fetchone()[0]


def test_a_job_not_yet_due_runs_once_due(start_worker):
    worker, _ = start_waiting(start_worker, "patient", "--poll-interval", "0.5")
    job = Job.enqueue("echo", delay=1.5)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    finished = Job.objects.get(pk=job.pk)
    assert finished.started_at >= finished.run_at
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def started_within(job: Job) -> float:
    """Seconds from the job's creation to its start, once it has completed."""
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    done = Job.objects.get(pk=job.pk)
    return (done.started_at - done.created_at).total_seconds()


# A poll far off: a job that starts within WOKEN_WITHIN seconds was started by a notification.
# The bound is generous (a loaded host), far below the poll, not a measure of speed.
DROWSY = ["--poll-interval", "30", "--heartbeat", "60", "--lease", "300"]
WOKEN_WITHIN = 10.0


def test_a_notification_wakes_an_idle_worker_long_before_its_poll(start_worker):
    worker, pid = start_waiting(start_worker, "drowsy", *DROWSY)
    for _ in range(3):  # each time idle and waiting again, woken by its notification alone
        wait_for(lambda: pid in waiting(), timeout=60)
        assert started_within(Job.enqueue("echo")) < WOKEN_WITHIN
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_lost_listen_connection_is_made_again_and_wakes_the_worker(start_worker):
    """The listening session ends under the worker (a server restart, a network cut): the
    worker polls meanwhile, listens again on a new session, registers it as waiting, and its
    notifications wake it as before."""
    worker, pid = start_waiting(start_worker, "relisten", *DROWSY)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: not session_exists(pid), timeout=60)
    wait_for(lambda: set(waiting()) - {pid}, timeout=60)
    (new_pid,) = set(waiting()) - {pid}
    assert session_exists(new_pid)
    assert started_within(Job.enqueue("echo")) < WOKEN_WITHIN
    assert worker.proc.poll() is None
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_job_told_to_a_frozen_worker_is_started_by_another_idle_one(start_worker):
    """The worker an enqueue tells is frozen (SIGSTOP: a long pause of its process looks the
    same): the two idle workers' looks find the job unclaimed, and one of them takes it, long
    before any poll; thawed, the frozen worker takes nothing of it and is woken by the next
    enqueue again."""
    idle = [start_waiting(start_worker, f"idle-{n}", *ASLEEP) for n in range(2)]
    frozen, frozen_pid = start_waiting(start_worker, "frozen", *ASLEEP)
    frozen.signal(signal.SIGSTOP)
    try:
        jobs = []
        heard = told([frozen_pid, *(pid for _, pid in idle)],
                     lambda: jobs.append(Job.enqueue("echo")))
        assert heard == [(f"django_jobs_{frozen_pid}", "default")]  # told the frozen one
        wait_for(lambda: Job.objects.get(pk=jobs[0].pk).status == S.COMPLETED, timeout=60)
        assert Job.objects.get(pk=jobs[0].pk).worker_id in ("idle-0", "idle-1")
    finally:
        frozen.signal(signal.SIGCONT)
    wait_for(lambda: {frozen_pid, *(pid for _, pid in idle)} <= set(waiting()), timeout=60)
    done = Job.objects.get(pk=jobs[0].pk)
    assert (done.attempt, done.attempts.count()) == (1, 1)  # claimed once, run once
    again = Job.enqueue("echo")
    wait_for(lambda: Job.objects.get(pk=again.pk).status == S.COMPLETED, timeout=60)
    for worker in (*(worker for worker, _ in idle), frozen):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()


def test_a_job_whose_notification_went_nowhere_is_started_by_an_idle_worker(start_worker):
    """The worker's registry row points at a session that listens for nobody (the worker died
    between the enqueue's commit and its claim, or its row was taken over): the notification is
    lost, and the idle worker's look takes the job."""
    idle, _ = start_waiting(start_worker, "idle", *ASLEEP)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as deaf:
        (deaf_pid,) = deaf.execute("SELECT pg_backend_pid()").fetchone()
        with connection.cursor() as cursor:  # the newest waiter: the one the enqueue tells
            cursor.execute("INSERT INTO django_jobs_waiter (pid, waiting) "
                           "VALUES (%s, statement_timestamp() + INTERVAL '1 hour')", [deaf_pid])
        deaf.execute(f"LISTEN django_jobs_{deaf_pid}")
        job = Job.enqueue("echo")
        # told, and never to act
        assert [n.channel for n in deaf.notifies(timeout=30, stop_after=1)] == [
            f"django_jobs_{deaf_pid}"]
        wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=job.pk).worker_id == "idle"
    idle.signal(signal.SIGTERM)
    assert idle.wait() == 0, idle.output()
