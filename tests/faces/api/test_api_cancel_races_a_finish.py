"""A cancel that races a real worker finishing the job: the job ends completed or canceled as
one order or the other gives, and a job that ended carries no pending cancel request."""

from __future__ import annotations

import time

import pytest

from django_jobs.models import Job
from tests.api_support import Api, make_token
from tests.conftest import requires_row_locks

pytestmark = [pytest.mark.django_db(transaction=True), requires_row_locks]

JOBS = 40


def test_cancels_sent_while_a_worker_finishes_the_jobs_leave_no_request_on_ended_jobs(
        start_worker):
    # Each handler runs a fifth of a second; the worker reads cancel requests at its
    # heartbeat, every 5 s: most requests come while a handler runs and find it finished.
    jobs = [Job.enqueue("slow", {"seconds": 0.2}) for _ in range(JOBS)]
    api = Api(make_token("manage", "read"))
    worker = start_worker("--burst", "--concurrency", "4", "--heartbeat", "5", "--lease", "30")
    answers: dict[str, list[int]] = {job.public_id: [] for job in jobs}
    deadline = time.monotonic() + 120
    while worker.proc.poll() is None and time.monotonic() < deadline:
        running = Job.objects.filter(status=Job.Status.PROCESSING, cancel_requested=False)
        for public_id in running.values_list("public_id", flat=True):
            response = api.post(f"/api/jobs/{public_id}/cancel")
            assert response.status_code in (200, 202, 409), response.content
            answers[public_id].append(response.status_code)
    assert worker.wait(timeout=60) == 0, worker.output()

    asked = [public_id for public_id, codes in answers.items() if 202 in codes]
    assert asked, "no cancel reached a running job"
    ended = {row["public_id"]: row for row in Job.objects.values(
        "public_id", "status", "cancel_requested")}
    assert {row["status"] for row in ended.values()} <= {"completed", "canceled"}
    assert [row for row in ended.values() if row["cancel_requested"]] == []
    # A job canceled went through a request its worker read; one that completed either
    # finished before the request was read, or before it came (a 409).
    for public_id, codes in answers.items():
        if ended[public_id]["status"] == "canceled":
            assert 202 in codes, (public_id, codes)
