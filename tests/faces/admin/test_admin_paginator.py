"""The list's paginator: exact counts when cheap, the planner's estimate when not
(PostgreSQL's or MariaDB's)."""

import pytest
from django.db import connection

from django_jobs.admin.paginator import EstimatedCountPaginator, planner_estimate
from django_jobs.models import Job
from tests.admin_helpers import make_job, staff
from tests.conftest import requires_postgres

pytestmark = pytest.mark.django_db


class TinyThresholds(EstimatedCountPaginator):
    """Thresholds scaled down so a test table of a few hundred rows counts as "huge"."""

    exact_below_rows = 100
    exact_below_cost = 1_000_000.0


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")


def test_small_results_are_counted_exactly(db):
    for _ in range(3):
        make_job("dead")
    paginator = EstimatedCountPaginator(Job.objects.order_by("-pk"), 2)
    assert paginator.count == 3 and not paginator.count_is_estimate
    assert paginator.num_pages == 2


def test_sqlite_has_no_estimate_so_counts_are_exact(db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite behaviour")
    assert planner_estimate(Job.objects.all()) is None
    make_job()
    paginator = TinyThresholds(Job.objects.order_by("-pk"), 10)
    assert paginator.count == 1 and not paginator.count_is_estimate


@requires_postgres
def test_a_large_result_shows_the_planner_estimate_without_counting(db):
    Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(400)])
    make_job("dead")
    analyze()
    paginator = TinyThresholds(Job.objects.order_by("-pk"), 50)
    sent: list[str] = []
    with connection.execute_wrapper(lambda ex, sql, *a: sent.append(sql) or ex(sql, *a)):
        count = paginator.count
    assert paginator.count_is_estimate
    assert 300 <= count <= 500  # the planner's figure, from the statistics ANALYZE gathered
    assert not [sql for sql in sent if "COUNT(" in sql.upper()]


@requires_postgres
def test_a_selective_filter_on_a_large_table_is_counted_exactly(db):
    Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(400)])
    make_job("dead")
    analyze()
    paginator = TinyThresholds(Job.objects.filter(status="dead").order_by("-pk"), 50)
    assert paginator.count == 1 and not paginator.count_is_estimate


@requires_postgres
def test_a_costly_count_is_estimated_even_when_few_rows_are_expected(db):
    Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(400)])
    analyze()

    class CheapOnly(EstimatedCountPaginator):
        exact_below_cost = 1.0  # any scan costs more than this

    paginator = CheapOnly(Job.objects.filter(payload__icontains="nowhere").order_by("-pk"), 50)
    paginator.count  # noqa: B018
    assert paginator.count_is_estimate


@requires_postgres
def test_the_list_says_when_its_count_is_an_estimate(client, monkeypatch):
    from django_jobs.admin import paginator as module

    monkeypatch.setattr(module.EstimatedCountPaginator, "exact_below_rows", 100)
    client.force_login(staff("viewer", "view_job"))
    Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(400)])
    analyze()
    html = client.get("/admin/django_jobs/job/").content.decode()
    assert "The number of jobs is the database's estimate" in html
