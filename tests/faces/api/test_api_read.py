"""GET /jobs/<job_id> and GET /jobs: the job's JSON, filters, and a cursor that holds."""

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from django_jobs.models import Job
from tests.api_support import run_ready

pytestmark = pytest.mark.django_db


# The scopes of the ``api`` client's token (tests/faces/conftest.py).
API_SCOPES = ("read", "submit")


@pytest.mark.django_db(transaction=True)  # run_job tidies connections
def test_a_job_reads_back_with_every_field_and_its_attempts(api):
    job = Job.enqueue("echo", {"x": 1}, priority=5)
    run_ready()
    body = api.get(f"/api/jobs/{job.public_id}").json()
    assert body["job_id"] == job.public_id
    assert (body["type"], body["status"], body["priority"], body["queue"]) == (
        "echo", "completed", 5, "default")
    assert (body["attempt"], body["max_attempts"]) == (1, 3)
    assert body["payload"] == {"x": 1}
    assert body["result"] == {"echo": {"x": 1}}
    assert body["error"] is None
    for name in ("run_at", "created_at", "updated_at", "started_at", "finished_at"):
        assert body[name].endswith("Z"), name
    [attempt] = body["attempts"]
    assert attempt["number"] == 1
    assert attempt["outcome"] == "completed"
    assert attempt["worker_id"] == "test-worker"
    assert attempt["duration_ms"] >= 0


@pytest.mark.django_db(transaction=True)  # run_job tidies connections
def test_a_failed_job_shows_its_structured_error(api):
    job = Job.enqueue("always_fails", {"n": 7})
    run_ready()
    body = api.get(f"/api/jobs/{job.public_id}").json()
    assert body["status"] == "failed"
    assert body["error"]["type"] == "RuntimeError"
    assert body["error"]["message"] == "boom 7"
    assert "Traceback" in body["error"]["traceback"]
    assert body["error"]["details"] == {}
    assert body["attempts"][0]["error"]["type"] == "RuntimeError"


def test_named_priorities_read_as_names(api):
    job = Job.enqueue("noop", priority="low")
    assert api.get(f"/api/jobs/{job.public_id}").json()["priority"] == "low"


@pytest.mark.parametrize(("job_id", "field"), [
    ("j-00000000000000000000", "job_id"),  # the shape of an id, no such job
    ("nonsense", "job_id"),  # not the shape of an id: not looked up
    ("a/b/c", "path"),  # more segments: no route
    ("j-x/../y", "path"),
])
def test_an_unknown_job_id_is_a_json_404(api, job_id, field):
    response = api.get(f"/api/jobs/{job_id}")
    assert response.status_code == 404
    assert response.json()["errors"] == {field: "not found"}


# The list.


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [job["job_id"] for job in response.json()["results"]]


def test_the_list_is_newest_first(api):
    jobs = [Job.enqueue("noop") for _ in range(3)]
    assert ids(api.get("/api/jobs")) == [j.public_id for j in reversed(jobs)]


@pytest.mark.django_db(transaction=True)  # run_job tidies connections
def test_the_list_filters_by_status_type_and_queue(api):
    done = Job.enqueue("echo", queue="a")
    run_ready()
    failed = Job.enqueue("always_fails", queue="b")
    run_ready()
    pending = Job.enqueue("echo", queue="b")
    assert ids(api.get("/api/jobs", status="failed")) == [failed.public_id]
    assert ids(api.get("/api/jobs", status="completed,pending")) == [
        pending.public_id, done.public_id]
    assert ids(api.get("/api/jobs", type="echo")) == [pending.public_id, done.public_id]
    assert ids(api.get("/api/jobs", queue="b")) == [pending.public_id, failed.public_id]
    assert ids(api.get("/api/jobs", type="echo", queue="b")) == [pending.public_id]


def test_since_keeps_jobs_updated_at_or_after_the_time(api):
    old = Job.enqueue("noop")
    Job.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(hours=2))
    new = Job.enqueue("noop")
    since = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids(api.get("/api/jobs", since=since)) == [new.public_id]
    offset = (datetime.now(UTC) - timedelta(hours=3)).isoformat()  # +00:00, sent encoded
    assert ids(api.get("/api/jobs", since=offset)) == [new.public_id, old.public_id]
    far_offset = (datetime.now(UTC) - timedelta(hours=1)).astimezone(
        timezone.get_fixed_timezone(22 * 60 + 49)).isoformat()  # PostgreSQL refuses +22:49
    assert ids(api.get("/api/jobs", since=far_offset)) == [new.public_id]


