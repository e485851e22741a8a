"""Reads bounded to the newest jobs, for filters no index serves.

A list filtered by a type or a queue on PostgreSQL (no index leads with either there), or by a
word in free text, walks the ``created_at`` index from the newest job and reads each row until
a page of matches is found. A common value fills a page at once; one with few jobs, or none,
reads the whole table (seconds at ten million rows). Bounded, such a read stops at the
``created_at`` of the ``window``-th newest job, found by reading that many entries of the index
alone: it finds what the newest ``window`` jobs hold, and nothing older. The admin and the API
both bound their lists this way, and each says so where it does.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.db import connections
from django.db.models import Model, QuerySet

from django_jobs.models.counts import planner_estimate
from django_jobs.models.jobs import Job

M = TypeVar("M", bound=Model)

# The newest jobs a bounded read looks among.
NEWEST_WINDOW = 10_000
# A filter the planner expects to match fewer jobs than this is "rare" (``bounded_if_rare``).
RARE_BELOW = 500
DATE_FIELD = "created_at"


def window_start(using: str, window: int | None = None) -> datetime | None:
    """``created_at`` of the ``window``-th newest job in ``using`` (``NEWEST_WINDOW`` by
    default), or None if it holds fewer."""
    window = window or NEWEST_WINDOW
    newest = Job.objects.using(using).order_by(f"-{DATE_FIELD}")
    found = list(newest.values_list(DATE_FIELD, flat=True)[window - 1:window])
    return found[0] if found else None


def bounded(queryset: QuerySet[M], window: int | None = None,
            ) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` limited to the newest ``window`` jobs, and where that window starts; or
    unchanged and None when the table holds fewer jobs than the window."""
    start = window_start(queryset.db, window)
    if start is None:
        return queryset, None
    return queryset.filter(**{f"{DATE_FIELD}__gte": start}), start


def bounded_if_rare(queryset: QuerySet[M], window: int | None = None,
                    ) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` (filtered by a type or a queue) limited to the newest ``window`` jobs when
    the planner expects it to match fewer than ``RARE_BELOW`` of them, on PostgreSQL, where no
    index serves those filters. MariaDB has an index for each (``engine/mariadb/schema.py``);
    SQLite tables are small. Unchanged, and None, otherwise."""
    if connections[queryset.db].vendor != "postgresql":
        return queryset, None
    estimate = planner_estimate(queryset)
    if estimate is None or estimate.rows >= RARE_BELOW:
        return queryset, None
    return bounded(queryset, window)
