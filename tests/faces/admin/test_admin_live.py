"""Live pages: the version the job list, a job's page and the overview poll, who may read it,
its cache (one read per interval serves every tab), and the switch that turns it off."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_jobs.admin import live
from django_jobs.models import Job
from tests.admin_helpers import job_url, staff

pytestmark = pytest.mark.django_db

LIVE = "/admin/django_jobs/job/live/"


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def version(client, query: str) -> dict:
    response = client.get(LIVE + query)
    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]
    return response.json()


def test_the_queues_version_changes_when_a_job_is_enqueued_and_when_it_ends(viewer):
    first = version(viewer, "?page=list")
    assert first["interval"] == 5
    Job.enqueue("echo", {})
    assert version(viewer, "?page=list") == first  # cached for the interval
    cache.clear()  # the interval has passed
    second = version(viewer, "?page=overview")
    assert second["version"] != first["version"]
    Job.objects.update(status="dead")
    cache.clear()
    assert version(viewer, "?page=list")["version"] != second["version"]


def test_one_read_per_interval_serves_every_tab(viewer):
    version(viewer, "?page=list")
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            version(viewer, "?page=overview")
    assert not [q for q in queries.captured_queries if "django_jobs_" in q["sql"]]


def test_a_jobs_version_follows_its_row(viewer):
    job = Job.enqueue("echo", {})
    first = version(viewer, f"?page=job&job={job.pk}")
    Job.objects.filter(pk=job.pk).update(status="processing", attempt=1)
    cache.clear()
    assert version(viewer, f"?page=job&job={job.pk}")["version"] != first["version"]


@pytest.mark.parametrize("query", ["", "?page=nothing", "?page=job", "?page=job&job=x",
                                   "?page=job&job=99999999", "?page=job&job=-1"])
def test_an_unknown_page_or_job_is_a_404(viewer, query):
    assert viewer.get(LIVE + query).status_code == 404


def test_only_staff_who_may_view_jobs_read_it(client):
    assert client.get(LIVE + "?page=list").status_code == 302  # to the login page
    client.force_login(staff("nobody"))
    assert client.get(LIVE + "?page=list").status_code == 403


def test_the_pages_carry_the_script_and_their_regions(viewer):
    job = Job.enqueue("echo", {})
    for url, kind in ((reverse("admin:django_jobs_job_changelist"), "list"),
                      (reverse("admin:django_jobs_job_overview"), "overview"),
                      (job_url(job), "job")):
        page = viewer.get(url).content.decode()
        assert 'id="dj-jobs-live"' in page and "admin_live.js" in page, url
        assert f"page={kind}" in page
        assert live.REGIONS[kind].split(",")[0] in page


def test_zero_turns_live_refresh_off(viewer, settings):
    settings.DJANGO_JOBS = {**getattr(settings, "DJANGO_JOBS", {}), "ADMIN_REFRESH_SECONDS": 0}
    assert viewer.get(LIVE + "?page=list").status_code == 404
    page = viewer.get(reverse("admin:django_jobs_job_changelist")).content.decode()
    assert "admin_live.js" not in page


def test_a_slow_version_asks_for_a_longer_interval(viewer, monkeypatch):
    monkeypatch.setattr(live, "SLOW_SECONDS", -1.0)  # every read counts as slow
    assert version(viewer, "?page=list")["interval"] == 10
    monkeypatch.setattr(live, "SLOW_SECONDS", 60.0)
    cache.clear()
    assert version(viewer, "?page=list")["interval"] == 5
