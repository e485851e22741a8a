"""The test database's jobs table partitioned by shelf, for the tests of what the engine does on
that layout (``docs/explanation-history-partitions.md``): the plain table set aside, and in its
place a partitioned one of the same columns with an open partition, one partition for every
prune day and a kept one, and the unique index of keys per partition, ``(unique_key, shelf)``.
Also the helpers of the tests that race two connections on it."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections, transaction

from django_jobs.engine.moved_rows import MOVES_ROWS
from django_jobs.models import Job


@contextmanager
def partitioned_jobs_table() -> Iterator[None]:
    """The jobs table partitioned by shelf while the block runs; the plain one after it (the
    rows written meanwhile gone, with the rows that referenced them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " FROM pg_constraint WHERE confrelid = 'django_jobs_job'::regclass AND contype = 'f'"
        )
        keys = cursor.fetchall()
        for table, name, _ in keys:  # no foreign key may reference a partitioned table on id
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        cursor.execute("ALTER TABLE django_jobs_job RENAME TO django_jobs_job_plain")
        cursor.execute(
            "CREATE TABLE django_jobs_job (LIKE django_jobs_job_plain INCLUDING DEFAULTS"
            " INCLUDING IDENTITY) PARTITION BY RANGE (shelf)")
        for name, bounds in (("open", "FROM (MINVALUE) TO ('2000-01-01')"),
                             ("days", "FROM ('2000-01-01') TO ('9999-01-01')"),
                             ("kept", "FROM ('9999-01-01') TO (MAXVALUE)")):
            cursor.execute(f"CREATE TABLE django_jobs_job_{name} PARTITION OF django_jobs_job"
                           f" FOR VALUES {bounds}")
        cursor.execute("CREATE UNIQUE INDEX django_jobs_job_key_shelf ON django_jobs_job"
                       " (unique_key, shelf) WHERE unique_key IS NOT NULL")
    MOVES_ROWS.add(connection.alias)  # as a statement on it that met a moved row would
    try:
        yield
    finally:
        MOVES_ROWS.discard(connection.alias)
        for alias in connections:
            connections[alias].close()
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE django_jobs_job")
            cursor.execute("ALTER TABLE django_jobs_job_plain RENAME TO django_jobs_job")
            cursor.execute("TRUNCATE {} CASCADE".format(", ".join({t for t, _, _ in keys})))
            for table, name, definition in keys:
                cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')


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
