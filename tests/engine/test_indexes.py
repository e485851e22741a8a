"""The jobs table's list indexes serve the lists they are for (PostgreSQL plans)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction

from django_jobs.engine import engine_for
from django_jobs.models.jobs import LISTED_BY_STATUS, Job

pytestmark = pytest.mark.django_db


def plan_of(queryset) -> str:
    """The plan PostgreSQL picks when it may not read the table in full."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        return queryset.explain()


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("index plans are checked on PostgreSQL")


@pytest.mark.parametrize("status", LISTED_BY_STATUS)
def test_a_list_of_a_listed_state_reads_the_status_index(postgres, status):
    newest = Job.objects.filter(status=status).order_by("-created_at")[:50]
    assert "django_jobs_status_idx" in plan_of(newest)


@pytest.mark.parametrize("status", ["completed", "processing"])
def test_processing_and_completed_rows_are_not_in_the_status_index(postgres, status):
    """Their lists take another index: the status index cannot answer for them."""
    newest = Job.objects.filter(status=status).order_by("-created_at")[:50]
    plan = plan_of(newest)
    assert "django_jobs_status_idx" not in plan
    assert "django_jobs_created_idx" in plan or "django_jobs_lease_idx" in plan


def test_the_status_index_leaves_out_exactly_processing_and_completed():
    all_states = {value for value, _ in Job.Status.choices}
    assert all_states - set(LISTED_BY_STATUS) == {"processing", "completed"}


def generic_plan(sql: str, params) -> str:
    """The plan a statement prepared once gets when PostgreSQL plans it for any values, as
    it does for a worker's prepared finish after a few runs."""
    import re

    from psycopg import ClientCursor

    numbered = iter(range(1, 1000))
    prepared = re.sub(r"%s", lambda _: f"${next(numbered)}", sql)
    raw = connection.connection
    with ClientCursor(raw) as cur:
        cur.execute("SET plan_cache_mode = force_generic_plan")
        cur.execute("SET enable_seqscan = off")  # a test table is too small to need an index
        cur.execute(f"PREPARE generic_probe AS {prepared}")
        try:
            placeholders = ", ".join(["%s"] * len(params))
            cur.execute(f"EXPLAIN (COSTS OFF) EXECUTE generic_probe({placeholders})", params)
            return "\n".join(row[0] for row in cur.fetchall())
        finally:
            cur.execute("DEALLOCATE generic_probe")
            cur.execute("RESET plan_cache_mode")
            cur.execute("RESET enable_seqscan")


def test_the_finish_finds_its_batch_by_primary_key_not_through_every_processing_row(postgres):
    """The lease index holds every worker's processing rows. The finish used to read them
    all through it to find its own batch; it must go by primary key."""
    from django.utils import timezone

    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.engine.postgres import engine as postgres
    from django_jobs.engine.postgres import statements as sql

    Job.enqueue_many("noop", [{}] * 40)
    batches = [Job.objects.claim(worker_id=f"w{n}", limit=10, lease_seconds=30)
               for n in range(4)]
    now = timezone.now()
    outcomes = [AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)
                for job in batches[0]]
    fields = [engine_for(Job.objects.db).transition(outcome, now) for outcome in outcomes]
    plan = generic_plan(sql.finish_sql(Job), postgres.finish_params(outcomes, fields, now))
    assert "django_jobs_lease_idx" not in plan
    assert "django_jobs_job_pkey" in plan


def test_rescue_reads_the_lease_index(postgres):
    from django.utils import timezone

    assert "django_jobs_lease_idx" in plan_of(Job.objects.stale(timezone.now()))


@pytest.mark.parametrize("status", [None, "dead"], ids=["all", "by status"])
@pytest.mark.parametrize("direction", ["next", "previous"])
def test_an_api_cursor_page_starts_its_index_scan_at_the_cursor(postgres, status, direction):
    """Read as a filter alone, the (created_at, id) pair makes the scan walk every row from
    the list's end to the cursor: 160 ms for a cursor half way down a million rows."""
    from urllib.parse import parse_qs, urlsplit

    from django.utils import timezone

    from tests.api_support import Api, make_token, page_queries

    now = timezone.now()
    Job.objects.bulk_create(Job(type="echo", status="dead", created_at=now - timedelta(seconds=n))
                            for n in range(30))
    api = Api(make_token("read"))
    params = {"limit": 5, **({"status": status} if status else {})}
    second = api.get("/api/jobs", **params, cursor=parse_qs(urlsplit(
        api.get("/api/jobs", **params).json()["next"]).query)["cursor"][0])
    cursor = parse_qs(urlsplit(second.json()[direction]).query)["cursor"][0]
    [(sql, values)] = page_queries(lambda: api.get("/api/jobs", **params, cursor=cursor))
    with transaction.atomic(), connection.cursor() as db:
        db.execute("SET LOCAL enable_seqscan = off")
        db.execute(f"EXPLAIN {sql}", values)
        plan = "\n".join(row[0] for row in db.fetchall())
    [condition] = [line for line in plan.splitlines() if "Index Cond" in line]
    assert "created_at" in condition, plan
