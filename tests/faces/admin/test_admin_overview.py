"""The overview page: counts per queue and type, the oldest ready job, workers, and pausing."""

import re
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from django_jobs.models import Job, QueueState, Worker
from tests.admin_helpers import make_job, staff
from tests.conftest import wait_for

OVERVIEW = "/admin/django_jobs/job/overview/"
QUEUES = OVERVIEW + "queues/"


def rows(response, table: str) -> dict:
    return {r.name: r for r in response.context[table]}


@pytest.mark.django_db
def test_overview_counts_each_status_per_queue_and_type(viewer):
    hour = timedelta(hours=1)
    make_job("pending", queue="mail", type="email", run_at=timezone.now() - hour)
    make_job("pending", queue="mail", type="email", run_at=timezone.now() + hour)
    make_job("dead", queue="mail", type="email")
    make_job("waiting", queue="mail", type="email")  # on a job it depends on
    make_job("failed", queue="default", type="pdf")
    make_job("processing", queue="default", type="pdf")
    make_job("completed", queue="default", type="pdf")
    make_job("completed", queue="default", type="pdf", created_at=timezone.now() - 3 * hour * 24)
    response = viewer.get(OVERVIEW)
    assert response.status_code == 200
    queues, types = rows(response, "queues"), rows(response, "types")
    assert queues["mail"].counts == {"waiting": 1, "pending": 1, "scheduled": 1, "processing": 0,
                                     "failed": 0, "dead": 1, "canceled": 0, "completed": 0}
    assert queues["default"].counts["completed"] == 1  # only the last 24 hours
    assert types["pdf"].counts["processing"] == 1 and types["pdf"].counts["failed"] == 1
    assert response.context["dead"] == 1
    assert response.context["oldest_ready_age"] >= hour
    html = response.content.decode()
    assert 'href="/admin/django_jobs/job/?queue=mail"' in html
    assert "<th>waiting</th>" in html


@pytest.mark.django_db
def test_overview_lists_live_workers_and_flags_a_late_heartbeat(viewer):
    now = timezone.now()
    Worker.objects.create(worker_id="web-1-abc", hostname="web-1", pid=4242, queues=["mail"],
                          concurrency=4, running=3, last_heartbeat=now)
    Worker.objects.create(worker_id="web-2-def", hostname="web-2", pid=77, queues=[],
                          concurrency=1, last_heartbeat=now - timedelta(minutes=5))
    response = viewer.get(OVERVIEW)
    html = response.content.decode()
    assert "web-1-abc" in html and "4242" in html and "3 of 4" in html
    late = {w["worker"].worker_id: w["late"] for w in response.context["workers"]}
    assert late == {"web-1-abc": False, "web-2-def": True}


@pytest.mark.django_db
def test_pausing_and_resuming_a_queue_needs_the_queue_permission(client):
    client.force_login(staff("viewer", "view_job"))
    assert client.post(QUEUES, {"queue": "mail", "op": "pause"}).status_code == 403
    assert "Pause</button>" not in client.get(OVERVIEW).content.decode()
    assert not QueueState.objects.filter(paused=True).exists()


@pytest.mark.django_db
def test_pause_then_resume_from_the_overview(client):
    client.force_login(staff("ops", "view_job", "change_queuestate"))
    response = client.post(QUEUES, {"queue": "mail", "op": "pause"}, follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Queue mail paused."]
    assert QueueState.objects.get(name="mail").paused
    assert rows(response, "queues")["mail"].paused
    assert "Resume</button>" in response.content.decode()
    client.post(QUEUES, {"queue": "mail", "op": "resume"})
    assert not QueueState.objects.get(name="mail").paused


@pytest.mark.django_db
def test_a_bad_queue_name_or_operation_is_refused_and_changes_nothing(client):
    client.force_login(staff("ops", "view_job", "change_queuestate"))
    response = client.post(QUEUES, {"queue": "no spaces!", "op": "pause"}, follow=True)
    assert "Cannot pause that queue: must match" in response.content.decode()
    assert client.post(QUEUES, {"queue": "mail", "op": "explode"}).status_code == 404
    assert not QueueState.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_workers_leave_a_paused_queue_alone_until_it_is_resumed(client, start_worker):
    """Pause in the admin, run a real burst worker: only the other queue's job runs."""
    client.force_login(staff("ops", "view_job", "change_queuestate"))
    held = Job.enqueue("echo", {"n": 1}, queue="mail")
    free = Job.enqueue("echo", {"n": 2}, queue="default")
    client.post(QUEUES, {"queue": "mail", "op": "pause"})
    assert start_worker("--burst").wait() == 0
    assert Job.objects.get(pk=free.pk).status == "completed"
    assert Job.objects.get(pk=held.pk).status == "pending"
    client.post(QUEUES, {"queue": "mail", "op": "resume"})
    assert start_worker("--burst").wait() == 0
    wait_for(lambda: Job.objects.get(pk=held.pk).status == "completed", timeout=10)


@pytest.mark.django_db
def test_a_small_table_shows_the_exact_completed_total(viewer):
    for _ in range(14):
        make_job("completed")
    make_job("dead")
    html = viewer.get(OVERVIEW).content.decode()
    assert '<span class="dj-jobs-tile" id="completed-total"><strong>14</strong> completed in all' \
        in html


@pytest.mark.django_db
def test_a_large_table_shows_the_planners_estimate_as_about(viewer, monkeypatch):
    from django.db import connection

    from django_jobs.admin import overview_figures

    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL's planner gives an estimate")
    monkeypatch.setattr(overview_figures, "EXACT_BELOW_ROWS", 0)  # every table counts as large
    make_job("completed")
    total = viewer.get(OVERVIEW).context["completed_total"]
    assert total.estimated
    assert "about <strong>" in viewer.get(OVERVIEW).content.decode()


@pytest.mark.django_db
def test_the_dead_tile_opens_the_list_of_dead_jobs(viewer):
    dead = make_job("dead")
    make_job("failed")
    html = viewer.get(OVERVIEW).content.decode()
    href = re.search(r'<a class="dj-jobs-tile[^"]*" href="([^"]+)"', html).group(1)
    shown = viewer.get(href).context["cl"].result_list
    assert [job.public_id for job in shown] == [dead.public_id]
