"""GET /jobs on a table of mostly finished jobs: a type or queue the planner expects few jobs of
is looked for among the newest jobs only (PostgreSQL), as the admin's filters do, and the page
says so in ``searched_since``; ``since`` lifts the bound. MariaDB has an index for each filter,
SQLite tables are small: never bounded there. (The plan of ``since``: tests/engine/
test_indexes.py.)"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_jobs.models import Job, newest
from django_jobs.models.counts import planner_estimate, planner_estimates
from tests.helpers import analyzed_jobs

pytestmark = pytest.mark.django_db

API_SCOPES = ("read",)


def add(count: int, status: str, created: str, updated: str, job_type: str = "echo") -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                   run_at, attempt, max_attempts, crashes, created_at, updated_at, worker_id,
                   cancel_requested, callback_url, has_dependents)
               SELECT 'j-' || left(md5(random()::text || g::text), 20), %s, '{}', %s, 0,
                   (ARRAY['default', 'mail', 'media'])[g %% 3 + 1], now(), 1, 3, 0,
                   now() - %s::interval - g * interval '1 second',
                   now() - %s::interval - g * interval '1 second', '', false, '', false
               FROM generate_series(1, %s) AS g""",
            [job_type, status, created, updated, count],
        )


@pytest.fixture
def mostly_finished():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL plans; MariaDB serves these filters with full indexes")
    add(30_000, "completed", "2 days", "2 days")
    add(5_000, "failed", "2 days", "2 days")  # failed long ago: outside any recent since
    add(3_000, "dead", "2 days", "2 days")
    add(20, "failed", "1 minute", "1 minute")
    with analyzed_jobs():
        yield


def test_failed_jobs_since_an_hour_ago_are_all_listed(api, mostly_finished):
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    body = api.get("/api/jobs", status="failed", since=since, limit="100").json()
    assert len(body["results"]) == 20
    assert {job["status"] for job in body["results"]} == {"failed"}


def test_a_type_with_no_job_is_looked_for_among_the_newest_jobs(api, mostly_finished,
                                                                   monkeypatch):
    monkeypatch.setattr(newest, "NEWEST_WINDOW", 100)
    add(1, "dead", "3 days", "3 days", job_type="rare")  # older than the newest 100
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")
    rare = api.get("/api/jobs", type="rare").json()
    assert rare["results"] == []  # outside the window
    start = Job.objects.order_by("-created_at").values_list("created_at", flat=True)[99]
    assert rare["searched_since"] == start.isoformat().replace("+00:00", "Z")
    common = api.get("/api/jobs", type="echo").json()
    assert common["searched_since"] is None
    assert len(common["results"]) == 50
    queue = api.get("/api/jobs", queue="nowhere").json()
    assert queue["results"] == [] and queue["searched_since"] is not None


def test_since_lifts_the_bound_of_a_rare_type(api, mostly_finished, monkeypatch):
    monkeypatch.setattr(newest, "NEWEST_WINDOW", 100)
    add(1, "dead", "3 days", "3 days", job_type="rare")  # older than the newest 100
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")
    assert api.get("/api/jobs", type="rare").json()["results"] == []
    since = (timezone.now() - timedelta(days=4)).isoformat()
    found = api.get("/api/jobs", type="rare", since=since).json()
    assert [job["type"] for job in found["results"]] == ["rare"]
    assert found["searched_since"] is None


def test_a_list_of_every_database_says_it_is_complete(api):
    """Nothing is bounded on a table smaller than the window, whatever the database."""
    Job.objects.bulk_create(Job(type="echo", queue="mail") for _ in range(3))
    for params in ({}, {"type": "nowhere"}, {"queue": "mail"}, {"type": "echo"}):
        body = api.get("/api/jobs", **params).json()
        assert body["searched_since"] is None, params
    assert len(api.get("/api/jobs", queue="mail").json()["results"]) == 3


def test_one_plan_estimates_each_query_as_its_own_plan_does():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no planner estimate")
    now = timezone.now()
    Job.objects.bulk_create(
        Job(type="echo", status=("completed", "failed", "dead", "pending")[n % 4],
            created_at=now - timedelta(minutes=n)) for n in range(400))
    jobs = Job.objects.all()
    querysets = [jobs.filter(status=s) for s in ("completed", "failed", "dead", "pending")]
    querysets.append(jobs.filter(status="failed", created_at__gte=now - timedelta(hours=1)))
    estimates = planner_estimates(querysets)
    assert [e.rows for e in estimates] == [planner_estimate(q).rows for q in querysets]
