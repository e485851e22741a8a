"""GET /metrics/jobs: counts by status (exact up to a cap, then estimated and said so), the
engine's counts of finished attempts per type, queue age, a window, Prometheus text."""

import json
import math
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_jobs.api import metrics
from django_jobs.api.metrics import prometheus_text
from django_jobs.core.outcomes import micros
from django_jobs.models import Job, JobAttempt, JobStat
from django_jobs.models.stats import HOUR, MINUTE, WAIT_BOUNDS
from tests.api_support import run_ready

pytestmark = pytest.mark.django_db(transaction=True)  # jobs are run by run_job


# The scopes of the ``api`` client's token (tests/faces/conftest.py).
API_SCOPES = ("read",)


def attempt_us(attempt: JobAttempt) -> int:
    return micros(attempt.finished_at) - micros(attempt.started_at)


@pytest.fixture
def history():
    """2 completed echo jobs, 1 failed (to be retried), 1 dead, 1 canceled before it ran,
    1 pending due a minute ago, 1 processing; run through the worker's write path, which
    counts the finished attempts (JobStat)."""
    now = timezone.now()
    Job.enqueue("echo")
    Job.enqueue("echo")
    run_ready()
    Job.enqueue("always_fails")
    Job.enqueue("permanent")
    run_ready()
    Job.enqueue("noop").cancel()
    Job.enqueue("slow", queue="busy")
    Job.objects.claim(worker_id="w", limit=1, lease_seconds=30, queues=["busy"])
    waiting = Job.enqueue("noop")
    Job.objects.filter(pk=waiting.pk).update(run_at=now - timedelta(seconds=60))
    return now


def test_counts_by_status_and_totals(api, history):
    body = api.get("/api/metrics/jobs").json()
    assert body["total_jobs"] == 7
    assert {s: body[s] for s in ("pending", "processing", "completed", "failed", "dead",
                                 "canceled")} == {
        "pending": 1, "processing": 1, "completed": 2, "failed": 1, "dead": 1, "canceled": 1}
    assert body["estimated"] == []  # all below the cap: exact


def test_counts_above_the_cap_are_the_planners_estimate_and_say_so(api, history, monkeypatch):
    from django.db import connection

    monkeypatch.setattr(metrics, "COUNT_CAP", 1)  # two completed jobs are above it
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE django_jobs_job")
    body = api.get("/api/metrics/jobs").json()
    text = api.get("/api/metrics/jobs", format="prometheus").content.decode()
    if connection.vendor == "sqlite":  # no planner estimate: counted exactly
        assert (body["completed"], body["estimated"]) == (2, [])
        assert 'django_jobs_jobs_estimated{status="completed"} 0' in text
        return
    assert body["estimated"] == ["completed", "total_jobs"]
    assert body["completed"] >= 2  # past the cap, never below what was counted
    assert (body["dead"], body["failed"]) == (1, 1)  # at the cap: still exact
    assert 'django_jobs_jobs_estimated{status="completed"} 1' in text
    assert 'django_jobs_jobs_estimated{status="dead"} 0' in text


def test_a_status_the_planner_expects_many_of_is_its_estimate_uncounted(api, history,
                                                                        monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's estimates after ANALYZE are the table's exact frequencies")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")
        # On the partitioned table (migration 0028) the planner expects at least one row of
        # each partition: every estimate is the table's frequency plus one per other partition.
        cursor.execute("SELECT count(*) FROM pg_partition_tree('django_jobs_job') WHERE isleaf")
        others = max(int(cursor.fetchone()[0]) - 1, 0)
    monkeypatch.setattr(metrics, "COUNT_CAP", 1)
    monkeypatch.setattr(metrics, "ESTIMATE_FROM", 2 + others)  # the two completed jobs
    with CaptureQueriesContext(connection) as captured:
        body = api.get("/api/metrics/jobs").json()
    assert body["estimated"] == ["completed", "total_jobs"]
    assert (body["completed"] - others, body["dead"], body["failed"]) == (2, 1, 1)
    reads = [q["sql"] for q in captured.captured_queries if '"django_jobs_job"' in q["sql"]]
    plans = [sql for sql in reads if sql.startswith("EXPLAIN")]
    assert len(plans) == 1  # one plan for every status
    assert not [sql for sql in reads if "'completed'" in sql and sql not in plans]
    assert [sql for sql in reads if "'dead'" in sql and sql not in plans]  # counted