def test_a_since_beyond_the_dates_python_holds_is_clamped_not_refused(api):
    """Valid RFC 3339 times past year 9999 in UTC (or before year 1) are the end (start) of
    time: a list of nothing (everything), as the OpenAPI document's date-time promises."""
    Job.enqueue("noop")
    assert ids(api.get("/api/jobs", since="9999-12-31T23:59:59-23:00")) == []
    assert len(ids(api.get("/api/jobs", since="0001-01-01T00:00:00+23:59"))) == 1
    assert len(ids(api.get("/api/jobs", since="0000-01-01T00:00:00Z"))) == 1


@pytest.mark.parametrize(("params", "field"), [
    ({"status": "broken"}, "status"),
    ({"status": "failed,"}, "status"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2024-06-14T12:00:00"}, "since"),  # no time zone
    ({"since": "2024-13-45T12:00:00Z"}, "since"),
    ({"since": "2024-06-14 12:00:00Z"}, "since"),  # RFC 3339 needs the T
    ({"since": "2024-02-30T12:00:00Z"}, "since"),  # no such day
    ({"limit": "0"}, "limit"),
    ({"limit": "201"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"cursor": "garbage"}, "cursor"),
    ({"cursor": "bnx4eHh8MQ"}, "cursor"),
    ({"stauts": "failed"}, "stauts"),
    ({"type": "a\x00b"}, "query"),
])
def test_bad_list_parameters_are_400_naming_them(api, params, field):
    response = api.get("/api/jobs", **params)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_pages_follow_the_cursor_without_skips_or_repeats_while_jobs_are_added(api):
    first_batch = [Job.enqueue("noop") for _ in range(7)]
    seen: list[str] = []
    response = api.get("/api/jobs", limit=3)
    while True:
        seen += ids(response)
        Job.enqueue("noop")  # new jobs arrive at the top between page loads
        next_url = response.json()["next"]
        if not next_url:
            break
        query = parse_qs(urlsplit(next_url).query)
        assert query["limit"] == ["3"]
        response = api.get("/api/jobs", limit=3, cursor=query["cursor"][0])
    assert seen == [j.public_id for j in reversed(first_batch)]


def test_the_previous_link_pages_back_to_newer_jobs(api):
    jobs = [Job.enqueue("noop") for _ in range(5)]
    newest_first = [j.public_id for j in reversed(jobs)]
    page1 = api.get("/api/jobs", limit=2)
    assert page1.json()["previous"] is None
    cursor = parse_qs(urlsplit(page1.json()["next"]).query)["cursor"][0]
    page2 = api.get("/api/jobs", limit=2, cursor=cursor)
    assert ids(page2) == newest_first[2:4]
    back = parse_qs(urlsplit(page2.json()["previous"]).query)["cursor"][0]
    page_back = api.get("/api/jobs", limit=2, cursor=back)
    assert ids(page_back) == newest_first[0:2]
    assert page_back.json()["previous"] is None


def test_jobs_created_in_the_same_instant_are_ordered_by_id(api):
    now = timezone.now()
    jobs = [Job.enqueue("noop") for _ in range(4)]
    Job.objects.update(created_at=now)
    first = api.get("/api/jobs", limit=2)
    cursor = parse_qs(urlsplit(first.json()["next"]).query)["cursor"][0]
    second = api.get("/api/jobs", limit=2, cursor=cursor)
    assert ids(first) + ids(second) == [j.public_id for j in reversed(jobs)]
    assert second.json()["next"] is None


def test_a_page_costs_the_same_queries_whatever_its_size(api, django_assert_num_queries):
    for _ in range(30):
        Job.enqueue("noop")
    api.get("/api/jobs", limit=1)  # the token's last_used_at is written on first use
    with django_assert_num_queries(2):  # the token, the page
        assert len(ids(api.get("/api/jobs", limit=1))) == 1
    with django_assert_num_queries(2):
        assert len(ids(api.get("/api/jobs", limit=30))) == 30


def test_a_running_job_shows_the_progress_its_handler_recorded(api):
    job = Job.enqueue("echo")
    assert api.get(f"/api/jobs/{job.public_id}").json()["progress"] is None
    (held,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert Job.objects.record_progress(held, 0.25, "resized 1 of 4")
    body = api.get(f"/api/jobs/{job.public_id}").json()
    assert body["status"] == "processing"
    assert body["progress"] == {"fraction": 0.25, "message": "resized 1 of 4"}
