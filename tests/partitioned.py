"""The test database's jobs table as migration ``0028_partitions`` makes it on PostgreSQL,
partitioned by shelf (``docs/explanation-history-partitions.md``), for the tests of what the
engine does on that layout; and the helpers of the tests that race two connections on it."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections, transaction

from django_jobs.engine.moved_rows import MOVES_ROWS
from django_jobs.engine.postgres import partitions
from django_jobs.models import Job


@contextmanager
def partitioned_jobs_table() -> Iterator[None]:
    """The partitioned jobs table, with the engine knowing that it moves rows
    (``MOVES_ROWS``), as after a statement on it has met a moved row."""
    assert partitions.partitioned(connection.alias), "0028 partitions the jobs table"
    MOVES_ROWS.add(connection.alias)
    try:
        yield
    finally:
        MOVES_ROWS.discard(connection.alias)


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
