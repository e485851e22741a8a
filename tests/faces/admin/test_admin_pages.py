"""The job list, its filters and search, the read-only job page, and who may see them."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobs.models import Job
from tests.admin_helpers import add_attempt, job_url, make_job, staff

LIST = "/admin/django_jobs/job/"
pytestmark = pytest.mark.django_db


def listed(response) -> set[str]:
    return {job.public_id for job in response.context["cl"].result_list}


# Who gets in.


@pytest.mark.parametrize("url", [LIST, LIST + "overview/"])
def test_anonymous_users_are_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_users_without_staff_status_cannot_see_jobs_even_with_permissions(client):
    user = staff("outsider", "view_job", "retry_job")
    user.is_staff = False
    user.save()
    client.force_login(user)
    job = make_job("dead")
    for url in (LIST, job_url(job), LIST + "overview/"):
        assert client.get(url).status_code == 302


def test_staff_without_the_view_permission_get_403(client):
    client.force_login(staff("nobody"))
    job = make_job("dead")
    for url in (LIST, job_url(job), LIST + "overview/"):
        assert client.get(url).status_code == 403


# The list.


def test_list_shows_each_column_and_a_coloured_status(viewer):
    job = make_job("dead", type="email_send", queue="mail", priority=10, max_attempts=3)
    html = viewer.get(LIST).content.decode()
    assert job.public_id in html
    assert "email_send" in html and "mail" in html
    assert '<span class="dj-jobs-status dj-jobs-status-dead">Dead</span>' in html
    assert "3 of 3" in html
    assert '<td class="field-priority_label">high</td>' in html
    assert "2.0 s" in html  # duration from started_at to finished_at


def test_list_is_newest_first(viewer):
    old = make_job(created_at=timezone.now() - timedelta(days=1))
    new = make_job()
    ids = [j.public_id for j in viewer.get(LIST).context["cl"].result_list]
    assert ids == [new.public_id, old.public_id]


def test_list_strip_counts_dead_processing_and_ready_jobs(viewer):
    make_job("dead")
    make_job("dead")
    make_job("processing")
    make_job("pending", run_at=timezone.now() - timedelta(minutes=5))
    make_job("pending", run_at=timezone.now() + timedelta(hours=1))  # scheduled: not ready
    summary = viewer.get(LIST).context["summary"]
    assert (summary["dead"], summary["processing"], summary["ready"]) == (2, 1, 1)
    assert summary["oldest_age"] >= timedelta(minutes=5)


def test_the_strips_dead_and_processing_tiles_open_the_list_of_those_jobs(viewer):
    dead, running = make_job("dead"), make_job("processing")
    make_job("pending")
    html = viewer.get(LIST).content.decode()
    hrefs = re.findall(r'<a class="dj-jobs-tile[^"]*" href="([^"]+)"', html)
    assert len(hrefs) == 2
    assert [listed(viewer.get(LIST + href)) for href in hrefs] == [
        {dead.public_id}, {running.public_id}]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=dead", {"dead"}),
        ("type=flaky", {"flaky"}),
        ("queue=mail", {"mail"}),
        ("priority=high", {"high"}),
        ("priority=above", {"urgent"}),
        ("has_error=yes", {"dead", "failed"}),
        ("has_error=no", {"pending", "flaky", "mail", "high", "urgent", "old"}),
        ("created_at__gte={week_ago}", {"dead", "failed", "pending", "flaky", "mail", "high",
                                        "urgent"}),
    ],
)
def test_each_filter_narrows_the_list(viewer, query, expected):
    now = timezone.now()
    jobs = {
        "dead": make_job("dead"),
        "failed": make_job("failed"),
        "pending": make_job("pending"),
        "flaky": make_job("pending", type="flaky"),
        "mail": make_job("pending", queue="mail"),
        "high": make_job("pending", priority=10),
        "urgent": make_job("pending", priority=50),
        "old": make_job("pending", created_at=now - timedelta(days=30)),
    }
    week_ago = (now - timedelta(days=7)).isoformat().replace("+", "%2B")
    response = viewer.get(LIST + "?" + query.format(week_ago=week_ago))
    assert response.status_code == 200
    assert listed(response) == {jobs[name].public_id for name in expected}


def test_type_and_queue_filters_offer_known_values_without_scanning_jobs(viewer):
    with CaptureQueriesContext(connection) as queries:
        html = viewer.get(LIST).content.decode()
    assert "?type=flaky" in html and "?type=echo" in html  # registered handler types
    assert "?queue=default" in html
    assert not [q for q in queries.captured_queries if "DISTINCT" in q["sql"].upper()]


def test_the_type_filter_leaves_out_the_queues_own_types(viewer):
    html = viewer.get(LIST).content.decode()
    assert "?type=echo" in html
    assert "?type=django_jobs.callback" not in html
    make_job("dead", type="django_jobs.callback")
    filtered = viewer.get(LIST, {"type": "django_jobs.callback"})
    assert filtered.status_code == 200 and len(listed(filtered)) == 1  # still from the URL


def test_the_queue_filter_offers_a_queue_named_only_at_enqueue(viewer):
    Job.enqueue("echo", {}, queue="reports-only-here")
    make_job("failed", queue="failed-only-here")
    make_job("completed", queue="finished-only-here")
    with CaptureQueriesContext(connection) as queries:
        html = viewer.get(LIST).content.decode()
    assert "?queue=reports-only-here" in html and "?queue=failed-only-here" in html
    assert "?queue=default" in html
    # Ready jobs only: the queue of finished jobs alone would need a scan of the table.
    assert "?queue=finished-only-here" not in html
    assert not [q for q in queries.captured_queries if "DISTINCT" in q["sql"].upper()]


def test_the_breadcrumb_names_the_app_apart_from_the_model(viewer):
    html = viewer.get(LIST).content.decode()
    crumbs = re.search(r'<(div|ol) class="breadcrumbs">(.*?)</\1>', html, re.S)
    assert crumbs, html[:2000]
    links = [text.strip() for text in re.findall(r"<a [^>]*>(.*?)</a>", crumbs.group(2), re.S)]
    assert links == ["Home", "Background jobs"]  # then the list itself, "Jobs"


def test_the_job_list_leaves_out_the_navigation_sidebar_and_the_job_page_keeps_it(client):
    """The wide list has the page; the breadcrumbs lead back. Other pages keep Django's."""
    client.force_login(staff("triage", superuser=True))
    job = make_job("dead")
    html = client.get(LIST).content.decode()
    assert 'id="nav-sidebar"' not in html
    assert 'class="breadcrumbs"' in html
    for url in (job_url(job), LIST + "overview/", "/admin/django_jobs/schedule/"):
        assert 'id="nav-sidebar"' in client.get(url).content.decode(), url


