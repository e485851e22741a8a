"""Which workers an enqueue wakes on PostgreSQL (migrations 0018, 0024 and 0032,
``engine/postgres/waiters.py``): one waiting worker per ready job, the one that began waiting
last first, told on its own channel, and only if its session is still there, without writing
its row; every worker of
the queue when there are fewer waiters than jobs; nobody for a rolled-back enqueue or a job
that is not due. The waiters are real LISTEN sessions, registered by real claims."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from django_jobs.core import contract
from django_jobs.core.contract import ClaimRequest, Waiting
from django_jobs.engine.postgres import waiters as waiters_sql
from django_jobs.models import Job
from tests.conftest import requires_postgres
from tests.helpers import claim
from tests.sched_jobs import register_limited, unregister_limited

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

END = "end of test"


class Waiter:
    """A session listening as a worker's listener does, registered by the claims it makes."""

    def __init__(self, queues: list[str] | None = None) -> None:
        self.conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        self.pid = int(row[0])
        self.channel = f"django_jobs_{self.pid}"
        self.queues = queues
        self.conn.execute(f"LISTEN {self.channel}")
        self.conn.execute("LISTEN django_jobs")

    def claim(self, limit: int = 5, exclude: tuple[str, ...] = ()) -> list[Job]:
        return contract.engine("default").claim(ClaimRequest(
            f"w{self.pid}", limit, 30, queues=self.queues, exclude_queues=exclude,
            waiter=Waiting(self.pid, limit)))

    def heard(self) -> list[tuple[str, str]]:
        """What it was told before the end marker sent last (notifications arrive in the
        order their transactions committed)."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [self.channel, END])
        heard = []
        for note in self.conn.notifies(timeout=30):
            if note.payload == END:
                return heard
            heard.append((note.channel, note.payload))
        raise AssertionError(f"the end marker never arrived; heard {heard}")

    def waiting(self) -> object:
        with connection.cursor() as cursor:
            cursor.execute("SELECT waiting FROM django_jobs_waiter WHERE pid = %s", [self.pid])
            row = cursor.fetchone()
        return row[0] if row else "no row"

    def close(self) -> None:
        self.conn.close()


def clear_waiters() -> None:
    """The waiters table is not a model's: the test database's flush leaves it as it is."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_waiter")


@pytest.fixture
def waiters():
    made: list[Waiter] = []
    clear_waiters()

    def make(count: int = 1, queues: list[str] | None = None) -> list[Waiter]:
        new = [Waiter(queues) for _ in range(count)]
        for waiter in new:
            assert waiter.claim() == []  # short: registered as waiting, in this order
        made.extend(new)
        return new

    yield make
    for waiter in made:
        waiter.close()
    clear_waiters()


def test_a_short_claim_registers_its_worker_and_a_full_one_unregisters_it(waiters):
    (waiter,) = waiters(1)
    assert waiter.waiting() is not None
    Job.enqueue_many("echo", [{}, {}])
    assert len(waiter.claim(limit=1)) == 1  # full: busy
    assert waiter.waiting() is None
    assert len(waiter.claim(limit=2)) == 1  # short: waiting again
    assert waiter.waiting() is not None


def test_one_job_wakes_the_waiter_that_began_waiting_last_alone(waiters):
    first, second, third = waiters(3)
    waited = [first.waiting(), second.waiting(), third.waiting()]
    Job.enqueue("echo")
    assert third.heard() == [(third.channel, "default")]
    assert first.heard() == [] and second.heard() == []
    assert [first.waiting(), second.waiting(), third.waiting()] == waited  # no row written


def test_the_row_of_a_session_that_is_gone_is_passed_over(waiters):
    alive, gone = waiters(2)
    gone.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [gone.pid])
    wait_until_gone(gone.pid)
    waited = gone.waiting()
    Job.enqueue("echo")
    assert alive.heard() == [(alive.channel, "default")]
    assert gone.waiting() == waited  # not taken: left for forget_gone


