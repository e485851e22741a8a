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


def test_page_numbers_stop_at_the_newest_rows_they_reach_quickly(db):
    Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(30)])

    class Shallow(EstimatedCountPaginator):
        deepest_rows = 12

    paginator = Shallow(Job.objects.order_by("-created_at", "-pk"), 5)
    assert paginator.count == 30 and paginator.pages_stop
    assert paginator.num_pages == 3  # 15 rows: the page holding the 12th
    assert list(paginator.page_range) == [1, 2, 3]
    # A number past them (typed into the URL, or an old link) serves the last of them.
    assert paginator.page(40).number == 3
    assert paginator.page("7").object_list[0] == paginator.page(3).object_list[0]
    some = Job.objects.order_by("pk").values_list("pk", flat=True)[:14]
    short = Shallow(Job.objects.filter(pk__in=list(some)).order_by("-created_at", "-pk"), 5)
    assert not short.pages_stop and short.num_pages == 3


def test_the_last_page_links_to_the_older_jobs_without_a_gap(client, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from django_jobs.admin import paginator as module
    from django_jobs.admin.job_admin import JobAdmin

    monkeypatch.setattr(module.EstimatedCountPaginator, "deepest_rows", 6)
    monkeypatch.setattr(JobAdmin, "list_per_page", 3)
    client.force_login(staff("viewer", "view_job"))
    now = timezone.now()
    jobs = Job.objects.bulk_create([Job(type="echo", status="completed") for _ in range(10)])
    for age, job in enumerate(jobs):  # jobs[0] newest
        Job.objects.filter(pk=job.pk).update(created_at=now - timedelta(minutes=age))
    url = "/admin/django_jobs/job/"
    seen = []
    for page in (1, 2):
        seen += [job.pk for job in client.get(f"{url}?p={page}").context["cl"].result_list]
    last = client.get(f"{url}?p=99")  # past the pages: their last one
    assert last.status_code == 200
    cl = last.context["cl"]
    assert cl.paginator.num_pages == 2 and cl.older_query
    html = last.content.decode()
    assert "Older jobs" in html and "dj-jobs-older-link" in html
    older = client.get(url + cl.older_query).context["cl"]
    seen += [job.pk for job in older.result_list]
    assert seen == [job.pk for job in jobs[:9]]  # newest first, none missed or repeated
    # The first page has no such link; a list its pages reach whole neither.
    assert client.get(url).context["cl"].older_query is None
    assert client.get(url + "?status__exact=dead").context["cl"].older_query is None
