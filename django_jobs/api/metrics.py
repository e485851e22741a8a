"""Job metrics: counts by status, timings per type, queue age, the xmin horizon; as JSON or
Prometheus text.

A ``window`` limits every figure to jobs submitted within it, except the age of the oldest
ready job, which always looks at the whole queue (a stuck job must not hide behind a window).

The histograms of run time and wait time per type are counted in the same two grouped
queries as the per-type counts and means (one conditional count per bucket), so they cost no
scan of their own: a window bounds them as it bounds every other figure.

The horizon (PostgreSQL) is read from the database's catalogs at each request
(``engine/postgres/horizon.py``, a cheap read): how long and how many transactions vacuum is
held back, and by what. It is not windowed; elsewhere it is null and has no gauge.

The counts read the replica the site names in ``READ_REPLICA`` (``models/reads.py``), if any;
the clock they are judged by and the horizon are the jobs' database's (the primary's).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import (
    Avg,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    QuerySet,
    Sum,
)

from django_jobs.core import clock
from django_jobs.core.states import Outcome
from django_jobs.engine.postgres import horizon
from django_jobs.models import Job, JobAttempt
from django_jobs.models.reads import read_database
from django_jobs.models.schema import jobs_database

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue

STATUSES = list(Job.Status.values)
# Attempt outcomes that count against the error rate.
ERRORED = (Outcome.FAILED, Outcome.DEAD, Outcome.LOST)
COUNTED = (*ERRORED, Outcome.COMPLETED)  # canceled and released attempts are neither
# Upper bounds (seconds) of the histogram buckets, from a fast handler to an hour's wait.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
           900.0, 3600.0)


def _duration(start: str, end: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(start), output_field=DurationField())


def _ms(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds() * 1000, 3)


def _seconds(value: timedelta | None) -> float:
    """Seconds to the microsecond, without float noise; 0.0 for an empty sum."""
    return 0.0 if value is None else round(value.total_seconds(), 6)


def _bucket_counts(prefix: str, start: str, end: str, only: Q) -> dict[str, Count]:
    """One conditional count per bucket: rows of ``only`` with ``end - start <= le``."""
    return {
        f"{prefix}_le_{i}": Count(
            "pk", filter=only & Q(**{f"{end}__lte": F(start) + timedelta(seconds=le)}))
        for i, le in enumerate(BUCKETS)
    }


def _histogram(row: Mapping[str, JSONValue] | None, prefix: str) -> JSONObject:
    """``buckets`` as cumulative ``[le, count]`` pairs, ending with ``["+Inf", count]``."""
    count = row[f"{prefix}_count"] if row else 0
    buckets: list[list[JSONValue]] = [
        [le, row[f"{prefix}_le_{i}"] if row else 0] for i, le in enumerate(BUCKETS)]
    buckets.append(["+Inf", count])
    return {"buckets": buckets, "sum": _seconds(row[f"{prefix}_sum"] if row else None),
            "count": count}


def job_metrics(window: timedelta | None = None, now: datetime | None = None,
                using: str | None = None) -> JSONObject:
    """The figures, counted on ``using`` (``read_database()`` by default)."""
    using = using or read_database()
    now = now or clock.now(jobs_database())
    jobs = Job.objects.using(using)
    attempts = JobAttempt.objects.using(using).filter(finished_at__isnull=False,
                                                      outcome__in=COUNTED)
    if window is not None:
        jobs = jobs.filter(created_at__gte=now - window)
        attempts = attempts.filter(job__created_at__gte=now - window)
    by_status = dict(jobs.order_by().values_list("status").annotate(n=Count("pk")))
    completed = attempts.filter(outcome=Outcome.COMPLETED)
    oldest = Job.objects.using(using).ready(now=now).aggregate(oldest=Min("run_at"))["oldest"]
    return {
        "total_jobs": sum(by_status.values()),
        **{status: by_status.get(status, 0) for status in STATUSES},
        "avg_processing_time_ms": _ms(
            completed.aggregate(v=Avg(_duration("started_at", "finished_at")))["v"]
        ),
        "avg_time_to_complete_ms": _ms(
            jobs.filter(status=Job.Status.COMPLETED, finished_at__isnull=False)
            .aggregate(v=Avg(_duration("created_at", "finished_at")))["v"]
        ),
        "oldest_ready_age_seconds": (
            None if oldest is None else round((now - oldest).total_seconds(), 3)
        ),
        "job_types": _job_types(jobs, attempts),
        "horizon": _horizon(jobs_database()),
        "window_seconds": None if window is None else window.total_seconds(),
        "generated_at": now,
    }


def _horizon(using: str) -> JSONObject | None:
    """The horizon's figures, with a line naming what holds it; None off PostgreSQL."""
    read = horizon.read(using)
    if read is None:
        return None
    return {"age_seconds": read.age_seconds, "xid_age": read.xid_age,
            "holder": read.holder.describe() if read.holder is not None else None}