def test_the_mean_times_are_the_engines_counts_of_completed_attempts(api, history):
    body = api.get("/api/metrics/jobs").json()
    completed = JobStat.objects.filter(span=HOUR, outcome="completed").aggregate(
        n=Sum("count"), run=Sum("run_sum_us"), wait=Sum("wait_sum_us"))
    assert completed["n"] == 2
    assert body["avg_processing_time_ms"] == round(completed["run"] / 2 / 1000, 3)
    assert body["avg_time_to_complete_ms"] == round(
        (completed["run"] + completed["wait"]) / 2 / 1000, 3)
    attempts = JobAttempt.objects.filter(job__type="echo", outcome="completed")
    assert completed["run"] == sum(attempt_us(a) for a in attempts)


def test_job_types_carry_outcomes_mean_time_and_error_rate(api, history):
    types = {t["type"]: t for t in api.get("/api/metrics/jobs").json()["job_types"]}
    echoes = JobAttempt.objects.filter(job__type="echo", outcome="completed")
    echo = {k: v for k, v in types["echo"].items() if not k.endswith("_seconds")}
    assert echo == {"type": "echo", "count": 2, "completed": 2, "failed": 0, "dead": 0,
                    "canceled": 0, "error_rate": 0.0, "feature_write_failures": 0,
                    "avg_time": round(sum(attempt_us(a) for a in echoes) / 2 / 1000, 3)}
    assert (types["always_fails"]["failed"], types["always_fails"]["error_rate"]) == (1, 1.0)
    assert types["always_fails"]["avg_time"] is None
    assert (types["permanent"]["dead"], types["permanent"]["error_rate"]) == (1, 1.0)
    assert "noop" not in types  # canceled before any attempt: nothing finished
    assert "slow" not in types  # still processing


def test_per_type_figures_equal_the_attempts_on_a_small_table(api):
    for n in range(4):
        Job.enqueue("echo", {"n": n})
        Job.enqueue("always_fails", {"n": n})
    Job.enqueue("permanent")
    run_ready(limit=20)
    types = {t["type"]: t for t in api.get("/api/metrics/jobs").json()["job_types"]}
    for type_name in ("echo", "always_fails", "permanent"):
        attempts = JobAttempt.objects.filter(job__type=type_name)
        for outcome in ("completed", "failed", "dead", "canceled"):
            assert types[type_name][outcome] == attempts.filter(outcome=outcome).count()
        assert types[type_name]["count"] == attempts.count()


def test_the_oldest_ready_job_age_counts_from_when_it_became_due(api, history):
    age = api.get("/api/metrics/jobs").json()["oldest_ready_age_seconds"]
    assert 60 <= age < 3600


def test_the_oldest_ready_job_is_found_whatever_its_priority(api):
    """Each priority's earliest due job is probed: the oldest here has the lowest priority,
    and a job of the highest is not due yet."""
    now = timezone.now()
    for priority, minutes in ((10, 1), (0, 5), (-10, 30), (10, -60), (0, 2)):
        Job.enqueue("noop", priority=priority, run_at=now - timedelta(minutes=minutes))
    age = api.get("/api/metrics/jobs").json()["oldest_ready_age_seconds"]
    assert 30 * 60 <= age < 31 * 60


def test_the_oldest_ready_age_is_null_when_nothing_waits(api):
    Job.enqueue("noop", delay=3600)
    assert api.get("/api/metrics/jobs").json()["oldest_ready_age_seconds"] is None