@pytest.mark.parametrize("how", ["public_id", "type", "error", "payload"])
def test_search_finds_jobs_by_id_type_error_message_and_payload_text(viewer, how):
    target = make_job("dead", type="invoice_pdf", payload={"customer": "Grace Hopper"},
                      error={"type": "KeyError", "message": "no template named acme",
                             "traceback": "", "details": {}})
    make_job("dead")
    make_job("pending", payload={"customer": "Alan Turing"})
    term = {"public_id": target.public_id, "type": "invoice", "error": "TEMPLATE NAMED",
            "payload": "grace hop"}[how]
    assert listed(viewer.get(LIST, {"q": term})) == {target.public_id}


@pytest.fixture
def window_of_two(monkeypatch):
    """A free-text search reads the newest two jobs, as it reads the newest 10,000 of a big
    table."""
    from django_jobs.admin.job_admin import JobAdmin

    monkeypatch.setattr(JobAdmin, "search_window", 2)


def test_a_free_text_search_reads_the_newest_jobs_and_says_so(viewer, window_of_two):
    now = timezone.now()
    old = make_job(payload={"customer": "Grace Hopper"}, created_at=now - timedelta(hours=2))
    newer = [make_job(payload={"customer": "Grace Hopper"}, created_at=now - timedelta(minutes=m))
             for m in (2, 1)]
    response = viewer.get(LIST, {"q": "grace"})
    assert listed(response) == {job.public_id for job in newer}
    assert "Searched the newest 2 jobs" in response.content.decode()
    # A public id is found through its index, however old.
    assert listed(viewer.get(LIST, {"q": old.public_id})) == {old.public_id}


def test_a_search_in_a_chosen_period_reads_all_of_it(viewer, window_of_two):
    now = timezone.now()
    jobs = [make_job(payload={"customer": "Grace Hopper"}, created_at=now - timedelta(minutes=m))
            for m in (3, 2, 1)]
    response = viewer.get(LIST, {"q": "grace", "created_at__year": now.year})
    assert listed(response) == {job.public_id for job in jobs}
    assert "Searched the newest" not in response.content.decode()


def test_a_search_of_a_table_smaller_than_the_window_reads_it_all(viewer):
    job = make_job(payload={"customer": "Grace Hopper"},
                   created_at=timezone.now() - timedelta(days=400))
    make_job()
    response = viewer.get(LIST, {"q": "grace"})
    assert listed(response) == {job.public_id}
    assert "Searched the newest" not in response.content.decode()


def test_date_hierarchy_offers_periods_without_a_distinct_scan(viewer):
    make_job(created_at=timezone.now() - timedelta(days=400))
    make_job()
    with CaptureQueriesContext(connection) as queries:
        html = viewer.get(LIST).content.decode()
    this_year = timezone.now().year
    assert f"created_at__year={this_year}" in html
    assert f"created_at__year={this_year - 1}" in html
    assert not [q for q in queries.captured_queries if "DISTINCT" in q["sql"].upper()]
    month = viewer.get(LIST, {"created_at__year": this_year, "created_at__month": 1})
    assert month.status_code == 200


def test_a_small_filtered_lists_date_drill_down_spans_its_own_jobs(viewer):
    """Counted exactly, the list is small, so the drill-down reads its own first and last job
    (a large one reads the whole table's: tests/engine/test_mariadb_lists.py)."""
    make_job(type="old_export", created_at=timezone.now() - timedelta(days=400))
    make_job()
    html = viewer.get(LIST, {"type": "echo"}).content.decode()
    assert f"created_at__year={timezone.now().year - 1}" not in html
    assert f"created_at__year={timezone.now().year - 1}" in viewer.get(LIST).content.decode()


