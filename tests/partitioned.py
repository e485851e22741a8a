"""The test database's jobs table as migration ``0028_partitions`` makes it on PostgreSQL,
partitioned by shelf (``docs/explanation-history-partitions.md``), for the tests of what the
engine does on that layout; and the helpers of the tests that race two connections on it."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections, transaction

from django_jobs.engine import moved_rows
from django_jobs.engine.postgres import partitions
from django_jobs.models import Job


@contextmanager
def partitioned_jobs_table() -> Iterator[None]:
    """The partitioned jobs table, with the engine reading afresh whether it moves rows
    (``moved_rows.moves_rows``)."""
    assert partitions.partitioned(connection.alias), "0028 partitions the jobs table"
    moved_rows.forget(connection.alias)
    try:
        yield
    finally:
        moved_rows.forget(connection.alias)


def day_partition(job: Job) -> str:
    """The day partition of ``job``'s prune day (its shelf)."""
    return partitions.day_name(partitions.JOBS, Job.objects.get(pk=job.pk).shelf)


def partition_of(job: Job) -> str:
    """The partition that holds ``job``'s row."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM django_jobs_job WHERE id = %s",
                       [job.pk])
        return cursor.fetchone()[0]


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, dict]:
    """Run ``work`` on a connection of its own; its result or error lands in the dict."""
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = work()
        except BaseException as exc:
            out["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def wait_until_blocked(count: int = 1) -> None:
    """Until ``count`` sessions of the test database wait on a lock (PostgreSQL)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                           " current_database() AND wait_event_type = 'Lock'")
            if cursor.fetchone()[0] >= count:
                return
        time.sleep(0.01)
    raise AssertionError("no session waited on a lock")


def race(move: Callable[[], object], write: Callable[[], object]) -> object:
    """``move`` in a transaction held open until ``write``, in another one, waits on its row;
    then ``move`` commits. Returns what ``write`` returned (raises what it raised)."""
    moved, commit = threading.Event(), threading.Event()

    def mover() -> object:
        with transaction.atomic():
            result = move()
            moved.set()
            assert commit.wait(10)
        return result

    mover_thread, mover_out = in_thread(mover)
    assert moved.wait(10), mover_out
    writer_thread, writer_out = in_thread(write)
    try:
        wait_until_blocked()
    finally:
        commit.set()
        mover_thread.join(10)
        writer_thread.join(10)
    assert "error" not in mover_out, mover_out["error"]
    if "error" in writer_out:
        raise writer_out["error"]
    return writer_out["result"]


# The advisory locks on which a paused statement waits at a job's row: two int4 keys, this one
# ("paus" in ASCII) and the job's id.
PAUSES = 0x70617573

# The condition of the jobs table's row-level security while statements are paused: true for
# every row, once the test lets them go on for the rows of the jobs ``{ids}``. lock_timeout: a
# test that never lets a statement go on fails in the end rather than hangs.
PAUSING = """CREATE FUNCTION django_jobs_paused_row(id bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET lock_timeout = '10s' AS $$
BEGIN
    IF id = ANY('{ids}'::bigint[]) THEN
        PERFORM pg_advisory_lock_shared({key}, id::int);
        PERFORM pg_advisory_unlock_shared({key}, id::int);
    END IF;
    RETURN true;
END $$"""


