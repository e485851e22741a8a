"""The numbers staff look at first: counts by status, the oldest ready job, the workers, and
on PostgreSQL what holds back vacuum when it has for longer than ``HORIZON_WARNING_SECONDS``.

No page reads more than a bounded part of the jobs table, whatever its size. Each open state
(and the completed jobs of the last day) is read on its own, through the index that holds it
(the status index; processing through the lease index; the day's completed through the
created index): one query of all open states at once would match no partial index and read
the whole table. A state with at most ``SAMPLE`` jobs is counted exactly, per queue and type.
A state with more is counted from its newest ``SAMPLE`` jobs: its total is the planner's
estimate (``models/counts.py``), shared out among queues and types as among those jobs, and
every figure of it is shown as "about" (``Cell``). A row's oldest ready job is shown where
its ready states were counted exactly; the oldest ready job of all is always exact, read by a
few probes of the ready index (``oldest_ready``).

The list's strip counts dead, processing and ready jobs the same way: exact up to
``COUNT_CAP``, then the planner's estimate, shown as "about".

The counts read ``using``, the alias the page reads (a replica when the site names one,
``engine/read_replica.py``); the time they are judged by and what holds back vacuum are the
primary's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db import connections
from django.db.models import Count, Min, Q

from django_jobs.admin.paginator import EXACT_BELOW_COST, EXACT_BELOW_ROWS
from django_jobs.core import clock
from django_jobs.core.database_parts import parts
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import (
    CANCELED,
    COMPLETED,
    DEAD,
    FAILED,
    PENDING,
    PROCESSING,
    READY_STATES,
    WAITING,
)
from django_jobs.models import Job, QueueState, Worker
from django_jobs.models.counts import COUNT_CAP, capped_counts, planner_estimate
from django_jobs.models.managers import JobQuerySet
from django_jobs.models.ready import oldest_ready
from django_jobs.models.schema import jobs_database

OPEN_STATES = (WAITING, PENDING, PROCESSING, FAILED, DEAD, CANCELED)
# The open states the partial status index holds (``LISTED_BY_STATUS``): all but processing.
INDEXED_OPEN_STATES = (WAITING, PENDING, FAILED, DEAD, CANCELED)
SCHEDULED = "scheduled"  # a column, not a state: pending jobs due later
# Waiting jobs wait for the jobs they depend on; pending ones are due now, scheduled later.
COLUMNS = (WAITING, PENDING, SCHEDULED, PROCESSING, FAILED, DEAD, CANCELED, COMPLETED)
RECENT = timedelta(hours=24)
# Jobs of one state the overview reads for its per-queue and per-type counts.
SAMPLE = 2_000


def compact(n: int) -> str:
    """``1.2M``, ``35K``, ``940``: an estimate's figure, to the precision it has."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{round(n / 1000)}K"
    return str(n)


@dataclass(frozen=True)
class Cell:
    """One figure of a table: exact, or estimated and shown as "about"."""

    n: int
    estimated: bool = False

    def __str__(self) -> str:
        return f"about {compact(self.n)}" if self.estimated else str(self.n)


