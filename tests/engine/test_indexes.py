"""The jobs table's list indexes serve the lists they are for (PostgreSQL plans)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobs.engine import engine_for
from django_jobs.models.jobs import LISTED_BY_STATUS, Job
from tests.helpers import seq_scans_of_rows

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
    # On PostgreSQL's partitioned table the open partition's completed jobs have an index of
    # their own (migration 0029); every day partition reads its created index.
    assert any(index in plan for index in (
        "django_jobs_created_idx", "created_at_idx", "django_jobs_lease_idx"))


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
    Job.enqueue_many("noop", [{}] * 2000)  # the open rows of a table in use, analyzed
    now = timezone.now()
    outcomes = [AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)
                for job in batches[0]]
    fields = [engine_for(Job.objects.db).transition(outcome, now) for outcome in outcomes]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")
    plan = generic_plan(sql.finish_sql(Job), postgres.finish_params(outcomes, fields, now))
    assert "django_jobs_lease_idx" not in plan
    assert "django_jobs_job_pkey" in plan, plan


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
    # one scan per partition of PostgreSQL's partitioned table (migration 0028)
    conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert conditions and all("created_at" in condition for condition in conditions), plan


@pytest.fixture
def failed_lately(postgres):
    """Mostly finished jobs, the failed and dead ones long ago but for a few, analyzed."""
    from tests.helpers import analyzed_jobs

    now = timezone.now()
    old = now - timedelta(days=2)
    kinds = ("completed",) * 6 + ("failed", "dead")
    Job.objects.bulk_create(Job(type="echo", status=kinds[n % 8],
                                created_at=old - timedelta(seconds=n), updated_at=old)
                            for n in range(4_000))
    Job.objects.bulk_create(Job(type="echo", status="failed",
                                created_at=now - timedelta(minutes=n)) for n in range(5))
    with analyzed_jobs():
        yield


@pytest.mark.parametrize("status", ["failed", "dead", "failed,dead"])
def test_a_list_since_a_time_reads_the_updated_index(failed_lately, status):
    """``GET /jobs?status=failed&since=...``: the jobs updated since, not every failed job's
    entry of the status index until a page matches."""
    from django.http import QueryDict

    from django_jobs.api.views_jobs import filtered

    query = QueryDict(mutable=True)
    query.update({"status": status, "since": (timezone.now() - timedelta(hours=1)).isoformat()})
    jobs, _ = filtered(query)
    plan = jobs.order_by("-created_at", "-pk")[:51].explain()
    assert "django_jobs_updated_idx" in plan, plan
    assert not seq_scans_of_rows(plan), plan


@pytest.mark.parametrize("status", ["failed", "dead"])
def test_a_list_without_since_does_not_read_the_updated_index(failed_lately, status):
    """The updated index holds the same failed and dead jobs but neither the status as a key
    nor the list's order: a list by status reads the status or the created index (the planner's
    choice on this small table), never it."""
    newest = Job.objects.filter(status=status).order_by("-created_at", "-pk")[:51]
    for plan in (newest.explain(), plan_of(newest)):
        assert "django_jobs_updated_idx" not in plan, plan
        assert "django_jobs_status_idx" in plan or "django_jobs_created_idx" in plan, plan


def test_the_updated_index_is_built_where_partial_indexes_exist():
    """PostgreSQL and SQLite have it; MariaDB and MySQL, which would build it in full (an entry
    moved by every claim and finish), do not (migration 0025): they index a virtual column of
    the failed and dead jobs' ``updated_at`` instead (migration 0026)."""
    with connection.cursor() as cursor:
        names = connection.introspection.get_constraints(cursor, "django_jobs_job")
    mysql = connection.vendor == "mysql"
    assert ("django_jobs_updated_idx" in names) == (not mysql)
    assert ("django_jobs_updated_my" in names) == mysql