def _job_types(jobs: QuerySet[Job], attempts: QuerySet[JobAttempt]) -> list[JSONObject]:
    # Wait: from when the job was due (run_at) to when its completing attempt started; a
    # completed job keeps both, as the claim that started that attempt wrote them.
    waited = Q(status=Job.Status.COMPLETED, started_at__isnull=False)
    counts = {
        row["type"]: row for row in jobs.order_by().values("type").annotate(
            n=Count("pk"),
            wait_count=Count("pk", filter=waited),
            wait_sum=Sum(_duration("run_at", "started_at"), filter=waited),
            **_bucket_counts("wait", "run_at", "started_at", waited),
        )
    }
    completed = Q(outcome=Outcome.COMPLETED)
    rows = (
        attempts.order_by().values("job__type").annotate(
            finished=Count("pk"),
            errored=Count("pk", filter=Q(outcome__in=ERRORED)),
            avg=Avg(_duration("started_at", "finished_at"), filter=completed),
            run_count=Count("pk", filter=completed),
            run_sum=Sum(_duration("started_at", "finished_at"), filter=completed),
            **_bucket_counts("run", "started_at", "finished_at", completed),
        )
    )
    stats = {row["job__type"]: row for row in rows}
    result = []
    for type_name in sorted(counts):
        row = stats.get(type_name)
        result.append({
            "type": type_name,
            "count": counts[type_name]["n"],
            "avg_time": _ms(row["avg"]) if row else None,
            "error_rate": round(row["errored"] / row["finished"], 4) if row else None,
            "run_seconds": _histogram(row, "run"),
            "wait_seconds": _histogram(counts[type_name], "wait"),
        })
    return result


# Prometheus text exposition format, version 0.0.4.

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float | int) -> str:
    """The shortest form of the value to the microsecond: ``6.210684``, not float noise."""
    return repr(round(float(value), 6)) if isinstance(value, float) else str(value)


def prometheus_text(data: JSONObject) -> str:
    """The figures of ``job_metrics`` as gauges, and the per-type histograms; times in
    seconds, as Prometheus prefers. A figure with nothing behind it (``None``) has no sample,
    as Prometheus has absent data, never ``NaN``."""
    lines: list[str] = []

    def family(name: str, help_text: str, samples: list[tuple[str, JSONValue]]) -> None:
        lines.append(f"# HELP django_jobs_{name} {help_text}")
        lines.append(f"# TYPE django_jobs_{name} gauge")
        for labels, value in samples:
            if value is not None:
                lines.append(f"django_jobs_{name}{labels} {_number(value)}")

    def histogram(name: str, help_text: str, key: str) -> None:
        lines.append(f"# HELP django_jobs_{name} {help_text}")
        lines.append(f"# TYPE django_jobs_{name} histogram")
        for t in types:
            label = f'type="{_label(t["type"])}"'
            h = t[key]
            for le, count in h["buckets"]:
                bound = le if isinstance(le, str) else repr(float(le))
                lines.append(f'django_jobs_{name}_bucket{{{label},le="{bound}"}} {count}')
            lines.append(f"django_jobs_{name}_sum{{{label}}} {_number(float(h['sum']))}")
            lines.append(f"django_jobs_{name}_count{{{label}}} {h['count']}")

    def seconds(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000

    family("jobs", "Jobs by status.",
           [(f'{{status="{s}"}}', data[s]) for s in STATUSES])
    family("avg_processing_seconds", "Mean duration of completed attempts.",
           [("", seconds(data["avg_processing_time_ms"]))])
    family("avg_time_to_complete_seconds", "Mean time from submission to completion.",
           [("", seconds(data["avg_time_to_complete_ms"]))])
    family("oldest_ready_age_seconds", "How long the oldest ready job has been due.",
           [("", data["oldest_ready_age_seconds"] or 0.0)])
    held = data.get("horizon")
    if held is not None:
        family("horizon_age_seconds",
               "How long the oldest snapshot or prepared transaction has held back vacuum "
               "(PostgreSQL's xmin horizon; a replication slot counts only in transactions).",
               [("", float(held["age_seconds"]))])
        family("horizon_xid_age",
               "Transactions since the oldest xmin held by a snapshot, prepared transaction or "
               "replication slot.", [("", held["xid_age"])])
    types = data["job_types"]
    family("type_jobs", "Jobs by type.",
           [(f'{{type="{_label(t["type"])}"}}', t["count"]) for t in types])
    family("type_avg_processing_seconds", "Mean duration of completed attempts, by type.",
           [(f'{{type="{_label(t["type"])}"}}', seconds(t["avg_time"])) for t in types])
    family("type_error_ratio", "Share of finished attempts that raised, by type.",
           [(f'{{type="{_label(t["type"])}"}}', t["error_rate"]) for t in types])
    histogram("type_run_seconds", "Duration of completed attempts, by type.", "run_seconds")
    histogram("type_wait_seconds",
              "Time from due (run_at) to the start of the completing attempt, by type.",
              "wait_seconds")
    return "\n".join(lines) + "\n"
