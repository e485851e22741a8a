"""The job list's first page read among the newest jobs (``admin/first_page.py``) holds the
same rows as Django's read of the page, on generated lists; the admin's list takes it on
PostgreSQL, and every other database reads the page as Django does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django_jobs.admin.first_page import first_page
from django_jobs.admin.job_admin import JobAdmin
from django_jobs.admin.paginator import EstimatedCountPaginator
from django_jobs.models import Job
from tests.admin_helpers import make_job

pytestmark = pytest.mark.django_db

TYPES = ["a", "b", "c"]
STATUSES = ["pending", "completed", "dead"]
FILTERS = [{}, {"type": "a"}, {"status": "completed"}, {"type": "b", "status": "dead"}]


def plain_page(queryset, per_page: int) -> list[int]:
    return [job.pk for job in queryset[:per_page]]


@st.composite
def lists(draw):
    count = draw(st.integers(0, 14))
    return {
        # created seconds apart, or at the same second: ties are ordered by id
        "jobs": draw(st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from(STATUSES),
                                        st.integers(0, 6)), min_size=count, max_size=count)),
        "filter": draw(st.sampled_from(FILTERS)),
        "per_page": draw(st.integers(1, 5)),
        "window": draw(st.integers(1, 16)),
        "order": draw(st.sampled_from([("-created_at", "-pk"), ("created_at", "pk")])),
    }


@given(lists())
# the newest job alone in the window, a page of two asked: the window does not fill it
@example({"jobs": [("a", "pending", 0), ("a", "pending", 1)], "filter": {}, "per_page": 2,
          "window": 1, "order": ("-created_at", "-pk")})
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_first_page_among_the_newest_is_the_page_django_reads(db, drawn):
    start = timezone.now() - timedelta(hours=1)
    with transaction.atomic():
        for type_, status, second in drawn["jobs"]:
            make_job(status, type=type_, created_at=start + timedelta(seconds=second))
        jobs = Job.objects.filter(**drawn["filter"]).order_by(*drawn["order"])
        found = first_page(jobs, drawn["per_page"], drawn["window"])
        if found is not None:
            assert connection.vendor == "postgresql" and drawn["order"][0] == "-created_at"
            assert [job.pk for job in found] == plain_page(jobs, drawn["per_page"])
        paginator = EstimatedCountPaginator(jobs, drawn["per_page"])
        paginator.first_page_window = drawn["window"]
        assert [job.pk for job in paginator.page(1).object_list] == plain_page(
            jobs, drawn["per_page"])
        transaction.set_rollback(True)


@pytest.fixture
def thirty_jobs():
    start = timezone.now() - timedelta(hours=1)
    return [make_job("completed", type="a" if n % 3 else "b",
                     created_at=start + timedelta(seconds=n)) for n in range(30)]


def test_the_admin_list_reads_its_first_page_among_the_newest(admin_client, thirty_jobs,
                                                              monkeypatch):
    monkeypatch.setattr(EstimatedCountPaginator, "first_page_window", 12)
    monkeypatch.setattr(JobAdmin, "list_per_page", 5)
    sent: list[str] = []

    def log(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(log):
        response = admin_client.get("/admin/django_jobs/job/?type=a")
    assert response.status_code == 200
    shown = [job.pk for job in response.context["cl"].result_list]
    newest_a = [job.pk for job in sorted(thirty_jobs, key=lambda j: j.created_at, reverse=True)
                if job.type == "a"]
    assert shown == newest_a[:len(shown)] and shown
    bounded = [sql for sql in sent if "ORDER BY" in sql and '"created_at" >=' in sql
               and "LIMIT" in sql]
    if connection.vendor == "postgresql":
        assert bounded, "the first page is read among the newest jobs"
    else:
        assert not bounded