@dataclass
class Row:
    """Counts for one queue or one type."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))
    oldest_ready: datetime | None = None
    paused: bool = False
    estimated: set[str] = field(default_factory=set)  # columns whose counts are estimates

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

    def cells(self) -> list[Cell]:
        return [Cell(self.counts[c], c in self.estimated) for c in COLUMNS]


def status_query(status: str) -> str:
    """The job list's query string that filters on ``status``, for the tiles' links."""
    return urlencode({"status__exact": status})




def summary(now: datetime | None = None, using: str | None = None) -> dict[str, Any]:
    """Dead, processing and ready counts and the oldest ready job, for the list's strip.

    Three small counts rather than one query: each is answered from an index alone (the
    status index, the partial lease index, the partial ready index), while one query with
    three filtered counts would read every open row of the table. One plan estimates all
    three (``capped_counts``); one expected past ``ESTIMATE_FROM`` jobs is that estimate,
    the others are counted up to ``COUNT_CAP`` jobs, then estimated (``*_estimated``).
    """
    jobs = Job.objects.using(using or jobs_database())
    now = now or clock.now(jobs_database())
    counts = capped_counts({
        DEAD: jobs.filter(status=DEAD),
        PROCESSING: jobs.in_states(PROCESSING),
        "ready": jobs.in_states(*READY_STATES).filter(run_at__lte=now),
    }, COUNT_CAP)
    dead, processing, ready = counts[DEAD], counts[PROCESSING], counts["ready"]
    oldest = oldest_ready(jobs, now)
    return {
        "dead": dead.rows,
        "dead_estimated": dead.estimated,
        "processing": processing.rows,
        "processing_estimated": processing.estimated,
        "dead_query": status_query(DEAD),
        "processing_query": status_query(PROCESSING),
        "ready": ready.rows,
        "ready_estimated": ready.estimated,
        "oldest": oldest,
        "oldest_age": now - oldest if oldest else None,
    }


def _state_rows(jobs: JobQuerySet, status: str,
                now: datetime) -> tuple[list[dict[str, Any]], bool]:
    """Per queue and type, the jobs of ``status`` (``n``), those due (``due``) and the oldest
    due; and whether these are estimates from the newest ``SAMPLE`` jobs."""
    of_state = jobs.in_states(status)
    if status == COMPLETED:
        of_state = of_state.filter(created_at__gte=now - RECENT)
    # The newest SAMPLE + 1 jobs of the state, in the order of the index that holds it,
    # grouped in one statement (a derived table: MariaDB takes no LIMIT in ``IN (...)``).
    # PostgreSQL's status index leaves processing out: its lease index holds them. MariaDB's
    # status index holds every state (its lease index, not partial, starts with every other
    # job's NULL).
    postgres = connections[jobs.db].vendor == "postgresql"
    order = ("leased_until",) if status == PROCESSING and postgres else ("-created_at",)
    newest = of_state.order_by(*order).values("queue", "type", "run_at")[: SAMPLE + 1]
    inner, params = newest.query.sql_with_params()
    connection = connections[jobs.db]
    # The inner SQL is the ORM's own, its values bound as parameters.
    sql = (f"SELECT newest.queue, newest.type, COUNT(*), "  # noqa: S608
           f"SUM(CASE WHEN newest.run_at <= %s THEN 1 ELSE 0 END) "
           f"FROM ({inner}) newest GROUP BY newest.queue, newest.type")
    with connection.cursor() as cursor:
        cursor.execute(sql, [connection.ops.adapt_datetimefield_value(now), *params])
        sample = [{"queue": q, "type": t, "n": int(n), "due": int(due or 0), "oldest": None}
                  for q, t, n, due in cursor.fetchall()]
    read = sum(g["n"] for g in sample)
    if read <= SAMPLE:  # all of them: counted exactly, with the oldest due per row
        grouped = of_state.values("queue", "type").annotate(
            n=Count("pk"), due=Count("pk", filter=Q(run_at__lte=now)),
            oldest=Min("run_at", filter=Q(run_at__lte=now))).order_by()
        return [dict(g) for g in grouped], False
    estimate = planner_estimate(of_state)
    total = max(estimate.rows if estimate is not None else of_state.count(), read)
    for g in sample:
        g["n"], g["due"] = round(g["n"] * total / read), round(g["due"] * total / read)
    return sample, True


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

    estimated: set[str] = set()
    for status in (*INDEXED_OPEN_STATES, PROCESSING, COMPLETED):
        groups, is_estimate = _state_rows(jobs, status, now)
        if is_estimate:
            estimated.update((PENDING, SCHEDULED) if status == PENDING else (status,))
        for g in groups:
            for table, name in ((queues, g["queue"]), (types, g["type"])):
                if status == COMPLETED:
                    row(table, name).counts[COMPLETED] += g["n"]
                else:
                    row(table, name).add(status, g["n"], g["due"], g["oldest"])
    row(queues, jobs_settings.DEFAULT_QUEUE)
    for state in QueueState.objects.using(using):
        row(queues, state.name).paused = state.paused
    for table in (queues, types):
        for r in table.values():
            r.estimated = set(estimated)
    oldest = oldest_ready(jobs, now)
    return {
        "columns": COLUMNS,
        "queues": sorted(queues.values(), key=lambda r: r.name),
        "types": sorted(types.values(), key=lambda r: r.name),
        "oldest_ready": oldest,
        "oldest_ready_age": now - oldest if oldest else None,
        "estimated": sorted(estimated),
        "sample": f"{SAMPLE:,}",
        "dead": sum(r.counts[DEAD] for r in queues.values()),
        "dead_estimated": DEAD in estimated,
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
    read = parts(jobs_database()).horizon.read()
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

