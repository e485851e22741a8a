"""Helpers for testing a site's own handlers and the code that enqueues jobs.

``run_jobs()`` runs the ready jobs in the test's own thread and database transaction, through
the worker's path: claim, run the handler, write the outcome. Retries, dead jobs, follow-ups,
dependencies and callbacks therefore behave as under ``runworker``. ``enqueued_jobs()`` and
``assert_enqueued()`` look at what is waiting to run. ``django_jobs.pytest_plugin`` gives all
three as the ``jobs`` fixture. See docs/howto-test-handlers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from django.db import DatabaseError, connections

from django_jobs.core.settings import jobs_settings
from django_jobs.models import Job, QueueState
from django_jobs.signals import job_finished
from django_jobs.worker.execution import isolation_off, run_job
from django_jobs.worker.log_lines import log_end

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models.managers import JobQuerySet

__all__ = ["JobsHelper", "TooManyJobs", "assert_enqueued", "enqueued_jobs", "run_jobs"]

# The worker id the attempts of run_jobs() are recorded under.
WORKER_ID = "django_jobs.testing"
# The states of a job that has been enqueued and not yet run (waiting: on its dependencies).
ENQUEUED_STATES = (Job.Status.PENDING, Job.Status.WAITING)


class TooManyJobs(AssertionError):
    """``run_jobs`` reached ``max_jobs`` attempts and jobs were still ready."""


def run_jobs(
    *,
    queues: Sequence[str] | None = None,
    include_delayed: bool = False,
    max_jobs: int = 100,
) -> list[Job]:
    """Run the ready jobs one at a time until none is ready; return one ``Job`` per attempt.

    Each entry is the job as that attempt left it (``status``, ``attempt``, ``result``,
    ``error``), in the order the attempts ran: highest priority first, then earliest
    ``run_at``, as a worker claims them. Jobs that the handlers enqueue, follow-ups and
    released dependents run in the same call once they are due.

    - ``queues``: only these queues (default: every queue not paused, like ``runworker``).
    - ``include_delayed``: also run jobs whose ``run_at`` is still to come: scheduled jobs,
      failed jobs waiting out their backoff, snoozed jobs. They are made due now, as the
      admin's "run now" does, so a failing job goes through all its attempts to ``dead``.
      Without it, only jobs already due run, and a retry stays pending for later.
    - ``max_jobs``: the most attempts to run; ``TooManyJobs`` is raised if jobs are still
      ready after that (a handler that snoozes or enqueues itself for ever).

    Handler timeouts are not enforced: the handler runs in the caller's thread to its end,
    a handler with ``isolation="process"`` too (it sees the test's data, in its transaction).
    """
    ran: list[Job] = []
    while True:
        if include_delayed:
            _in(Job.objects.all(), queues).run_now()
        if len(ran) >= max_jobs:
            if _in(Job.objects.ready(), queues).exclude(queue__in=_paused()).exists():
                raise TooManyJobs(
                    f"run_jobs ran {max_jobs} attempts and jobs are still ready: does a "
                    "handler snooze or enqueue itself for ever? Raise max_jobs if not."
                )
            return ran
        job = _claim_one(queues)
        if job is None:
            return ran
        ran.append(_run_one(job))


def _in(jobs: JobQuerySet, queues: Sequence[str] | None) -> JobQuerySet:
    return jobs if queues is None else jobs.filter(queue__in=queues)


def _paused() -> list[str]:
    return list(QueueState.objects.filter(paused=True).values_list("name", flat=True))


def _claim_one(queues: Sequence[str] | None) -> Job | None:
    claimed = Job.objects.claim(
        worker_id=WORKER_ID, limit=1, lease_seconds=float(jobs_settings.LEASE_SECONDS),
        queues=list(queues) if queues is not None else None, exclude_queues=_paused(),
    )
    return claimed[0] if claimed else None


def _run_one(job: Job) -> Job:
    """One attempt of a claimed job: run it, write its outcome, signal and log as a worker.
    A handler with ``isolation="process"`` runs here too, where it sees the test's data."""
    token = isolation_off.set(True)
    try:
        return _write(_attempt(job))
    finally:
        isolation_off.reset(token)


def _attempt(job: Job) -> AttemptOutcome:
    """Run the handler in this thread, in a savepoint inside a test's transaction."""
    connection = connections[Job.objects.db]
    if not connection.in_atomic_block:  # a transactional test: as in a worker
        outcome = run_job(job)
    else:  # inside the test's transaction: the handler gets a savepoint of its own
        # None only where savepoints are off, and then commit and rollback do nothing
        savepoint = cast(str, connection.savepoint())
        outcome = run_job(job, tidy=False)
        try:
            connection.savepoint_commit(savepoint)
        except DatabaseError:  # a query of the handler failed and broke the transaction
            connection.savepoint_rollback(savepoint)
    return outcome


def _write(outcome: AttemptOutcome) -> Job:
    """Write the attempt's outcome, then log and signal it as a worker does."""
    for written in Job.objects.finish([outcome]):
        log_end(WORKER_ID, written)
        job_finished.send(sender=Job, job=written.job, outcome=written.kind,
                          exception=written.exception)
    return outcome.job


def enqueued_jobs(type: str | None = None, **filters: Any) -> list[Job]:
    """The jobs enqueued and not yet run (pending or waiting), oldest first.

    ``type`` and any ``Job`` field lookups (``queue="emails"``, ``priority__gte=10``)
    narrow the list."""
    jobs = Job.objects.filter(status__in=ENQUEUED_STATES, **filters)
    if type is not None:
        jobs = jobs.filter(type=type)
    return list(jobs.order_by("id"))


def assert_enqueued(
    type: str, payload: Any = None, *, count: int | None = None, **filters: Any
) -> list[Job]:
    """Assert that jobs of ``type`` wait to run, and return them.

    ``payload``, when given, must equal the job's payload. ``count`` asks for exactly that
    many matching jobs (0: none); without it, at least one must match. ``filters`` are
    ``Job`` field lookups, as for ``enqueued_jobs``.
    """
    candidates = enqueued_jobs(type, **filters)
    found = [job for job in candidates if payload is None or job.payload == payload]
    matched = len(found) == count if count is not None else bool(found)
    if matched:
        return found
    wanted = f"{count} job(s)" if count is not None else "a job"
    described = f"{wanted} of type {type!r}"
    if payload is not None:
        described += f" with payload {payload!r}"
    enqueued = [(job.type, job.payload) for job in enqueued_jobs()] or "nothing"
    raise AssertionError(f"expected {described}, found {len(found)}; enqueued: {enqueued}")


class JobsHelper:
    """The three helpers as methods: what the pytest fixture ``jobs`` gives a test."""

    def run(self, **options: Any) -> list[Job]:
        """``run_jobs(**options)``."""
        return run_jobs(**options)

    def enqueued(self, type: str | None = None, **filters: Any) -> list[Job]:
        """``enqueued_jobs(type, **filters)``."""
        return enqueued_jobs(type, **filters)

    def assert_enqueued(
        self, type: str, payload: Any = None, *, count: int | None = None, **filters: Any
    ) -> list[Job]:
        """``assert_enqueued(type, payload, count=count, **filters)``."""
        return assert_enqueued(type, payload, count=count, **filters)
