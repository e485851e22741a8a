"""The overview and the list's strip above their caps: estimates, shown as "about"; below
them, exact. The oldest ready job found by probing each priority equals a plain MIN."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Min
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobs.admin import overview_figures
from django_jobs.models import Job
from tests.admin_helpers import make_job

LIST = "/admin/django_jobs/job/"
OVERVIEW = "/admin/django_jobs/job/overview/"

pytestmark = pytest.mark.django_db


def analyze() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE django_jobs_job")


@pytest.fixture(autouse=True)
def analyzed_empty_after():
    yield
    # ANALYZE writes the table's size to pg_class in place, which the test's rollback leaves:
    # analyzed again without the rows, the tests after this one plan for an empty table.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM django_jobs_job")
            cursor.execute("ANALYZE django_jobs_job")


def test_below_the_sample_the_overview_is_exact_and_says_no_about(viewer):
    for _ in range(3):
        make_job("dead")
    response = viewer.get(OVERVIEW)
    assert response.context["estimated"] == []
    assert response.context["dead"] == 3
    assert "about" not in response.content.decode().split('id="queues"')[1].split("</table>")[0]


def test_above_the_sample_a_states_figures_are_estimates_shown_as_about(viewer, monkeypatch):
    monkeypatch.setattr(overview_figures, "SAMPLE", 4)
    for queue in ("mail", "mail", "mail", "media", "media", "media"):
        make_job("dead", queue=queue)
    make_job("failed")
    analyze()
    response = viewer.get(OVERVIEW)
    assert response.context["estimated"] == ["dead"]  # failed: one job, exact
    queues = {r.name: r for r in response.context["queues"]}
    dead = queues["mail"].counts["dead"] + queues["media"].counts["dead"]
    assert dead >= 5  # more than the sample, never fewer than were read
    cells = dict(zip(overview_figures.COLUMNS, queues["mail"].cells(), strict=True))
    assert cells["dead"].estimated and str(cells["dead"]).startswith("about ")
    assert not cells["failed"].estimated
    html = response.content.decode()
    assert "<td>about " in html
    assert "about <strong>" in html  # the dead tile


def test_the_strip_is_exact_below_the_cap_and_about_above_it(viewer, monkeypatch):
    for _ in range(3):
        make_job("dead")
    assert viewer.get(LIST).context["summary"]["dead_estimated"] is False
    monkeypatch.setattr(overview_figures, "COUNT_CAP", 2)
    analyze()
    summary = viewer.get(LIST).context["summary"]
    if connection.vendor == "sqlite":  # no planner estimate: counted exactly
        assert (summary["dead"], summary["dead_estimated"]) == (3, False)
        return
    assert summary["dead_estimated"] is True
    assert summary["dead"] >= 3
    assert "about <strong>" in viewer.get(LIST).content.decode()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-10, -1, 0, 3, 10]),
                          st.integers(min_value=-3600, max_value=3600),
                          st.sampled_from(["pending", "failed", "dead", "completed"])),
                max_size=12))
def test_the_oldest_ready_job_by_priority_probes_is_the_plain_minimum(jobs):
    Job.objects.all().delete()
    now = timezone.now()
    for priority, offset, status in jobs:
        Job.objects.create(type="echo", priority=priority, status=status,
                           run_at=now + timedelta(seconds=offset))
    ready = Job.objects.filter(status__in=("pending", "failed"), run_at__lte=now)
    oldest = ready.aggregate(m=Min("run_at"))["m"]
    assert overview_figures.oldest_ready(Job.objects.all(), now) == oldest


def test_a_type_the_planner_expects_few_of_is_looked_for_among_the_newest_jobs(
        viewer, monkeypatch):
    from django_jobs.admin.job_admin import JobAdmin

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL: no index serves a type or queue filter there")
    monkeypatch.setattr(JobAdmin, "search_window", 100)
    now = timezone.now()
    Job.objects.bulk_create(Job(type="echo", status="completed", created_at=now - timedelta(
        seconds=n)) for n in range(1000))
    make_job("dead", type="rare", created_at=now - timedelta(days=3))  # older than the window
    analyze()
    rare = viewer.get(LIST, {"type": "rare"})
    shown = [str(m) for m in rare.context["messages"]]
    assert any("looked for among the newest 100 jobs" in m for m in shown), shown
    assert list(rare.context["cl"].result_list) == []  # outside the window
    common = viewer.get(LIST, {"type": "echo"})
    assert not [m for m in common.context["messages"] if "newest" in str(m)]
    assert len(common.context["cl"].result_list) == 50
    period = viewer.get(LIST, {"type": "rare", "created_at__gte": (
        now - timedelta(days=7)).isoformat()})
    assert [j.type for j in period.context["cl"].result_list] == ["rare"]  # a period: all of it