def test_with_limits_registered_a_claim_registers_its_worker_too():
    """The limits' claims take the ORM's path, and mark their worker waiting or busy alike."""
    register_limited()
    clear_waiters()
    waiter = Waiter()
    try:
        assert waiter.claim(limit=2) == []  # short: waiting
        assert waiter.waiting() is not None
        Job.enqueue_many("capped", [{}, {}, {}])  # at most two running
        assert waiter.heard() == [(waiter.channel, "default"), ("django_jobs", "default")]
        assert len(waiter.claim(limit=2)) == 2  # full: busy
        assert waiter.waiting() is None
        assert waiter.claim(limit=2) == []  # the third is refused: short, waiting again
        assert waiter.waiting() is not None
    finally:
        waiter.close()
        unregister_limited()
        clear_waiters()


def test_more_jobs_than_waiters_wake_every_waiter_and_tell_every_worker(waiters):
    first, second = waiters(2)
    Job.enqueue_many("echo", [{}, {}, {}])
    assert first.heard() == [(first.channel, "default"), ("django_jobs", "default")]
    assert second.heard() == [(second.channel, "default"), ("django_jobs", "default")]


def test_a_rolled_back_enqueue_wakes_nobody(waiters):
    (waiter,) = waiters(1)
    waited = waiter.waiting()
    with transaction.atomic():
        Job.enqueue("echo")
        transaction.set_rollback(True)
    assert waiter.heard() == []
    assert waiter.waiting() == waited


def test_a_job_not_yet_due_wakes_nobody_and_is_claimed_once_due(waiters):
    (waiter,) = waiters(1)
    job = Job.enqueue("echo", delay=3600)
    assert waiter.heard() == []
    Job.objects.filter(pk=job.pk).run_now()  # pending and due: a waiter is taken for it
    assert waiter.heard() == [(waiter.channel, "default")]
    assert [j.pk for j in waiter.claim()] == [job.pk]


def test_a_job_pending_again_wakes_one_waiter(waiters):
    (job,) = [Job.enqueue("echo")]
    (held,) = claim(1)
    assert held.pk == job.pk
    first, second = waiters(2)
    Job.objects.release([held])
    assert second.heard() == [(second.channel, "default")]
    assert first.heard() == []


def test_waiters_of_other_queues_and_paused_ones_are_left_alone(waiters):
    (other,) = waiters(1, queues=["b"])
    (paused,) = [Waiter()]
    try:
        assert paused.claim(exclude=("a",)) == []
        Job.enqueue("echo", queue="a")
        # No waiter takes queue a: every worker is told, with the queue, and a worker of
        # queue b lets it pass (listener.py).
        assert other.heard() == [("django_jobs", "a")]
        assert paused.heard() == [("django_jobs", "a")]
        assert other.waiting() is not None and paused.waiting() is not None
    finally:
        paused.close()


def test_a_worker_that_stops_listening_leaves_its_row_to_the_next_listener(waiters):
    (gone,) = waiters(1)
    gone.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [gone.pid])
    from django_jobs.engine.postgres import waiters as pgwaiters

    wait_until_gone(gone.pid)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as conn:
        pgwaiters.forget_gone(conn)
    assert gone.waiting() == "no row"


def wait_until_gone(pid: int) -> None:
    """The session ends a moment after its socket closes."""
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as conn:
        for _ in range(200):
            if not conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                (pid,)).fetchone():
                return
            conn.execute("SELECT pg_sleep(0.05)")
    raise AssertionError(f"session {pid} is still there")


def test_a_waiter_is_told_until_its_claim_leaves_it_busy_then_the_next_one(waiters):
    first, second = waiters(2)
    Job.enqueue("echo")
    assert second.heard() == [(second.channel, "default")]
    Job.enqueue("echo")  # before its claim: the same waiter, which claims both
    assert second.heard() == [(second.channel, "default")]
    assert first.heard() == []
    assert len(second.claim(limit=2)) == 2  # full: busy
    Job.enqueue("echo")
    assert first.heard() == [(first.channel, "default")]
    assert second.heard() == []


def test_two_enqueues_at_once_tell_two_waiters(waiters):
    """An enqueue locks the waiter it tells until it commits: another enqueue meanwhile (the
    trigger's function, called in a session of its own) tells the next one."""
    first, second = waiters(2)
    with psycopg.connect(**connection.get_connection_params()) as other:
        with transaction.atomic():
            Job.enqueue("echo")  # tells ``second``, which stays locked until this commits
            other.execute("SELECT django_jobs_wake('default', 1)")
            other.commit()
    assert first.heard() == [(first.channel, "default")]
    assert second.heard() == [(second.channel, "default")]