class Pause:
    """A statement on a connection of its own, paused at jobs' rows (``paused_claims``)."""

    def __init__(self, role: str, jobs: list[int]) -> None:
        self.role = role
        self.held = jobs  # the jobs whose rows still pause it, in order (their locks held here)
        self.thread: threading.Thread | None = None
        self.out: dict = {}

    def start(self, work: Callable[[], object]) -> None:
        """Run ``work`` in a thread, on a connection of its own under the paused role; return
        once it waits at the first job's row."""
        def paused() -> object:
            with connection.cursor() as cursor:
                cursor.execute(f"SET ROLE {self.role}")
                # The claim's plan on a table in use: the ready index walked in claim order,
                # each row locked as it is read (tests/engine/test_claim_plans.py). On the
                # test's few rows the planner would read them all and sort, once statistics
                # exist, and reach the paused rows in another order.
                cursor.execute("SET enable_seqscan = off")
            return work()

        self.thread, self.out = in_thread(paused)
        self.wait()

    def step(self) -> None:
        """Let it go on from the row it waits at; return once it waits at the next job's."""
        self.release()
        self.wait()

    def resume(self) -> object:
        """Let it go on to its end; returns what ``work`` returned (raises what it raised)."""
        while self.held:
            self.release()
        assert self.thread is not None, "nothing was started"
        self.thread.join(10)
        assert not self.thread.is_alive(), "the statement did not end"
        if "error" in self.out:
            raise self.out["error"]
        return self.out["result"]

    def wait(self) -> None:
        """Until ``work`` waits at the row of the first job still held."""
        assert self.thread is not None, "nothing was started"
        deadline = time.monotonic() + 10
        while not self.waiting(self.held[0]):
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError(f"no statement paused at job {self.held[0]}: {self.out}")
            time.sleep(0.01)

    def waiting(self, job: int) -> bool:
        """Whether a session of the test database waits at ``job``'s row."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
                           " AND NOT granted AND classid = %s AND objid = %s AND objsubid = 2"
                           " AND database = (SELECT oid FROM pg_database"
                           " WHERE datname = current_database()))", [PAUSES, job])
            return cursor.fetchone()[0]

    def release(self) -> None:
        """The first held job's row no longer pauses anything."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [PAUSES, self.held.pop(0)])


@contextmanager
def paused_claims(*jobs: Job) -> Iterator[Pause]:
    """Statements that the test pauses at the rows of ``jobs``, after they took their snapshot
    and before they lock the row, so that it can change a row meanwhile (claim and finish its
    job on its own connection, which moves the row to a day partition) and then let them meet
    what it did. ``pause.start(work)`` runs ``work`` and returns once it is paused at the first
    job's row, ``pause.step()`` lets it go on until the next job's, ``pause.resume()`` lets it
    go on to its end and returns what it returned (raises what it raised).

    How: row-level security on the jobs table, whose policy's function, true for every row,
    waits at each of these jobs' rows on an advisory lock that this connection holds until it
    lets the statement go on. PostgreSQL checks a policy in the scan, on each row it reads,
    which is below the lock of ``FOR UPDATE`` (the plan's ``LockRows``) and after the statement
    took its snapshot. The policy holds for a role of its own, under which ``work`` runs: this
    connection's user, a superuser, passes over row-level security and is not paused.
    Everything is undone on leaving."""
    table = connection.ops.quote_name(Job._meta.db_table)
    ids = [int(job.pk) for job in jobs]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        role = connection.ops.quote_name(f"{cursor.fetchone()[0]}_paused_claimer")
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")  # the same statistics whatever ran before
    with transaction.atomic(), connection.cursor() as cursor:
        # A run killed inside the block leaves the role (roles outlive the test database,
        # which took the role's grants with it): the next run drops it first.
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        cursor.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public"
                       f" TO {role}")
        cursor.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        cursor.execute(PAUSING.format(ids="{" + ",".join(map(str, ids)) + "}", key=PAUSES))
        cursor.execute(f"CREATE POLICY django_jobs_paused ON {table}"
                       " USING (django_jobs_paused_row(id))")
        cursor.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    with connection.cursor() as cursor:
        for job in ids:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [PAUSES, job])
    pause = Pause(role, ids)
    try:
        yield pause
    finally:
        while pause.held:
            pause.release()
        if pause.thread is not None:
            pause.thread.join(10)  # and its connection, under the role, closed
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
            cursor.execute(f"DROP POLICY django_jobs_paused ON {table}")
            cursor.execute("DROP FUNCTION django_jobs_paused_row(bigint)")
            cursor.execute(f"DROP OWNED BY {role}")  # its grants
            cursor.execute(f"DROP ROLE {role}")