def test_a_window_keeps_jobs_submitted_and_attempts_finished_within_it(api, history):
    Job.objects.filter(type="permanent").update(created_at=history - timedelta(days=2))
    # The permanent job's attempt as if it had finished three hours ago.
    for span, start in ((MINUTE, history.replace(second=0, microsecond=0)),
                        (HOUR, history.replace(minute=0, second=0, microsecond=0))):
        JobStat.objects.filter(type="permanent", span=span).update(
            bucket=start - timedelta(hours=3))
    everything = api.get("/api/metrics/jobs").json()
    day = api.get("/api/metrics/jobs", window="1d").json()
    hour = api.get("/api/metrics/jobs", window="1h").json()
    assert (everything["dead"], day["dead"]) == (1, 0)
    assert day["total_jobs"] == 6
    assert "permanent" in {t["type"] for t in everything["job_types"]}
    assert "permanent" in {t["type"] for t in day["job_types"]}  # finished within the day
    assert "permanent" not in {t["type"] for t in hour["job_types"]}
    assert "echo" in {t["type"] for t in hour["job_types"]}
    assert day["window_seconds"] == 86400
    assert api.get("/api/metrics/jobs", window="3600").json()["window_seconds"] == 3600


def test_prometheus_format_has_the_same_figures(api, history):
    body = api.get("/api/metrics/jobs").json()
    response = api.get("/api/metrics/jobs", format="prometheus")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    lines = response.content.decode().splitlines()
    samples = dict(line.rsplit(" ", 1) for line in lines if not line.startswith("#"))
    assert samples['django_jobs_jobs{status="completed"}'] == "2"
    assert samples['django_jobs_jobs{status="canceled"}'] == "1"
    assert samples['django_jobs_jobs_estimated{status="completed"}'] == "0"
    assert float(samples["django_jobs_avg_processing_seconds"]) == pytest.approx(
        body["avg_processing_time_ms"] / 1000)
    assert float(samples["django_jobs_avg_time_to_complete_seconds"]) == pytest.approx(
        body["avg_time_to_complete_ms"] / 1000)
    assert samples['django_jobs_type_jobs{type="echo"}'] == "2"
    assert samples['django_jobs_type_finished{type="permanent",outcome="dead"}'] == "1"
    assert float(samples['django_jobs_type_error_ratio{type="always_fails"}']) == 1.0
    assert 'django_jobs_type_avg_processing_seconds{type="always_fails"}' not in samples
    assert "NaN" not in response.content.decode()
    for name in {line.split()[2] for line in lines if line.startswith("# TYPE")}:
        assert f"# HELP {name} " in response.content.decode()


def test_prometheus_label_values_are_escaped():
    empty = {"buckets": [["+Inf", 0]], "sum": 0.0, "count": 0}
    data = {"job_types": [{"type": 'a"b\\c', "count": 1, "avg_time": None, "error_rate": 0.5,
                           "run_seconds": empty, "wait_seconds": empty}],
            "total_jobs": 1, "avg_processing_time_ms": None, "avg_time_to_complete_ms": None,
            "oldest_ready_age_seconds": None, "estimated": [],
            **dict.fromkeys(Job.Status.values, 0)}
    assert 'django_jobs_type_jobs{type="a\\"b\\\\c"} 1' in prometheus_text(data)


def _families(api, **params):
    text = api.get("/api/metrics/jobs", format="prometheus", **params).content.decode()
    return text, {f.name: f for f in text_string_to_metric_families(text)}


def test_the_whole_prometheus_output_parses_with_the_official_parser(api, history):
    text, families = _families(api)
    assert families["django_jobs_jobs"].type == "gauge"
    for family in families.values():
        for sample in family.samples:
            assert not math.isnan(sample.value), sample
    for line in text.splitlines():
        if not line.startswith("#"):
            value = line.rsplit(" ", 1)[1]
            assert len(value.split(".")[-1]) <= 6 or "e" in value, line  # no float noise