def test_with_no_waiter_left_a_busy_worker_is_told_alone(waiters):
    first, second = waiters(2)
    Job.enqueue_many("echo", [{}, {}])
    assert first.heard() == [(first.channel, "default")]
    assert second.heard() == [(second.channel, "default")]
    assert len(first.claim(limit=1)) == 1 and len(second.claim(limit=1)) == 1  # both busy
    Job.enqueue("echo")  # nobody waits: one busy worker claims it at its next turn
    heard = first.heard() + second.heard()
    assert len(heard) == 1 and heard[0][0] in (first.channel, second.channel)


def test_a_waiting_worker_claims_only_what_it_was_told_of_until_its_poll():
    """``Listener.allowance``: the bound on a waiting worker's claims (worker/turn.py), on a
    listener whose thread is not started (its counts are what the thread would write)."""
    import threading

    from django_jobs.engine.postgres.listener import Listener

    listener = Listener(connection, threading.Event(), poll_interval=3600)
    assert listener.allowance() is None  # not listening: no bound
    listener.pid = 1234
    assert listener.allowance() is None  # has not claimed yet
    listener.claim_sent(listener.heard_so_far(), waiting=True)
    assert listener.allowance() == 0  # told of nothing: its turns only write outcomes
    listener.heard += 2
    assert listener.allowance() == 2
    listener.claim_sent(listener.heard_so_far(), waiting=False)  # filled its room: busy
    assert listener.allowance() is None
    listener.claim_sent(listener.heard_so_far(), waiting=True)
    listener.heard_all += 1  # every worker was told: no bound
    assert listener.allowance() is None
    listener.claim_sent(listener.heard_so_far(), waiting=True)
    listener.claimed_at -= 3600  # the poll is due: no bound
    assert listener.allowance() is None


def look(waiter: Waiter, queues: list[str] | None = None, skips: tuple[str, ...] = ()
         ) -> tuple[int, int]:
    with connection.cursor() as cursor:
        return waiters_sql.overlooked(cursor, waiter.pid, queues, skips)


def test_a_look_counts_the_jobs_due_a_while_and_unclaimed_and_ranks_the_waiter(waiters):
    first, second, third = waiters(3)
    assert [look(w) for w in (first, second, third)] == [(0, 0), (0, 1), (0, 2)]
    assert waiters_sql.look_every(0) == waiters_sql.look_every(1) == waiters_sql.LOOK_EVERY
    assert waiters_sql.look_every(3) == 3 * waiters_sql.LOOK_EVERY
    fresh = Job.enqueue("echo")  # told to ``third``: not overlooked yet
    assert look(first) == (0, 0)
    told = Job.enqueue("echo", queue="mail")
    with connection.cursor() as cursor:  # due for a second now, by the database's clock
        cursor.execute("UPDATE django_jobs_job SET run_at = statement_timestamp() - "
                       "INTERVAL '1 second' WHERE id IN (%s, %s)", [fresh.pk, told.pk])
    assert look(first)[0] == 2
    assert look(first, queues=["mail"])[0] == 1
    assert look(first, skips=("mail",))[0] == 1
    assert len(first.claim(limit=5)) == 2  # claimed: no longer overlooked
    assert look(second)[0] == 0


def test_the_migration_back_marks_a_told_waiter_taken_and_forward_again_does_not(waiters):
    """Migration 0032 back to 0024's function, which writes the waiter it tells, and forward
    again."""
    from django.db.migrations.executor import MigrationExecutor

    (waiter,) = waiters(1)
    executor = MigrationExecutor(connection)
    executor.migrate([("django_jobs", "0031_idempotency_key_outlives_job")])
    try:
        Job.enqueue("echo")
        assert waiter.heard() == [(waiter.channel, "default")]
        assert waiter.waiting() is None  # taken
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("django_jobs"))
    assert len(waiter.claim()) == 1  # short: waiting again
    waited = waiter.waiting()
    assert waited is not None
    Job.enqueue("echo")
    assert waiter.heard() == [(waiter.channel, "default")]
    assert waiter.waiting() == waited
