"""Helpers for the tests of concurrent staff actions on one job (the API's, the admin's, the
command's): jobs in the states a worker leaves them in, the actions sent at once from threads,
and the end states (and answers) that the actions sent one at a time, in some order, give."""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import connection, connections, transaction

from django_jobs.core.shelves import OPEN_SHELF
from django_jobs.models import Job, JobAttempt
from tests.api_support import run_ready

# The handlers that leave a job failed (an attempt left) or dead after one attempt (tests/jobs.py).
MADE_BY = {"failed": "always_fails", "dead": "permanent", "canceled": "always_fails",
           "pending": "noop"}


def job_in(status: str) -> Job:
    """A job in ``status`` as a worker (and a person, for a canceled one) leaves it: run
    through the worker's write path, with its attempt row, on the shelf its state puts it."""
    job = Job.enqueue(MADE_BY[status])
    if status != "pending":
        run_ready()
    if status == "canceled":
        assert Job.objects.filter(pk=job.pk).cancel() == 1
    job.refresh_from_db()
    assert job.status == status
    return job


def at_once(actions: Sequence[Callable[[], object]]) -> list[object]:
    """Run ``actions`` from as many threads, released together; each one's result, or the
    exception it raised (with its traceback, to show). Each thread closes its connections."""
    barrier = threading.Barrier(len(actions))
    results: list[object] = [None] * len(actions)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = actions[i]()
        except Exception as exc:  # shown by the test that asserts there is none
            results[i] = Raised(exc, traceback.format_exc())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@dataclass
class Raised:
    exc: Exception
    text: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Raised({self.text})"


# What each action does to a job, one at a time: the status it leaves (None: the job is gone)
# and what it answers, from the status it found. ``requested``: a processing job asked to stop.
def serially(start: str, verbs: Sequence[str], answer: Callable[[str, str | None], str]
             ) -> set[tuple[str | None, tuple[str, ...]]]:
    """The (end status, answers in the order of ``verbs``) of every order of ``verbs``."""
    outcomes = set()
    for order in itertools.permutations(range(len(verbs))):
        status: str | None = start
        answers = [""] * len(verbs)
        for i in order:
            answers[i] = answer(verbs[i], status)
            status = after(verbs[i], status)
        outcomes.add((status, tuple(answers)))
    return outcomes


def after(verb: str, status: str | None) -> str | None:
    if status is None:
        return None
    if verb == "retry" and status in ("dead", "failed", "canceled"):
        return "pending"
    if verb == "edit" and status == "dead":
        return "pending"
    if verb == "cancel" and status in ("pending", "failed"):
        return "canceled"
    if verb == "cancel" and status == "processing":
        return "requested"
    if verb == "delete" and status not in ("processing", "requested"):
        return None
    return status


def end_state(job: Job) -> str | None:
    """The job's status (``requested`` for a processing job asked to stop), None if it is
    gone; and its attempts on the shelf its state puts them on (an open job's on the open
    shelf, where no prune takes them; a finished job's on its own)."""
    row = Job.objects.filter(pk=job.pk).first()
    if row is None:
        assert not JobAttempt.objects.filter(job_id=job.pk).exists()
        return None
    shelves = set(JobAttempt.objects.filter(job_id=job.pk).values_list("shelf", flat=True))
    assert shelves <= {row.shelf}, (row.status, row.shelf, shelves)
    if row.status in ("pending", "failed", "processing"):
        assert row.shelf == OPEN_SHELF
    if row.status == "processing" and row.cancel_requested:
        return "requested"
    assert not row.cancel_requested or row.status in ("pending", "failed"), row.status
    return row.status


@contextmanager
def row_held(job: Job) -> Iterator[None]:
    """Another transaction holds the job's row (as a worker's write or another person's action
    does) until the block ends; a real lock, taken from another thread's connection."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Job.objects.select_for_update().filter(pk=job.pk))
                locked.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        yield
    finally:
        release.set()
        holder.join()


@contextmanager
def short_lock_waits() -> Iterator[None]:
    """This thread's connection waits a second at most for a row lock (PostgreSQL's
    ``lock_timeout``, MariaDB's ``innodb_lock_wait_timeout``), then its statement fails."""
    set_it, reset = {
        "postgresql": ("SET lock_timeout = '1s'", "RESET lock_timeout"),
        "mysql": ("SET SESSION innodb_lock_wait_timeout = 1",
                  "SET SESSION innodb_lock_wait_timeout = DEFAULT"),
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(set_it)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(reset)


def waiting_on_a_lock() -> bool:
    """Whether some other session of the test database waits on a row lock now."""
    query = {
        "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                      "AND datname = current_database()",
        "mysql": "SELECT count(*) FROM information_schema.innodb_trx "
                 "WHERE trx_state = 'LOCK WAIT'",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchone()[0] > 0


@contextmanager
def claimed_once_waited_on(job: Job) -> Iterator[None]:
    """A worker's claim of ``job`` in another transaction, committed once a statement of the
    block waits on the row it holds: the block read the job before the claim and acts after."""
    def claim() -> None:
        try:
            with transaction.atomic():
                assert Job.objects.filter(pk=job.pk, status="pending").update(
                    status="processing", worker_id="w-1", attempt=job.attempt + 1)
                claimed.set()
                deadline = time.monotonic() + 30
                while not waiting_on_a_lock() and time.monotonic() < deadline:
                    time.sleep(0.02)
        finally:
            connections.close_all()

    claimed = threading.Event()
    worker = threading.Thread(target=claim)
    worker.start()
    try:
        assert claimed.wait(30)
        yield
    finally:
        worker.join()