def test_list_query_count_does_not_grow_with_the_rows_shown(viewer):
    def count(n: int) -> int:
        Job.objects.all().delete()
        for i in range(n):
            job = make_job("dead", payload={"n": i})
            add_attempt(job)
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(LIST).status_code == 200
        return len(queries)

    assert count(3) == count(30)


def test_list_loads_no_payload_result_or_error_for_the_rows(viewer):
    make_job("dead", payload={"secret_marker": "x" * 50})
    with CaptureQueriesContext(connection) as queries:
        viewer.get(LIST)
    row_query = [q["sql"] for q in queries.captured_queries if "LIMIT" in q["sql"].upper()]
    assert row_query and all('"payload"' not in sql for sql in row_query)


# The job page.


def test_job_page_shows_payload_result_error_and_every_attempt(viewer):
    job = make_job("dead", payload={"to": "ada@example.com", "n": [1, 2]})
    add_attempt(job, "failed", number=1, worker_id="host-a-1")
    add_attempt(job, "dead", number=2, worker_id="host-b-2", cpu_time=1.5)
    html = viewer.get(job_url(job)).content.decode()
    assert '<pre class="dj-jobs-json">{\n  &quot;' in html  # indented JSON
    assert "&quot;to&quot;: &quot;ada@example.com&quot;" in html
    assert "<strong>SMTPError</strong>: mailbox unavailable" in html
    assert '<pre class="dj-jobs-traceback">Traceback (most recent call last):' in html
    assert "&quot;code&quot;: 550" in html  # the error's details
    assert "host-a-1" in html and "host-b-2" in html
    assert "1.500 s" in html and "50.0 MiB" in html
    assert html.count('dj-jobs-status-dead"') >= 2  # the job and its last attempt


def test_job_page_shows_a_completed_result(viewer):
    job = make_job("completed", result={"sent": True})
    html = viewer.get(job_url(job)).content.decode()
    assert "&quot;sent&quot;: true" in html


def test_job_page_is_read_only_even_for_a_superuser(client):
    client.force_login(staff("root", superuser=True))
    job = make_job("dead", payload={"a": 1})
    html = client.get(job_url(job)).content.decode()
    assert 'name="payload"' not in html and 'name="_save"' not in html
    response = client.post(job_url(job), {"payload": '{"a": 2}', "status": "completed"})
    assert response.status_code == 403
    job.refresh_from_db()
    assert (job.payload, job.status) == ({"a": 1}, "dead")
    assert client.get(reverse("admin:django_jobs_job_add")).status_code == 403


def test_job_page_shows_a_cancel_request_on_a_running_job(viewer):
    job = make_job("processing", cancel_requested=True)
    assert "cancel requested" in viewer.get(job_url(job)).content.decode()


def test_running_job_shows_its_progress_in_the_list_and_on_its_page(viewer):
    job = make_job("processing", progress={"fraction": 0.4, "message": "resized 2 of 5"})
    assert "40% resized 2 of 5" in viewer.get(job_url(job)).content.decode()
    assert "40% resized 2 of 5" in viewer.get(LIST).content.decode()


def test_a_job_page_for_an_unknown_id_redirects_with_a_message(viewer):
    response = viewer.get(LIST + "999999/change/", follow=True)
    assert "exist. Perhaps it was deleted?" in response.content.decode()


def test_an_attempt_names_its_job_by_public_id():
    job = make_job("failed")
    attempt = add_attempt(job, number=2)
    assert str(attempt) == f"attempt 2 of job {job.public_id}: failed"


def test_the_job_page_costs_the_same_queries_for_one_attempt_or_five(viewer):
    one, five = make_job("dead"), make_job("dead")
    add_attempt(one)
    for number in range(1, 6):
        add_attempt(five, number=number)
    counts = []
    for job in (one, five):
        with CaptureQueriesContext(connection) as queries:
            response = viewer.get(job_url(job))
        assert response.status_code == 200
        assert f"of job {job.public_id}" in response.content.decode()
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_searchs_date_drill_down_spans_the_window_it_read(viewer, window_of_two):
    """A search read among the newest jobs offers the periods of that window, from its start
    to the newest job, without reading the window's rows again for their first and last."""
    now = timezone.now()
    make_job(payload={"customer": "Grace Hopper"}, created_at=now - timedelta(days=400))
    for m in (2, 1):
        make_job(payload={"customer": "Grace Hopper"}, created_at=now - timedelta(minutes=m))
    with CaptureQueriesContext(connection) as queries:
        html = viewer.get(LIST, {"q": "grace"}).content.decode()
    assert "Searched the newest 2 jobs" in html
    assert f"created_at__year={now.year - 1}" not in html  # the old match is outside it
    spans = [q["sql"] for q in queries.captured_queries
             if "MIN(" in q["sql"].upper() and "LIKE" in q["sql"].upper()]
    assert spans == []
