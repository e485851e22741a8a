"""The first page of the job list, newest first, read among the newest jobs when they fill it.

On PostgreSQL the jobs table is partitioned by prune day, and a list in ``created_at`` order is
a merge of every partition's ``created_at`` index: before the merge returns a row, each
partition's branch reads until its first match. A partition that holds no job of the list's
filter (a day of dead jobs for a list of completed ones, a day without the type asked for)
reads its whole day to say so: 38-47 ms of a page's statement at ten million jobs. So the first
page is read first among the jobs created since the ``window``-th newest
(``models/newest.py``), where each branch stops at that time. When that finds a full page, it
is the page: every job it leaves out was created before each one it found, so none of them
could come first. Otherwise, and for every other page, order or database, the page is read as
Django reads it (``tests/faces/admin/test_admin_first_page.py`` holds the two to the same
rows).
"""

from __future__ import annotations

from django.db import connections
from django.db.models import Model, QuerySet

from django_jobs.models.newest import DATE_FIELD, NEWEST_WINDOW, window_start


def newest_first(queryset: QuerySet[Model]) -> bool:
    """Whether ``queryset`` is ordered newest first (by ``created_at``, descending, first)."""
    order = list(queryset.query.order_by or queryset.query.get_meta().ordering or ())
    return bool(order) and order[0] == f"-{DATE_FIELD}"


def first_page(queryset: QuerySet[Model], per_page: int,
               window: int = NEWEST_WINDOW) -> list[Model] | None:
    """The first ``per_page`` rows of ``queryset`` (a job list ordered newest first), read
    among the newest ``window`` jobs on PostgreSQL; None where that is not how to read them
    (another database or order, a table smaller than the window) or they do not fill a page
    there."""
    if connections[queryset.db].vendor != "postgresql" or not newest_first(queryset):
        return None
    start = window_start(queryset.db, window)
    if start is None:
        return None
    found = list(queryset.filter(**{f"{DATE_FIELD}__gte": start})[:per_page])
    return found if len(found) == per_page else None
