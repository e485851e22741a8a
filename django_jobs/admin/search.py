"""Free-text search of the job list, bounded on a large table.

A word is looked for in the type, the error message and the payload text: no index serves
``LIKE '%word%'``, so the list walks the ``created_at`` index from the newest job and reads each
row until a page of matches is found. A common word fills a page at once; a rare one (or a typo)
reads the whole table, several seconds at a million rows on MariaDB. So unless the list is
already narrowed to a period of the date drill-down, a search reads only the newest
``window`` jobs: the walk stops at the ``created_at`` of the window's oldest job, found by
reading that many entries of the index alone. A page says so, and choosing a period in the
drill-down searches all of that period instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.db import connections
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from django_jobs.models import Job
from django_jobs.models.counts import planner_estimate

M = TypeVar("M", bound=Model)

# Newest jobs a free-text search reads when no period is chosen.
SEARCH_WINDOW = 10_000
DATE_FIELD = "created_at"


def period_chosen(request: HttpRequest) -> bool:
    """Whether the list is narrowed by date (the drill-down, or the created filter)."""
    return any(key.startswith(f"{DATE_FIELD}__") for key in request.GET)


def window_start(queryset: QuerySet[M], window: int) -> datetime | None:
    """``created_at`` of the ``window``-th newest job, or None if the table holds fewer."""
    newest = Job.objects.using(queryset.db).order_by(f"-{DATE_FIELD}")
    found = list(newest.values_list(DATE_FIELD, flat=True)[window - 1:window])
    return found[0] if found else None


def bounded(request: HttpRequest, queryset: QuerySet[M],
            window: int = SEARCH_WINDOW) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` limited to the newest ``window`` jobs, and where that window starts; or
    unchanged and None when a period is chosen or the table is smaller than the window."""
    if period_chosen(request):
        return queryset, None
    start = window_start(queryset, window)
    if start is None:
        return queryset, None
    return queryset.filter(**{f"{DATE_FIELD}__gte": start}), start


# A filter the planner expects to match fewer jobs than this is "rare" (see ``bounded_if_rare``).
RARE_BELOW = 500


def bounded_if_rare(request: HttpRequest, queryset: QuerySet[M],
                    window: int = SEARCH_WINDOW) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` (filtered by a type or a queue) limited to the newest ``window`` jobs when
    the planner expects it to match fewer than ``RARE_BELOW`` of them, on PostgreSQL, where no
    index serves those filters: a page of such a filter walks the ``created_at`` index until
    50 rows match, which for a type with no job reads the whole table (seconds at 10M rows).
    MariaDB has an index for each (``engine/mariadb/schema.py``); SQLite tables are small.
    Unchanged, and None, when a period is chosen, as for a search."""
    if connections[queryset.db].vendor != "postgresql" or period_chosen(request):
        return queryset, None
    estimate = planner_estimate(queryset)
    if estimate is None or estimate.rows >= RARE_BELOW:
        return queryset, None
    return bounded(request, queryset, window)
