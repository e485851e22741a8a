"""When a burst worker (``runworker --burst``) ends: when a claim sent after its last outcomes
were written took nothing and nothing runs, and no job it could run comes due within
``--burst-wait`` seconds (default 0: a job due later is left for other workers).

A turn writes its outcomes and claims in one transaction; on PostgreSQL the plain turn is one
statement, whose claim does not see the rows its own finish made ready, and a waiting worker's
claim takes only the jobs it was told of. So what a finish released (dependents, a group's
callback, follow-ups) is seen by the claim of the next turn: the loop ends only after a turn
that wrote nothing, and a burst worker claims whatever is ready (it is never registered as a
waiter: ``worker/turn.py``)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import Min

from django_jobs.core import clock
from django_jobs.core.states import READY_STATES
from django_jobs.models import Job

if TYPE_CHECKING:
    from django_jobs.worker.state import WorkerState

# A job that came due this recently may have come due after the claim before (see ``due_in``).
MARGIN = 1.0
# The shortest wait for a job due: it is claimed by the next turn.
MIN_WAIT = 0.05


def due_in(worker: WorkerState) -> float | None:
    """Seconds until the first job the worker could run comes due, by the database's clock,
    if that is within ``burst_wait``; None if none is. A job due for longer than ``MARGIN``
    that the claim just before did not take is one the worker cannot run now (a limit refuses
    it): not waited for."""
    window = worker.options.burst_wait
    if window <= 0:
        return None
    jobs = Job.objects.in_states(*READY_STATES)
    now = clock.now(jobs.db)
    jobs = jobs.filter(run_at__gt=now - timedelta(seconds=MARGIN),
                       run_at__lte=now + timedelta(seconds=window))
    if worker.options.queues:
        jobs = jobs.filter(queue__in=list(worker.options.queues))
    if worker.paused:
        jobs = jobs.exclude(queue__in=sorted(worker.paused))
    first = jobs.aggregate(first=Min("run_at"))["first"]
    if first is None:
        return None
    return max((first - now).total_seconds(), MIN_WAIT)
