"""The overview's charts: jobs finished per minute over the last hour and per hour over the
last day, by outcome, and the wait from ``run_at`` to the start (p50 and p95) in each, for all
queues and types or one of each.

Every figure comes from the counts the engine keeps as it writes outcomes (``JobStat``,
``engine/finish_counts.py``), never from the jobs table: a grouped query over the last hour's minute
rows and one over the last day's hour rows, through the index on (span, bucket). The
percentiles are read from the wait histogram, interpolated within a bucket as Prometheus's
``histogram_quantile`` does; a percentile that falls in the last bucket (past the last bound)
is shown as that bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet, Sum

from django_jobs.admin import svg
from django_jobs.core import clock
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import Outcome
from django_jobs.models import JobStat
from django_jobs.models.stats import HOUR as HOUR_SPAN
from django_jobs.models.stats import MINUTE as MINUTE_SPAN
from django_jobs.models.stats import WAIT_BOUNDS, WAIT_FIELDS

# What a bar is made of, bottom up, and each part's name in the legend.
OUTCOMES = (Outcome.COMPLETED, Outcome.FAILED, Outcome.DEAD, Outcome.CANCELED)
LABELS = {Outcome.COMPLETED: "completed", Outcome.FAILED: "failed (to be retried)",
          Outcome.DEAD: "dead", Outcome.CANCELED: "canceled"}
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
MINUTE = timedelta(minutes=1)


@dataclass
class Bin:
    """One minute or one hour: jobs finished by outcome, and the wait histogram."""

    start: datetime
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    waits: list[int] = field(default_factory=lambda: [0] * len(WAIT_FIELDS))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: str, count: int, waits: list[int]) -> None:
        if outcome in self.counts:
            self.counts[outcome] += count
        self.waits = [a + b for a, b in zip(self.waits, waits, strict=True)]

    def wait(self, q: float) -> float | None:
        return quantile(self.waits, q)


def quantile(counts: list[int], q: float) -> float | None:
    """The ``q`` quantile (seconds) of a histogram of ``WAIT_BOUNDS``; None when it is empty.
    Linear within the bucket it falls in; the bound itself for the last, unbounded bucket."""
    total = sum(counts)
    if not total:
        return None
    rank = q * total
    seen = 0
    for i, count in enumerate(counts):
        if count and seen + count >= rank:
            if i == len(WAIT_BOUNDS):
                return WAIT_BOUNDS[-1]
            low = WAIT_BOUNDS[i - 1] if i else 0.0
            high = WAIT_BOUNDS[i]
            return min(high, low + (high - low) * max(rank - seen, 0) / count)
        seen += count
    return WAIT_BOUNDS[-1]


def name_filter(value: str | None) -> str | None:
    """A ``?queue=`` or ``?type=`` value: None for all, else the name (trimmed)."""
    value = (value or "").strip()
    return value or None


def read(now: datetime, queue: str | None = None, type: str | None = None,
         using: str | None = None) -> tuple[list[Bin], list[Bin]]:
    """The last hour's 60 minutes and the last day's 24 hours, the current ones last, read
    from ``using`` (the jobs' database if None)."""
    this_minute = now.replace(second=0, microsecond=0)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    minutes = [Bin(this_minute - MINUTE * i) for i in range(59, -1, -1)]
    hours = [Bin(this_hour - HOUR * i) for i in range(23, -1, -1)]
    rows = JobStat.objects.using(using or JobStat.objects.db).all()
    if queue is not None:
        rows = rows.filter(queue=queue)
    if type is not None:
        rows = rows.filter(type=type)
    _fill(minutes, rows.filter(span=MINUTE_SPAN))
    _fill(hours, rows.filter(span=HOUR_SPAN))
    return minutes, hours


def _fill(bins: list[Bin], rows: QuerySet[JobStat]) -> None:
    """Add to each bin the counts and the waits' sums of the rows that start in it."""
    by_start = {b.start: b for b in bins}
    grouped = (
        rows.filter(bucket__gte=bins[0].start).values("bucket", "outcome")
        .annotate(n=Sum("count"), **{f"s_{name}": Sum(name) for name in WAIT_FIELDS})
        .order_by())
    for typed in grouped:
        row: dict[str, Any] = dict(typed)  # the histogram's sums are named in a loop
        found = by_start.get(row["bucket"])
        if found is not None:
            found.add(row["outcome"], row["n"], [row[f"s_{name}"] or 0 for name in WAIT_FIELDS])


def choices(since: datetime, using: str | None = None) -> tuple[list[str], list[str]]:
    """The queues and types counted since ``since``: the filter's choices (from the hour
    rows of the counts' table)."""
    rows = JobStat.objects.using(using or JobStat.objects.db).filter(
        span=HOUR_SPAN, bucket__gte=since).order_by()
    queues = sorted(set(rows.values_list("queue", flat=True).distinct()))
    types = sorted(set(rows.values_list("type", flat=True).distinct()))
    return queues, types


def context(params: Any, now: datetime | None = None, using: str | None = None
            ) -> dict[str, Any]:
    """The overview's charts, filtered by the request's ``queue`` and ``type``, read from
    ``using`` (a replica: ``READ_REPLICA``); the time is the jobs' database's."""
    now = now or clock.now(JobStat.objects.db)
    queue, type = name_filter(params.get("queue")), name_filter(params.get("type"))
    minutes, hours = read(now, queue, type, using)
    queues, types = choices(now - DAY, using)
    return {
        "charts": {
            "queue": queue or "", "type": type or "",
            "queues": queues, "types": types,
            "hour_finished": svg.bars(
                minutes, "jobs finished per minute, last hour", tick="%H:%M", every=10),
            "hour_wait": svg.lines(
                minutes, "wait from run_at to start per minute, last hour", tick="%H:%M",
                every=10),
            "day_finished": svg.bars(
                hours, "jobs finished per hour, last 24 hours", tick="%H:00", every=4),
            "day_wait": svg.lines(
                hours, "wait from run_at to start per hour, last 24 hours", tick="%H:00",
                every=4),
            "hour_total": {o: sum(b.counts[o] for b in minutes) for o in OUTCOMES},
            "day_total": {o: sum(b.counts[o] for b in hours) for o in OUTCOMES},
            "labels": LABELS,
            "enabled": bool(jobs_settings.STATS),
        },
    }
