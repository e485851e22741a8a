"""Keyset pagination of jobs, newest first, that stays correct while jobs are added.

A cursor names the last job a page showed by (created_at, id), so the next page is "jobs
older than that one", whatever was inserted at the top meanwhile: no job is skipped or
repeated, unlike an offset. A ``previous`` cursor pages the other way.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from .errors import ApiError

OLDER, NEWER = "o", "n"


@dataclass(frozen=True)
class Cursor:
    direction: str  # OLDER: jobs after this one in the list; NEWER: jobs before it
    created_at: datetime
    pk: int

    def encode(self) -> str:
        text = f"{self.direction}|{self.created_at.isoformat()}|{self.pk}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            direction, created, pk = raw.split("|")
            when = parse_datetime(created)
            if direction not in (OLDER, NEWER) or when is None or when.tzinfo is None:
                raise ValueError(raw)
            return cls(direction, when.astimezone(UTC), int(pk))
        except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError):
            raise ApiError.bad_request("cursor", "is not a cursor this API gave out") from None


@dataclass
class Page:
    items: list
    next: Cursor | None
    previous: Cursor | None


def paginate(jobs: QuerySet, cursor: Cursor | None, limit: int) -> Page:
    """One page of ``jobs`` ordered by created_at then id, both descending."""
    if cursor is None or cursor.direction == OLDER:
        if cursor is not None:
            jobs = jobs.filter(Q(created_at__lt=cursor.created_at)
                               | Q(created_at=cursor.created_at, pk__lt=cursor.pk))
        rows = list(jobs.order_by("-created_at", "-pk")[: limit + 1])
        items, more = rows[:limit], len(rows) > limit
        return Page(
            items,
            next=_at(OLDER, items[-1]) if more else None,
            previous=_at(NEWER, items[0]) if cursor is not None and items else None,
        )
    jobs = jobs.filter(Q(created_at__gt=cursor.created_at)
                       | Q(created_at=cursor.created_at, pk__gt=cursor.pk))
    rows = list(jobs.order_by("created_at", "pk")[: limit + 1])
    more = len(rows) > limit
    items = list(reversed(rows[:limit]))
    return Page(
        items,
        next=_at(OLDER, items[-1]) if items else None,
        previous=_at(NEWER, items[0]) if more else None,
    )


def _at(direction: str, job) -> Cursor:  # type: ignore[no-untyped-def]
    return Cursor(direction, job.created_at, job.pk)
