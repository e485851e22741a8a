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

import re
from datetime import datetime
from typing import TypeVar

from django.db.models import Model, QuerySet
from django.http import HttpRequest

from django_jobs.models import newest
from django_jobs.models.newest import DATE_FIELD

M = TypeVar("M", bound=Model)

# Newest jobs a free-text search reads when no period is chosen.
SEARCH_WINDOW = newest.NEWEST_WINDOW
PUBLIC_ID_RE = re.compile(r"j-[0-9a-f]{20}")  # a search for one finds that job alone


def period_chosen(request: HttpRequest) -> bool:
    """Whether the list is narrowed by date (the drill-down, or the created filter)."""
    return any(key.startswith(f"{DATE_FIELD}__") for key in request.GET)


def bounded(request: HttpRequest, queryset: QuerySet[M],
            window: int = SEARCH_WINDOW) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` limited to the newest ``window`` jobs, and where that window starts; or
    unchanged and None when a period is chosen or the table is smaller than the window."""
    if period_chosen(request):
        return queryset, None
    return newest.bounded(queryset, window)


def bounded_if_rare(request: HttpRequest, queryset: QuerySet[M],
                    window: int = SEARCH_WINDOW) -> tuple[QuerySet[M], datetime | None]:
    """``queryset`` (filtered by a type or a queue) limited to the newest ``window`` jobs when
    the planner expects few of them (``models/newest.py``, PostgreSQL only); unchanged, and
    None, when a period is chosen, as for a search."""
    if period_chosen(request):
        return queryset, None
    return newest.bounded_if_rare(queryset, window)


def note_window(request: HttpRequest, start: datetime) -> None:
    """Keep on ``request`` that its list was read among the jobs created since ``start``."""
    request.django_jobs_window_start = start  # type: ignore[attr-defined]


def window_of(request: HttpRequest) -> datetime | None:
    """The start of the window ``request``'s list was read in (``note_window``), or None."""
    return getattr(request, "django_jobs_window_start", None)
