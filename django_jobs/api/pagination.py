"""Keyset pagination of jobs, newest first, that stays correct while jobs are added.

A cursor names the last job a page showed by (created_at, id), so the next page is "jobs
older than that one", whatever was inserted at the top meanwhile: no job is skipped or
repeated, unlike an offset. A ``previous`` cursor pages the other way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

from django_jobs.api.constraints import CURSOR, EARLIEST, LATEST, matches
from django_jobs.api.errors import ApiError
from django_jobs.core.outcomes import micros, moment, stored

if TYPE_CHECKING:
    from django_jobs.models import Job

OLDER, NEWER = "o", "n"
MAX_PK = 2**63 - 1  # the largest BigAutoField value


@dataclass(frozen=True)
class Cursor:
    direction: str  # OLDER: jobs after this one in the list; NEWER: jobs before it
    created_at: datetime
    pk: int

    def encode(self) -> str:
        return f"{self.direction}{micros(self.created_at)}.{self.pk}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The position ``text`` names; one beyond the dates or keys a job can have is clamped
        to the nearest one, which pages the same."""
        if not matches(CURSOR, text):
            raise ApiError.bad_request("cursor", "is not a cursor this API gave out")
        us, pk = text[1:].split(".")
        try:
            when = moment(int(us))  # naive in the default time zone under USE_TZ = False
        except OverflowError:
            when = stored(EARLIEST if us.startswith("-") else LATEST)
        return cls(text[0], when, min(int(pk), MAX_PK))


@dataclass
class Page:
    items: list
    next: Cursor | None
    previous: Cursor | None


def paginate(jobs: QuerySet, cursor: Cursor | None, limit: int) -> Page:
    """One page of ``jobs`` ordered by created_at then id, both descending."""
    if cursor is None or cursor.direction == OLDER:
        if cursor is not None:
            # The plain bound on created_at is implied by the pair after it, but only it is a
            # range an index scan starts from: PostgreSQL reads the (created_at, pk) pair as a
            # filter on every row between the list's newest job and the cursor.
            jobs = jobs.filter(Q(created_at__lte=cursor.created_at),
                               Q(created_at__lt=cursor.created_at)
                               | Q(created_at=cursor.created_at, pk__lt=cursor.pk))
        rows = list(jobs.order_by("-created_at", "-pk")[: limit + 1])
        items, more = rows[:limit], len(rows) > limit
        return Page(
            items,
            next=_at(OLDER, items[-1]) if more else None,
            previous=_at(NEWER, items[0]) if cursor is not None and items else None,
        )
    jobs = jobs.filter(Q(created_at__gte=cursor.created_at),
                       Q(created_at__gt=cursor.created_at)
                       | Q(created_at=cursor.created_at, pk__gt=cursor.pk))
    rows = list(jobs.order_by("created_at", "pk")[: limit + 1])
    more = len(rows) > limit
    items = list(reversed(rows[:limit]))
    return Page(
        items,
        next=_at(OLDER, items[-1]) if items else None,
        previous=_at(NEWER, items[0]) if more else None,
    )


def _at(direction: str, job: Job) -> Cursor:
    return Cursor(direction, job.created_at, job.pk)
