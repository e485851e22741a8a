"""The numbers staff look at first: counts by status, the oldest ready job, the workers, and
on PostgreSQL what holds back vacuum when it has for longer than ``HORIZON_WARNING_SECONDS``.

Every query here reads through an index. Completed jobs are the bulk of a busy table, so they
are counted only for the last day (the ``created_at`` index serves that range); their total is
counted exactly while that is cheap and estimated once it is not, by the rule the job list's
paginator follows. Everything else is counted exactly: the open jobs the status index holds
(pending, failed, dead, canceled) through it, and the processing ones, which it leaves out,
through the lease index, which holds only them. One count of all open states at once would
match neither partial index and read the whole table.

The counts read ``using``, the alias the page reads (a replica when the site names one,
``models/reads.py``); the time they are judged by and what holds back vacuum are the
primary's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Min, Q

from django_jobs.admin.paginator import EXACT_BELOW_COST, EXACT_BELOW_ROWS, planner_estimate
from django_jobs.core import clock
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import (
    CANCELED,
    COMPLETED,
    DEAD,
    FAILED,
    PENDING,
    PROCESSING,
    READY_STATES,
)
from django_jobs.engine.postgres import horizon
from django_jobs.models import Job, QueueState, Worker
from django_jobs.models.schema import jobs_database

OPEN_STATES = (PENDING, PROCESSING, FAILED, DEAD, CANCELED)
# The open states the partial status index holds (``LISTED_BY_STATUS``): all but processing.
INDEXED_OPEN_STATES = (PENDING, FAILED, DEAD, CANCELED)
SCHEDULED = "scheduled"  # a column, not a state: pending jobs due later
COLUMNS = (PENDING, SCHEDULED, PROCESSING, FAILED, DEAD, CANCELED, COMPLETED)
RECENT = timedelta(hours=24)


@dataclass
class Row:
    """Counts for one queue or one type."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))
    oldest_ready: datetime | None = None
    paused: bool = False

    def add(self, status: str, n: int, due: int, oldest: datetime | None) -> None:
        if status == PENDING:
            self.counts[PENDING] += due
            self.counts[SCHEDULED] += n - due
        else:
            self.counts[status] += n
        if status in READY_STATES and oldest and (
            self.oldest_ready is None or oldest < self.oldest_ready
        ):
            self.oldest_ready = oldest

    def cells(self) -> list[int]:
        return [self.counts[c] for c in COLUMNS]


def status_query(status: str) -> str:
    """The job list's query string that filters on ``status``, for the tiles' links."""
    return urlencode({"status__exact": status})


def summary(now: datetime | None = None, using: str | None = None) -> dict[str, Any]:
    """Dead, processing and ready counts and the oldest ready job, for the list's strip.

    Three small queries rather than one: each is answered from an index alone (the status
    index, the partial lease index, the partial ready index), while one query with three
    filtered counts would read every open row of the table.
    """
    jobs = Job.objects.using(using or jobs_database())
    now = now or clock.now(jobs_database())
    ready = jobs.filter(status__in=READY_STATES, run_at__lte=now).aggregate(
        n=Count("pk"), oldest=Min("run_at")
    )
    return {
        "dead": jobs.filter(status=DEAD).count(),
        "processing": jobs.filter(status=PROCESSING).count(),
        "dead_query": status_query(DEAD),
        "processing_query": status_query(PROCESSING),
        "ready": ready["n"],
        "oldest": ready["oldest"],
        "oldest_age": now - ready["oldest"] if ready["oldest"] else None,
    }


def overview(now: datetime | None = None, using: str | None = None) -> dict[str, Any]:
    """Counts per status for every queue and every type, the oldest ready job, the workers."""
    using = using or jobs_database()
    jobs = Job.objects.using(using)
    now = now or clock.now(jobs_database())
    queues: dict[str, Row] = {}
    types: dict[str, Row] = {}

    def row(table: dict[str, Row], name: str) -> Row:
        if name not in table:
            table[name] = Row(name)
        return table[name]

    grouped = (
        jobs.filter(status__in=INDEXED_OPEN_STATES)
        .values("queue", "type", "status")
        .annotate(
            n=Count("pk"),
            due=Count("pk", filter=Q(run_at__lte=now)),
            oldest=Min("run_at", filter=Q(run_at__lte=now)),
        )
        .order_by()
    )
    for g in grouped:
        for table, name in ((queues, g["queue"]), (types, g["type"])):
            row(table, name).add(g["status"], g["n"], g["due"], g["oldest"])
    processing = (
        jobs.filter(status=PROCESSING).values("queue", "type").annotate(n=Count("pk")).order_by()
    )
    for p in processing:
        for table, name in ((queues, p["queue"]), (types, p["type"])):
            row(table, name).add(PROCESSING, p["n"], 0, None)
    recent = (
        jobs.filter(status=COMPLETED, created_at__gte=now - RECENT)
        .values("queue", "type")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for done in recent:
        row(queues, done["queue"]).counts[COMPLETED] += done["n"]
        row(types, done["type"]).counts[COMPLETED] += done["n"]
    row(queues, jobs_settings.DEFAULT_QUEUE)
    for state in QueueState.objects.using(using):
        row(queues, state.name).paused = state.paused
    oldest = min((r.oldest_ready for r in queues.values() if r.oldest_ready), default=None)
    return {
        "columns": COLUMNS,
        "queues": sorted(queues.values(), key=lambda r: r.name),
        "types": sorted(types.values(), key=lambda r: r.name),
        "oldest_ready": oldest,
        "oldest_ready_age": now - oldest if oldest else None,
        "dead": sum(r.counts[DEAD] for r in queues.values()),
        "dead_query": status_query(DEAD),
        "completed_total": completed_total(using),
        "workers": workers(now, using),
        "horizon": held_back(),
    }


def held_back() -> dict[str, Any] | None:
    """What holds PostgreSQL's xmin horizon, when it has for longer than
    ``HORIZON_WARNING_SECONDS`` (the oldest snapshot or prepared transaction); else None."""
    bound = jobs_settings.HORIZON_WARNING_SECONDS
    if not bound:
        return None
    read = horizon.read(jobs_database())
    if read is None or not read.past(bound) or read.holder is None:
        return None
    return {"holder": read.holder.describe(), "age_seconds": read.age_seconds, "bound": bound}


@dataclass(frozen=True)
class Total:
    rows: int
    estimated: bool  # the planner's figure, shown as "about"


def completed_total(using: str | None = None) -> Total:
    """All completed jobs: counted exactly unless the planner (PostgreSQL's or MariaDB's)
    expects many rows or a costly count (the paginator's thresholds), then its estimate. A
    small table is always counted: its statistics may be far behind (a fresh table's planner
    may expect 1 row)."""
    completed = Job.objects.using(using or jobs_database()).filter(status=COMPLETED)
    estimate = planner_estimate(completed)
    if estimate is not None and estimate.too_large(EXACT_BELOW_ROWS, EXACT_BELOW_COST):
        return Total(estimate.rows, estimated=True)
    return Total(completed.count(), estimated=False)


def workers(now: datetime, using: str | None = None) -> list[dict[str, Any]]:
    """Live workers, oldest first, each flagged late if its heartbeat is overdue."""
    late_after = timedelta(seconds=float(jobs_settings.HEARTBEAT_SECONDS) * 3)
    rows = []
    for w in Worker.objects.using(using or jobs_database()).order_by("started_at"):
        rows.append({
            "worker": w,
            "heartbeat_age": now - w.last_heartbeat,
            "late": now - w.last_heartbeat > late_after,
            "queues": ", ".join(w.queues or []) or "all",
        })
    return rows

