"""PostgreSQL: the overview's counts and the list's strip read indexes, not the table, on a
table of mostly finished jobs (MariaDB's plans: test_mariadb_lists.py).

The partial status index holds every state but processing and completed: a count of the open
jobs that names processing in its ``status IN (...)`` matches no index's predicate and reads
the whole table. The control test shows the table below is large enough for the planner to
choose exactly that.
"""

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from django_jobs.admin.overview_figures import OPEN_STATES, overview, summary
from django_jobs.models import Job
from tests.helpers import analyzed_jobs, seq_scans_of_rows

pytestmark = pytest.mark.django_db

FINISHED = 30_000  # completed two days ago: out of every partial index and of the last day
OPEN = {"pending": 60, "failed": 20, "dead": 50, "canceled": 10, "processing": 30}


@pytest.fixture(autouse=True)
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL plans; MariaDB's are in test_mariadb_lists.py")


def add(count: int, status: str, age: str, prefix: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                   run_at, attempt, max_attempts, crashes, created_at, updated_at, worker_id,
                   cancel_requested, callback_url, has_dependents, leased_until)
               SELECT 'j-' || %s || lpad(to_hex(g), 16, '0'), 'echo', '{}', %s, 0,
                   (ARRAY['default', 'mail', 'media'])[g %% 3 + 1], now() - %s::interval, 1, 3,
                   0, now() - %s::interval, now(), '', false, '', false,
                   CASE WHEN %s = 'processing' THEN now() + interval '30 seconds' END
               FROM generate_series(1, %s) AS g""",
            [prefix, status, age, age, status, count],
        )


@pytest.fixture
def mostly_finished():
    add(FINISHED, "completed", "2 days", "old")
    add(100, "completed", "1 hour", "new")
    for status, count in OPEN.items():
        add(count, status, "1 minute", status[:4])
    with analyzed_jobs():
        yield


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def job_statements(page) -> list[str]:
    """The statements on the jobs table ``page()`` runs, but the planner's own (EXPLAIN)."""
    with CaptureQueriesContext(connection) as captured:
        page()
    return [q["sql"] for q in captured.captured_queries
            if '"django_jobs_job"' in q["sql"] and not q["sql"].startswith("EXPLAIN")]


def test_a_count_of_all_open_states_at_once_reads_the_whole_table(mostly_finished):
    """The control: the table is large enough that a query no index serves is a seq scan."""
    together = (Job.objects.filter(status__in=OPEN_STATES).values("queue", "type", "status")
                .annotate(n=Count("pk")).order_by())
    assert "Seq Scan on django_jobs_job" in together.explain()


def test_the_overview_reads_no_more_than_indexes_of_the_jobs_table(mostly_finished):
    statements = job_statements(overview)
    plans = [plan(sql) for sql in statements]
    for sql, found in zip(statements, plans, strict=True):
        assert not seq_scans_of_rows(found), f"{sql}\n{found}"
    named = "\n".join(plans)
    # the open states of the status index, processing, and the probes of the ready index for
    # the oldest ready job
    for index in ("django_jobs_status_idx", "django_jobs_lease_idx", "django_jobs_ready_any_idx"):
        assert index in named
    # the last day's completed ones: the created index, or on the open partition of the
    # partitioned table (where these jobs are) its index of completed jobs
    assert "django_jobs_created_idx" in named or "django_jobs_completed_open" in named


def test_above_the_sample_the_overview_reads_its_newest_jobs_through_indexes(
        mostly_finished, monkeypatch):
    from django_jobs.admin import overview_figures

    monkeypatch.setattr(overview_figures, "SAMPLE", 10)  # every state but canceled (10) holds more
    statements = job_statements(overview)
    for sql in statements:
        found = plan(sql)
        assert not seq_scans_of_rows(found), f"{sql}\n{found}"
    data = overview()
    assert set(data["estimated"]) == {"pending", "scheduled", "failed", "dead", "processing",
                                      "completed"}


def test_the_overview_counts_match_a_plain_count(mostly_finished):
    data = overview()
    counted = {status: sum(r.counts[status] for r in data["queues"])
               for status in ("pending", "scheduled", "failed", "dead", "canceled",
                              "processing", "completed")}
    assert counted == {"pending": OPEN["pending"], "scheduled": 0, "failed": OPEN["failed"],
                       "dead": OPEN["dead"], "canceled": OPEN["canceled"],
                       "processing": OPEN["processing"], "completed": 100}
    assert data["completed_total"].estimated  # 30,100 expected: the planner's figure


def test_the_list_strip_reads_no_more_than_indexes(mostly_finished):
    for sql in job_statements(summary):
        found = plan(sql)
        assert not seq_scans_of_rows(found), f"{sql}\n{found}"
