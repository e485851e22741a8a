"""Job metrics: counts by status, timings per type, queue age, the xmin horizon; as JSON or
Prometheus text. No figure reads more than a bounded part of the jobs table.

Counts by status (and ``total_jobs``, their sum) are exact up to ``COUNT_CAP`` jobs of a
status, each counted through the index that holds that status (the status index, the lease
index for processing; completed jobs, most of the table, among the newest); above the cap
the figure is the planner's estimate (``models/counts.py``), and its name is listed in
``estimated`` (``total_jobs`` too when any part of it is). One plan gives the estimates of
all the statuses; a status the planner expects ``ESTIMATE_FROM`` jobs of or more (ten times
the cap) is not counted at all, its figure is the estimate. SQLite counts exactly. A
``window`` limits the counts to jobs submitted within it.

Finished figures (the mean times, and per type: attempts by outcome, mean run time, error rate,
run and wait histograms, and ``feature_write_failures``: the job ends that a feature's write
could not follow, ``engine/feature_writes.py``) come from the counts the engine keeps as it
writes outcomes (``JobStat``, ``engine/finish_counts.py``), never from the jobs table: the minute
rows for a window under two hours, the hour rows otherwise, so a window is rounded out to the minute
or the hour it starts in; without a window, every hour the stats keep (``STATS_RETENTION``, two
days by default). The run histogram has the one ``+Inf`` bucket (the engine keeps the sum and
count of run times, not their spread); the wait histogram has the engine's bounds
(``WAIT_BOUNDS``), from due (``run_at``) to the start of the attempt.

The age of the oldest ready job always looks at the whole queue (a stuck job must not hide
behind a window), by a few probes of the ready index (``models/ready.py``).

The horizon (PostgreSQL) is read from the database's catalogs at each request
(``engine/postgres/horizon_holders.py``, a cheap read): how long and how many transactions vacuum is
held back, and by what. It is not windowed; elsewhere it is null and has no gauge.

The counts read the replica the site names in ``READ_REPLICA`` (``engine/read_replica.py``), if any;
the clock they are judged by and the horizon are the jobs' database's (the primary's). When
the replica fails or falls behind, they are read from the primary, and ``read_replica`` (the
``django_jobs_read_replica_fallback`` gauge) says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import Sum

from django_jobs.core import clock
from django_jobs.core.database_parts import parts
from django_jobs.core.states import Outcome
from django_jobs.engine import read_replica
from django_jobs.engine.finish_counts import FEATURE_FAILED
from django_jobs.models import Job, JobStat
from django_jobs.models.counts import COUNT_CAP, ESTIMATE_FROM, capped_counts
from django_jobs.models.ready import oldest_ready
from django_jobs.models.schema import jobs_database
from django_jobs.models.stats import HOUR, MINUTE, WAIT_BOUNDS, WAIT_FIELDS

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue

__all__ = ["COUNT_CAP", "OUTCOMES", "STATUSES", "job_metrics", "prometheus_text"]

STATUSES = list(Job.Status.values)
# The outcomes the engine counts (JobStat), and those that count against the error rate.
OUTCOMES = (Outcome.COMPLETED, Outcome.FAILED, Outcome.DEAD, Outcome.CANCELED)
ERRORED = (Outcome.FAILED, Outcome.DEAD)
# A window shorter than this is read from the minute rows, a longer one from the hour rows.
MINUTE_ROWS_BELOW = timedelta(hours=2)


def _ms(us: int, n: int) -> float | None:
    return None if not n else round(us / n / 1000, 3)


def _seconds(us: int) -> float:
    return round(us / 1_000_000, 6)


def job_metrics(window: timedelta | None = None, now: datetime | None = None,
                using: str | None = None) -> JSONObject:
    """The figures, counted on ``using``; by default on ``read_replica.read_database()``, and on the
    jobs' database if the replica fails on the way."""
    if using is not None:
        return _counted(window, now, using)
    return read_replica.read(read_replica.read_database(),
                             lambda alias: _counted(window, now, alias))


def _counted(window: timedelta | None, now: datetime | None, using: str) -> JSONObject:
    now = now or clock.now(jobs_database())
    jobs = Job.objects.using(using)
    if window is not None:
        jobs = jobs.filter(created_at__gte=now - window)
    counts = capped_counts({status: jobs.in_states(status) for status in STATUSES},
                           COUNT_CAP, ESTIMATE_FROM)
    estimated = sorted(status for status, count in counts.items() if count.estimated)
    if estimated:
        estimated.append("total_jobs")
    oldest = oldest_ready(Job.objects.using(using), now)
    types = _finished(window, now, using)
    completed = [t["sums"][Outcome.COMPLETED] for t in types.values()]
    done = sum(c["count"] for c in completed)
    return {
        "total_jobs": sum(count.rows for count in counts.values()),
        **{status: count.rows for status, count in counts.items()},
        "estimated": estimated,
        "avg_processing_time_ms": _ms(sum(c["run_sum_us"] for c in completed), done),
        "avg_time_to_complete_ms": _ms(
            sum(c["run_sum_us"] + c["wait_sum_us"] for c in completed), done),
        "oldest_ready_age_seconds": (
            None if oldest is None else round((now - oldest).total_seconds(), 3)
        ),
        "job_types": [_job_type(name, types[name]["sums"]) for name in sorted(types)],
        "feature_write_failures": sum(t["sums"][FEATURE_FAILED]["count"]
                                      for t in types.values()),
        "horizon": _horizon(jobs_database()),
        "read_replica": _read_replica(using),
        "window_seconds": None if window is None else window.total_seconds(),
        "generated_at": now,
    }


