"""The jobs written since a time, as the API's ``GET /jobs?status=failed&since=`` lists them.

On PostgreSQL and SQLite the partial index ``django_jobs_updated_idx`` (``Job.Meta``) holds the
failed and dead jobs by ``updated_at``. MariaDB and MySQL have no partial index: there the
same rows are indexed through a virtual column, ``updated_at`` for a failed or dead job and NULL
for any other (``engine/mariadb/schema.py`` adds it), and a list of only those states adds a
condition on that column, which the planner can read from its index. The model does not know
the column: it is the database's alone, and nothing writes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from django.db import connections, models
from django.db.models.expressions import RawSQL

from django_jobs.models.jobs import UPDATED_SINCE

if TYPE_CHECKING:
    from collections.abc import Collection

    from django.db.models import QuerySet

_Jobs = TypeVar("_Jobs", bound="QuerySet")

# MariaDB and MySQL's virtual column of the failed and dead jobs' ``updated_at``.
ENDED_UPDATED_COLUMN = "ended_updated_at"


def updated_since(jobs: _Jobs, when: datetime, statuses: Collection[str] | None) -> _Jobs:
    """``jobs`` updated at ``when`` or later; ``statuses`` are the states the list is of (None:
    any), which on MariaDB and MySQL decide whether the virtual column's index serves it."""
    jobs = jobs.filter(updated_at__gte=when)
    connection = connections[jobs.db]
    if connection.vendor != "mysql" or not statuses or not set(statuses) <= set(UPDATED_SINCE):
        return jobs
    # Identifiers only, no value: the table's quoted name and the column's constant one.
    column = f"{connection.ops.quote_name(jobs.model._meta.db_table)}.{ENDED_UPDATED_COLUMN}"
    ended = RawSQL(column, (), output_field=models.DateTimeField())  # noqa: S611
    return jobs.alias(ended_updated=ended).filter(ended_updated__gte=when)
