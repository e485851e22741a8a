"""Job metrics: counts by status, timings per type, queue age; as JSON or Prometheus text.

A ``window`` limits every figure to jobs submitted within it, except the age of the oldest
ready job, which always looks at the whole queue (a stuck job must not hide behind a window).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Min, Q, QuerySet

from .. import clock
from ..models import Job, JobAttempt
from ..states import Outcome

STATUSES = list(Job.Status.values)
# Attempt outcomes that count against the error rate.
ERRORED = (Outcome.FAILED, Outcome.DEAD, Outcome.LOST)
COUNTED = (*ERRORED, Outcome.COMPLETED)  # canceled and released attempts are neither


def _duration(start: str, end: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(start), output_field=DurationField())


def _ms(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds() * 1000, 3)


def job_metrics(window: timedelta | None = None, now: datetime | None = None) -> dict[str, Any]:
    now = now or clock.now(Job.objects.db)
    jobs = Job.objects.all()
    attempts = JobAttempt.objects.filter(finished_at__isnull=False, outcome__in=COUNTED)
    if window is not None:
        jobs = jobs.filter(created_at__gte=now - window)
        attempts = attempts.filter(job__created_at__gte=now - window)
    by_status = dict(jobs.order_by().values_list("status").annotate(n=Count("pk")))
    completed = attempts.filter(outcome=Outcome.COMPLETED)
    oldest = Job.objects.ready(now=now).aggregate(oldest=Min("run_at"))["oldest"]
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
        "window_seconds": None if window is None else window.total_seconds(),
        "generated_at": now,
    }


def _job_types(jobs: QuerySet[Job], attempts: QuerySet[JobAttempt]) -> list[dict[str, Any]]:
    counts = dict(jobs.order_by().values_list("type").annotate(n=Count("pk")))
    rows = (
        attempts.order_by().values("job__type").annotate(
            finished=Count("pk"),
            errored=Count("pk", filter=Q(outcome__in=ERRORED)),
            avg=Avg(_duration("started_at", "finished_at"), filter=Q(outcome=Outcome.COMPLETED)),
        )
    )
    stats = {row["job__type"]: row for row in rows}
    result = []
    for type_name in sorted(counts):
        row = stats.get(type_name)
        result.append({
            "type": type_name,
            "count": counts[type_name],
            "avg_time": _ms(row["avg"]) if row else None,
            "error_rate": round(row["errored"] / row["finished"], 4) if row else None,
        })
    return result


# Prometheus text exposition format, version 0.0.4.

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float | int | None) -> str:
    if value is None:
        return "NaN"
    return repr(float(value)) if isinstance(value, float) else str(value)


def prometheus_text(data: dict[str, Any]) -> str:
    """The figures of ``job_metrics`` as gauges; times in seconds, as Prometheus prefers."""
    lines: list[str] = []

    def family(name: str, help_text: str, samples: list[tuple[str, Any]]) -> None:
        lines.append(f"# HELP django_jobs_{name} {help_text}")
        lines.append(f"# TYPE django_jobs_{name} gauge")
        for labels, value in samples:
            lines.append(f"django_jobs_{name}{labels} {_number(value)}")

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
    types = data["job_types"]
    family("type_jobs", "Jobs by type.",
           [(f'{{type="{_label(t["type"])}"}}', t["count"]) for t in types])
    family("type_avg_processing_seconds", "Mean duration of completed attempts, by type.",
           [(f'{{type="{_label(t["type"])}"}}', seconds(t["avg_time"])) for t in types])
    family("type_error_ratio", "Share of finished attempts that raised, by type.",
           [(f'{{type="{_label(t["type"])}"}}', t["error_rate"]) for t in types])
    return "\n".join(lines) + "\n"