def _finished(window: timedelta | None, now: datetime, using: str) -> dict[str, dict]:
    """Per type and outcome, the engine's sums over the window (``JobStat``)."""
    rows = JobStat.objects.using(using)
    if window is not None and window < MINUTE_ROWS_BELOW:
        start = (now - window).replace(second=0, microsecond=0)
        rows = rows.filter(span=MINUTE, bucket__gte=start)
    elif window is not None:
        start = (now - window).replace(minute=0, second=0, microsecond=0)
        rows = rows.filter(span=HOUR, bucket__gte=start)
    else:
        rows = rows.filter(span=HOUR)
    fields = ("count", "wait_sum_us", "run_sum_us", *WAIT_FIELDS)
    grouped = rows.order_by().values("type", "outcome").annotate(
        **{f"s_{name}": Sum(name) for name in fields})
    types: dict[str, dict] = {}
    for row in grouped:
        values: dict[str, object] = dict(row)
        entry = types.setdefault(str(values["type"]), {"sums": {
            outcome: dict.fromkeys(fields, 0) for outcome in (*OUTCOMES, FEATURE_FAILED)}})
        if values["outcome"] in entry["sums"]:
            entry["sums"][values["outcome"]] = {
                name: int(values[f"s_{name}"] or 0) for name in fields}  # type: ignore[call-overload]
    return types


def _job_type(name: str, sums: dict[str, dict[str, int]]) -> JSONObject:
    completed = sums[Outcome.COMPLETED]
    judged = sum(sums[o]["count"] for o in (Outcome.COMPLETED, *ERRORED))
    errored = sum(sums[o]["count"] for o in ERRORED)
    cumulative = 0
    buckets: list[list[JSONValue]] = []
    for bound, field in zip(WAIT_BOUNDS, WAIT_FIELDS, strict=False):
        cumulative += completed[field]
        buckets.append([bound, cumulative])
    buckets.append(["+Inf", completed["count"]])
    return {
        "type": name,
        "count": sum(sums[o]["count"] for o in OUTCOMES),
        **{str(o): sums[o]["count"] for o in OUTCOMES},
        "feature_write_failures": sums[FEATURE_FAILED]["count"],
        "avg_time": _ms(completed["run_sum_us"], completed["count"]),
        "error_rate": round(errored / judged, 4) if judged else None,
        "run_seconds": {"buckets": [["+Inf", completed["count"]]],
                        "sum": _seconds(completed["run_sum_us"]), "count": completed["count"]},
        "wait_seconds": {"buckets": buckets, "sum": _seconds(completed["wait_sum_us"]),
                         "count": completed["count"]},
    }


def _horizon(using: str) -> JSONObject | None:
    """The horizon's figures, with a line naming what holds it; None off PostgreSQL."""
    read = parts(using).horizon.read()
    if read is None:
        return None
    return {"age_seconds": read.age_seconds, "xid_age": read.xid_age,
            "holder": read.holder.describe() if read.holder is not None else None}


def _read_replica(using: str) -> JSONObject | None:
    """Which database the figures were read from, when the site names a replica; None when it
    names none."""
    replica = read_replica.replica_alias()
    if replica is None:
        return None
    fallback = read_replica.fallback() if using != replica else None
    return {"alias": replica, "read_from": "replica" if using == replica else "primary",
            "reason": fallback.reason if fallback is not None else None,
            "lag_seconds": read_replica.last_lag()}


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

    family("jobs", f"Jobs by status: exact up to {COUNT_CAP}, above it the planner's "
           "estimate (see django_jobs_jobs_estimated).",
           [(f'{{status="{s}"}}', data[s]) for s in STATUSES])
    family("jobs_estimated", "1 where django_jobs_jobs is the planner's estimate, 0 where it "
           "is exact.", [(f'{{status="{s}"}}', int(s in data["estimated"])) for s in STATUSES])
    family("avg_processing_seconds", "Mean duration of completed attempts.",
           [("", seconds(data["avg_processing_time_ms"]))])
    family("avg_time_to_complete_seconds", "Mean time from due (run_at) to completion.",
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
    replica = data.get("read_replica")
    if replica is not None:
        family("read_replica_fallback",
               "1 where these figures were read from the jobs' database because READ_REPLICA "
               "failed or fell behind, 0 where they were read from the replica.",
               [("", int(replica["read_from"] == "primary"))])
        family("read_replica_lag_seconds",
               "How far READ_REPLICA was behind the primary when last read (PostgreSQL).",
               [("", replica["lag_seconds"])])
    types = data["job_types"]
    family("type_jobs", "Attempts finished, by type (the engine's counts).",
           [(f'{{type="{_label(t["type"])}"}}', t["count"]) for t in types])
    family("type_finished", "Attempts finished, by type and outcome (the engine's counts).",
           [(f'{{type="{_label(t["type"])}",outcome="{o}"}}', t.get(str(o), 0))
            for t in types for o in OUTCOMES])
    family("feature_write_failures", "Job ends a feature's write could not follow (a group's "
           "callback, a follow-up, a completion callback refused; the end stood), by type.",
           [(f'{{type="{_label(t["type"])}"}}', t.get("feature_write_failures", 0)) for t in types])
    family("type_avg_processing_seconds", "Mean duration of completed attempts, by type.",
           [(f'{{type="{_label(t["type"])}"}}', seconds(t["avg_time"])) for t in types])
    family("type_error_ratio", "Share of finished attempts that raised, by type.",
           [(f'{{type="{_label(t["type"])}"}}', t["error_rate"]) for t in types])
    histogram("type_run_seconds", "Duration of completed attempts, by type.", "run_seconds")
    histogram("type_wait_seconds",
              "Time from due (run_at) to the start of the completing attempt, by type.",
              "wait_seconds")
    return "\n".join(lines) + "\n"
