"""The shelf a write stores for a job it finishes: its prune day (``core/shelves.py``), or the
kept shelf where the database has no partition for that day yet (``clamp``, with the last
day of the database's ``HistoryPartitions``; without partitions the prune day as it is)."""

from __future__ import annotations

from datetime import date, datetime

from django_jobs.core.database_parts import parts
from django_jobs.core.shelves import clamp, prune_day


def shelf_for(status: str, finished_at: datetime, using: str) -> date:
    """The shelf of a job of ``status`` finished at ``finished_at``, as ``using`` can hold it."""
    return clamp(prune_day(status, finished_at), parts(using).partitions.last_day)
