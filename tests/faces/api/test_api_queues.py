"""GET /queues, POST /queues/<name>/pause and /resume; and the same from manage.py jobs: a pause
is the row the admin's overview writes, which workers read at every heartbeat."""

import json
import time

import pytest
from django.core.management import CommandError, call_command

from django_jobs.models import Job, QueueState, Worker
from tests.api_support import Api, make_token
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db


def test_pause_and_resume_answer_with_the_queue_and_whether_it_changed():
    api = Api(make_token("manage", "read"))
    assert api.post("/api/queues/reports/pause").json() == {
        "name": "reports", "paused": True, "changed": True}
    assert api.post("/api/queues/reports/pause").json()["changed"] is False
    assert QueueState.objects.get(name="reports").paused
    Worker.objects.create(worker_id="w1", hostname="h", pid=1, queues=["default", "mail"])
    assert api.get("/api/queues").json() == {"queues": [
        {"name": "default", "paused": False}, {"name": "mail", "paused": False},
        {"name": "reports", "paused": True}]}
    assert api.post("/api/queues/reports/resume").json() == {
        "name": "reports", "paused": False, "changed": True}


def test_a_bad_name_is_a_400_with_a_detail_and_changes_nothing():
    api = Api(make_token("manage"))
    response = api.post("/api/queues/no%20spaces/pause")
    assert response.status_code == 400
    assert "not a queue name" in response.json()["detail"]
    assert not QueueState.objects.exists()


def test_pausing_needs_the_manage_scope_and_reading_the_read_scope():
    reader = Api(make_token("read"))
    assert reader.post("/api/queues/reports/pause").status_code == 403
    assert reader.get("/api/queues").status_code == 200
    assert Api(make_token("submit")).get("/api/queues").status_code == 403
    assert Api().get("/api/queues").status_code == 401
    assert not QueueState.objects.exists()


def test_the_command_lists_pauses_and_resumes(capsys):
    call_command("jobs", "pause", "reports", "mail")
    assert capsys.readouterr().out.splitlines() == ["reports: paused", "mail: paused"]
    call_command("jobs", "pause", "mail")
    assert "mail: already paused" in capsys.readouterr().out
    call_command("jobs", "queues", "--json")
    assert json.loads(capsys.readouterr().out) == [
        {"name": "mail", "paused": True}, {"name": "reports", "paused": True}]
    call_command("jobs", "resume", "mail")
    assert "mail: resumed" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("jobs", "pause", "no spaces")


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_stops_claiming_within_a_heartbeat_and_starts_again(start_worker):
    api = Api(make_token("manage"))
    worker = start_worker("--heartbeat", "0.2", "--poll-interval", "0.1")
    first = Job.enqueue("echo", {"n": 1})
    wait_for(lambda: Job.objects.get(pk=first.pk).status == "completed")
    api.post("/api/queues/default/pause")
    time.sleep(1.0)  # a few heartbeats: every worker has read the pause
    held = Job.enqueue("echo", {"n": 2})
    time.sleep(1.0)
    assert Job.objects.get(pk=held.pk).status == "pending"
    api.post("/api/queues/default/resume")
    wait_for(lambda: Job.objects.get(pk=held.pk).status == "completed")
    worker.stop()
