"""Tasks are jobs in the JSON API: submitted, read, retried and canceled like any other.

Runs where the API (django_jobs.api) is installed; skipped otherwise.
"""

import pytest
from django.conf import settings

pytest.importorskip("tests.api_support")  # present where the API is
if not settings.HAS_TASKS_FRAMEWORK:
    pytest.skip("needs django.tasks or the django-tasks backport", allow_module_level=True)

from django_jobs.backends.compat import TaskResultStatus, default_task_backend
from django_jobs.models import Job
from tests import tasks as test_tasks
from tests.api_support import run_ready

pytestmark = pytest.mark.django_db(transaction=True)


# The scopes of the ``api`` client's token (tests/faces/conftest.py).
API_SCOPES = ("submit", "read", "manage")


def test_a_task_enqueued_in_python_is_listed_and_read_through_the_api(api):
    result = test_tasks.echo_task.enqueue(1, b=2)
    body = api.get(f"/api/jobs/{result.id}").json()
    assert body["type"] == f"task:{test_tasks.echo_task.module_path}"
    assert body["status"] == "pending"
    run_ready()
    assert api.get(f"/api/jobs/{result.id}").json()["status"] == "completed"
    result.refresh()
    assert result.return_value == {"args": [1], "kwargs": {"b": 2}}
    listed = api.get("/api/jobs").json()["results"]
    assert result.id in [job["job_id"] for job in listed]


def test_a_task_submitted_through_the_api_is_a_task_result(api):
    response = api.post("/api/jobs", {
        "type": f"task:{test_tasks.calculate_meaning_of_life.module_path}",
        "payload": {"args": [], "kwargs": {}},
    })
    assert response.status_code == 201, response.content
    job_id = response.json()["job_id"]
    assert default_task_backend.get_result(job_id).status == TaskResultStatus.READY
    run_ready()
    assert test_tasks.calculate_meaning_of_life.get_result(job_id).return_value == 42


def test_the_api_cannot_submit_a_task_type_that_names_no_task(api):
    response = api.post("/api/jobs", {"type": "task:os.getcwd", "payload": {}})
    assert response.status_code == 400
    assert "detail" in response.json()
    assert not Job.objects.exists()


def test_retrying_and_canceling_through_the_api_show_in_the_task_result(api):
    dead = test_tasks.permanent_task.enqueue()
    run_ready()
    assert test_tasks.permanent_task.get_result(dead.id).status == TaskResultStatus.FAILED
    assert api.post(f"/api/jobs/{dead.id}/retry").status_code == 200
    assert test_tasks.permanent_task.get_result(dead.id).status == TaskResultStatus.READY

    waiting = test_tasks.noop_task.enqueue()
    assert api.post(f"/api/jobs/{waiting.id}/cancel").status_code == 200
    waiting.refresh()
    assert waiting.status == TaskResultStatus.FAILED
