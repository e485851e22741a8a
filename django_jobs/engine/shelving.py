"""The shelf a write stores for a job it finishes: its prune day (``core/shelves.py``), or the
kept shelf where the database has no partition for that day yet (PostgreSQL's partitioned
table, ``engine/postgres/partitions.py``; elsewhere the prune day as it is)."""

from __future__ import annotations

from datetime import date, datetime

from django_jobs.core.shelves import prune_day
from django_jobs.engine.postgres.partitions import clamp


def shelf_for(status: str, finished_at: datetime, using: str) -> date:
    """The shelf of a job of ``status`` finished at ``finished_at``, as ``using`` can hold it."""
    return clamp(prune_day(status, finished_at), using)