def test_run_and_wait_time_histograms_per_type(api, history):
    _, families = _families(api)
    run = families["django_jobs_type_run_seconds"]
    assert run.type == "histogram"
    echo = {(s.name, s.labels.get("le")): s.value for s in run.samples
            if s.labels["type"] == "echo"}
    attempts = JobAttempt.objects.filter(job__type="echo", outcome="completed")
    assert echo[("django_jobs_type_run_seconds_count", None)] == 2
    assert echo[("django_jobs_type_run_seconds_sum", None)] == pytest.approx(
        sum(attempt_us(a) for a in attempts) / 1e6)
    # The engine keeps the sum and count of run times, not their spread: one bucket.
    assert [le for _, le in echo if le] == ["+Inf"]
    assert echo[("django_jobs_type_run_seconds_bucket", "+Inf")] == 2
    wait = families["django_jobs_type_wait_seconds"]
    assert wait.type == "histogram"
    waits = {(s.name, s.labels.get("le")): s.value for s in wait.samples
             if s.labels["type"] == "echo"}
    assert waits[("django_jobs_type_wait_seconds_count", None)] == 2
    assert waits[("django_jobs_type_wait_seconds_bucket", "+Inf")] == 2
    assert len([le for _, le in waits if le]) == len(WAIT_BOUNDS) + 1


def test_the_wait_histogram_counts_from_run_at_to_the_start(api):
    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now() - timedelta(seconds=40))
    run_ready()
    body = api.get("/api/metrics/jobs").json()
    wait = next(t for t in body["job_types"] if t["type"] == "echo")["wait_seconds"]
    assert wait["count"] == 1
    assert 40 <= wait["sum"] < 60
    buckets = dict((str(le), n) for le, n in wait["buckets"])
    assert (buckets["30.0"], buckets["60.0"], buckets["+Inf"]) == (0, 1, 1)


def test_prometheus_values_are_rounded_to_the_microsecond():
    data = {"job_types": [], "total_jobs": 0, "avg_processing_time_ms": 6210.6840000000005,
            "avg_time_to_complete_ms": None, "oldest_ready_age_seconds": 0.30000000000000004,
            "estimated": [], **dict.fromkeys(Job.Status.values, 0)}
    text = prometheus_text(data)
    assert "django_jobs_avg_processing_seconds 6.210684\n" in text
    assert "django_jobs_oldest_ready_age_seconds 0.3\n" in text
    assert "\ndjango_jobs_avg_time_to_complete_seconds " not in text  # absent, not NaN
    assert "NaN" not in text


def test_the_json_form_has_no_nan_and_the_same_rounding(api, history):
    response = api.get("/api/metrics/jobs")
    body = json.loads(response.content, parse_constant=lambda name: pytest.fail(name))
    echo = next(t for t in body["job_types"] if t["type"] == "echo")
    attempts = JobAttempt.objects.filter(job__type="echo", outcome="completed")
    assert echo["run_seconds"]["sum"] == round(sum(attempt_us(a) for a in attempts) / 1e6, 6)
    assert echo["run_seconds"]["buckets"][-1] == ["+Inf", 2]


def test_a_window_longer_than_ten_years_counts_as_ten_years(api):
    response = api.get("/api/metrics/jobs", window="99999999999d")
    assert response.status_code == 200
    assert response.json()["window_seconds"] == 3650 * 86400


@pytest.mark.parametrize(("params", "field"), [
    ({"window": "0"}, "window"),
    ({"window": "-5m"}, "window"),
    ({"window": "1w"}, "window"),
    ({"window": "1" * 21}, "window"),  # longer than 20 characters
    ({"format": "xml"}, "format"),
    ({"since": "2024-01-01T00:00:00Z"}, "since"),
])
def test_bad_metrics_parameters_are_400(api, params, field):
    response = api.get("/api/metrics/jobs", **params)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_off_postgresql_the_horizon_is_null_and_has_no_gauge(api):
    from django.db import connection

    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL has an xmin horizon (tests/worker/test_horizon.py)")
    assert api.get("/api/metrics/jobs").json()["horizon"] is None
    text, families = _families(api)
    assert "django_jobs_horizon_age_seconds" not in families
    assert "horizon" not in text
