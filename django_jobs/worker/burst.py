"""When a burst worker (``runworker --burst``) ends: when its claim took nothing, nothing runs,
its finishes released nothing it could run, and no job it could run comes due within
``--burst-wait`` seconds (default 0: a job due later is left for other workers).

A turn writes its outcomes and claims in one transaction; on PostgreSQL the plain turn is one
statement, whose claim does not see the rows its own finish made ready, and a waiting worker's
claim takes only the jobs it was told of. So after a turn that wrote outcomes and claimed
nothing, the worker looks for jobs that its finishes made ready (``released``: dependents, a
group's callback, follow-ups, each written ready at once, ``run_at`` not after ``updated_at``)
and claims them in its next turn. A retry or a snooze is written due later: it is not counted,
so whether a burst runs it does not depend on how fast the host is. A burst worker claims
whatever is ready (it is never registered as a waiter: ``worker/turn.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import F, Min
from django.utils import timezone

from django_jobs.core import clock
from django_jobs.core.states import READY_STATES
from django_jobs.models import Job
from django_jobs.models.schema import jobs_database

if TYPE_CHECKING:
    from django_jobs.models.managers import JobQuerySet
    from django_jobs.worker.state import WorkerState

# A job that came due this recently may have come due after the claim before (``due_in``); one
# made ready this long before a turn began may be that turn's (``released``).
MARGIN = 1.0
# The shortest wait for a job due: it is claimed by the next turn.
MIN_WAIT = 0.05


def now() -> datetime:
    """The database's time, taken before a turn: what that turn's writes are at or after (by
    the offset the heartbeat measured: no query)."""
    return timezone.now() + clock.offset(jobs_database())


def released(worker: WorkerState, since: datetime) -> bool:
    """Whether a job of the worker's queues was made ready at once, at or after ``since``
    (less ``MARGIN``, for a clock offset measured again meanwhile), and is still ready: a turn
    begun then released it (see the module's docstring)."""
    jobs = Job.objects.in_states(*READY_STATES).filter(
        updated_at__gte=since - timedelta(seconds=MARGIN), run_at__lte=F("updated_at"))
    return _theirs(worker, jobs).exists()


def due_in(worker: WorkerState) -> float | None:
    """Seconds until the first job the worker could run comes due, by the database's clock,
    if that is within ``burst_wait``; None if none is. A job due for longer than ``MARGIN``
    that the claim just before did not take is one the worker cannot run now (a limit refuses
    it): not waited for."""
    window = worker.options.burst_wait
    if window <= 0:
        return None
    jobs = Job.objects.in_states(*READY_STATES)
    at = clock.now(jobs.db)
    jobs = jobs.filter(run_at__gt=at - timedelta(seconds=MARGIN),
                       run_at__lte=at + timedelta(seconds=window))
    first = _theirs(worker, jobs).aggregate(first=Min("run_at"))["first"]
    if first is None:
        return None
    return max((first - at).total_seconds(), MIN_WAIT)


def _theirs(worker: WorkerState, jobs: JobQuerySet) -> JobQuerySet:
    """Those of ``jobs`` in the worker's queues, and not in a queue it finds paused."""
    if worker.options.queues:
        jobs = jobs.filter(queue__in=list(worker.options.queues))
    if worker.producer.paused:
        jobs = jobs.exclude(queue__in=sorted(worker.producer.paused))
    return jobs
