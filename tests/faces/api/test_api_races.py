"""Concurrent actions on one job through the API (retry and cancel, and a delete beside them as
the admin and the command make it) never answer 500, with and without ``ATOMIC_REQUESTS``: each
answer and the job's end state are those that the actions, sent one at a time in some order,
give."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from django_jobs.models import Job
from tests.api_support import Api, make_token
from tests.conftest import requires_row_locks
from tests.races import Raised, at_once, end_state, job_in, row_held, serially, short_lock_waits

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 10  # per start state and set of actions: 80 rounds of two or three actions per test


def answer(verb: str, status: str | None) -> str:
    """What ``verb`` answers on a job in ``status`` (None: deleted), sent alone."""
    if verb == "delete":
        return "kept" if status in ("processing", "requested") else "deleted"
    if status is None:
        return "404"
    if verb == "cancel":
        return {"pending": "200", "failed": "200", "processing": "202",
                "requested": "202"}.get(status, "409")
    return "200" if status in ("dead", "failed", "canceled") else "409"


@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
def test_retry_cancel_and_delete_at_once_answer_as_some_order_of_them(
        monkeypatch, atomic_requests):
    # The same settings dict every thread's connection reads (connections.settings).
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    assert connections.settings["default"]["ATOMIC_REQUESTS"] is atomic_requests
    token = make_token("manage", "read")

    def post(job: Job, verb: str):
        def send() -> str:
            response = Api(token).post(f"/api/jobs/{job.public_id}/{verb}")
            body = response.json()
            if response.status_code in (200, 202):
                assert body["job_id"] == job.public_id
                assert (body["status"], body["cancel_requested"]) == {
                    "retry": ("pending", False), "cancel": (
                        "processing" if response.status_code == 202 else "canceled",
                        response.status_code == 202),
                }[verb]
            else:
                assert body["detail"]
            return str(response.status_code)
        return send

    def delete(job: Job):
        return lambda: "deleted" if Job.objects.filter(pk=job.pk).discard() else "kept"

    met = []
    for start in ("failed", "dead", "canceled", "pending"):
        for verbs in (("retry", "cancel"), ("retry", "cancel", "delete")):
            for _ in range(ROUNDS):
                job = job_in(start)
                sent = [delete(job) if verb == "delete" else post(job, verb) for verb in verbs]
                answers = at_once(sent)
                assert not [a for a in answers if isinstance(a, Raised)], answers
                seen = (end_state(job), tuple(answers))
                assert seen in serially(start, verbs, answer), (start, verbs, seen)
                met.append(seen)
    assert not [a for _, answers in met for a in answers if a == "500"]


@requires_row_locks
@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
@pytest.mark.parametrize("verb", ["retry", "cancel"])
def test_an_action_that_cannot_get_the_job_is_a_409_that_changed_nothing(
        monkeypatch, verb, atomic_requests):
    """Another transaction holds the job's row past the request's lock wait: a 409 that says
    so, not a 500, and the job as it was."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    job = job_in("failed")
    api = Api(make_token("manage", "read"))
    with short_lock_waits(), row_held(job):
        response = api.post(f"/api/jobs/{job.public_id}/{verb}")
    assert response.status_code == 409, response.content
    assert "at the same moment" in response.json()["detail"]
    assert end_state(job) == "failed"
