"""POST /jobs/<job_id>/cancel and /retry go through the queryset verbs the admin uses."""

import pytest

from django_jobs.models import Job
from tests.api_support import run_ready

pytestmark = pytest.mark.django_db


# The scopes of the ``api`` client's token (tests/faces/conftest.py).
API_SCOPES = ("manage", "read")


def test_canceling_a_pending_job_answers_200_with_the_canceled_job(api):
    job = Job.enqueue("noop")
    response = api.post(f"/api/jobs/{job.public_id}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "canceled"
    job.refresh_from_db()
    assert job.status == "canceled"
    assert job.finished_at is not None


def test_canceling_a_running_job_asks_the_worker_to_stop_with_202(api):
    job = Job.enqueue("noop")
    Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    response = api.post(f"/api/jobs/{job.public_id}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "processing"
    assert response.json()["cancel_requested"] is True
    again = api.post(f"/api/jobs/{job.public_id}/cancel")
    assert again.status_code == 202


@pytest.mark.django_db(transaction=True)  # run_job tidies connections
def test_canceling_a_finished_job_is_409_and_changes_nothing(api):
    job = Job.enqueue("noop")
    run_ready()
    response = api.post(f"/api/jobs/{job.public_id}/cancel")
    assert response.status_code == 409
    assert response.json()["errors"] == {"status": "completed"}
    job.refresh_from_db()
    assert job.status == "completed"


@pytest.mark.django_db(transaction=True)  # run_job tidies connections
def test_retrying_a_dead_job_makes_it_pending_with_an_attempt_left(api):
    job = Job.enqueue("permanent")
    run_ready()
    job.refresh_from_db()
    assert job.status == "dead"
    response = api.post(f"/api/jobs/{job.public_id}/retry")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending"
    assert body["max_attempts"] > body["attempt"]
    assert len(body["attempts"]) == 1


def test_retrying_a_canceled_job_works(api):
    job = Job.enqueue("noop")
    job.cancel()
    assert api.post(f"/api/jobs/{job.public_id}/retry").json()["status"] == "pending"


def test_retrying_a_pending_job_is_409(api):
    job = Job.enqueue("noop")
    response = api.post(f"/api/jobs/{job.public_id}/retry")
    assert response.status_code == 409
    assert response.json()["errors"] == {"status": "pending"}


@pytest.mark.parametrize("verb", ["cancel", "retry"])
def test_an_unknown_job_is_404(api, verb):
    response = api.post(f"/api/jobs/j-00000000000000000000/{verb}")
    assert response.status_code == 404
    assert response.json()["errors"] == {"job_id": "not found"}


@pytest.mark.parametrize("verb", ["cancel", "retry"])
def test_get_on_a_verb_is_405(api, verb):
    job = Job.enqueue("noop")
    response = api.get(f"/api/jobs/{job.public_id}/{verb}")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
