"""The oldest ready job, from a few probes of the ready index.

``MIN(run_at)`` over the ready jobs reads every one of them (a million at ten million jobs, a
tenth of a second and more): PostgreSQL's ready index orders by priority first, and MariaDB's
by status. ``oldest_ready`` asks each priority (PostgreSQL) or each ready state (MariaDB) for
its earliest due job with a ``LIMIT 1`` probe instead. The admin's overview and list, and the
API's metrics, read it.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connections

from django_jobs.core.states import READY_STATES
from django_jobs.models.managers import JobQuerySet

# The most priorities ``oldest_ready`` probes (priorities are a handful of small numbers).
PRIORITIES_PROBED = 50


def oldest_ready(jobs: JobQuerySet, now: datetime) -> datetime | None:
    """The earliest ``run_at`` of the ready jobs of ``jobs`` due by ``now``, from a few
    ``LIMIT 1`` probes of the ready index rather than a ``MIN`` that reads every ready row.

    PostgreSQL's ready index orders by priority, then run_at: one probe per priority, highest
    first, finds each priority's earliest due job. MariaDB's (``status, run_at``) orders by
    run_at within a status: one probe per ready state.
    """
    if connections[jobs.db].vendor == "mysql":
        return _oldest_by_state(jobs, now)
    return _oldest_by_priority(jobs, now)


def _oldest_by_state(jobs: JobQuerySet, now: datetime) -> datetime | None:
    """MariaDB: each ready state's earliest job, the earliest of those due by ``now``."""
    found = [jobs.filter(status=status).order_by("run_at").values_list("run_at", flat=True)
             .first() for status in READY_STATES]
    due = [run_at for run_at in found if run_at is not None and run_at <= now]
    return min(due, default=None)


def _oldest_by_priority(jobs: JobQuerySet, now: datetime) -> datetime | None:
    """PostgreSQL: each priority's earliest due job, highest priority first, each probe
    starting below the priority the last one found."""
    ready = jobs.in_states(*READY_STATES).filter(run_at__lte=now).order_by("-priority", "run_at")
    oldest, priority = None, None
    for _ in range(PRIORITIES_PROBED):
        following = ready if priority is None else ready.filter(priority__lt=priority)
        first = following.values_list("priority", "run_at").first()
        if first is None:
            break
        priority, run_at = first
        if oldest is None or run_at < oldest:
            oldest = run_at
    return oldest
