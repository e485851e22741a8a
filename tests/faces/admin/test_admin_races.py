"""Concurrent actions on one job through the admin's job page (retry, cancel, run now, the
payload's edit, delete) never answer 500, with and without ``ATOMIC_REQUESTS``: the job ends
as the actions, one at a time in some order, leave it; one that cannot get the job says so."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client

from django_jobs.models import Job
from tests.admin_helpers import job_url, staff
from tests.conftest import requires_row_locks
from tests.races import (
    Raised,
    at_once,
    claimed_once_waited_on,
    end_state,
    job_in,
    row_held,
    serially,
    short_lock_waits,
)

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 5  # per start state and set of actions: 50 rounds of three actions per test

SETS = [
    ("dead", ("retry", "cancel", "delete")),
    ("dead", ("edit", "retry", "delete")),
    ("failed", ("retry", "cancel", "run_now")),
    ("failed", ("cancel", "delete", "retry")),
    ("canceled", ("retry", "cancel", "delete")),
]


def operator() -> Client:
    client = Client()
    client.force_login(staff_user())
    return client


def staff_user():
    from django.contrib.auth.models import User

    found = User.objects.filter(username="op").first()
    return found or staff("op", "view_job", "retry_job", "cancel_job", "change_job",
                          "delete_job")


def request(client: Client, job: Job, verb: str, **extra):
    """The admin's request for ``verb`` on ``job``, as its page's buttons and forms send it."""
    if verb == "delete":
        return client.post(job_url(job, "delete"), {"post": "yes"}, **extra)
    if verb == "edit":
        return client.post(job_url(job).replace("/change/", "/edit-payload/"),
                           {"payload": '{"fixed": true}'}, **extra)
    return client.post(job_url(job).replace("/change/", f"/do/{verb}/"), **extra)


def send(client: Client, job: Job, verb: str):
    return lambda: request(client, job, verb).status_code


@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
def test_actions_on_one_job_at_once_end_as_some_order_of_them(monkeypatch, atomic_requests):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    clients = [operator() for _ in range(3)]
    for start, verbs in SETS:
        for _ in range(ROUNDS):
            job = job_in(start)
            sent = [send(client, job, verb) for client, verb in zip(clients, verbs, strict=True)]
            answers = at_once(sent)
            assert not [a for a in answers if isinstance(a, Raised)], answers
            # a redirect back to the job (or the list), or 404 for a job deleted first
            assert set(answers) <= {302, 404}, answers
            ends = {status for status, _ in serially(start, verbs, lambda verb, status: "")}
            assert end_state(job) in ends, (start, verbs, answers)


@requires_row_locks
@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
@pytest.mark.parametrize("verb", ["retry", "cancel", "run_now", "edit", "delete"])
def test_an_action_that_cannot_get_the_job_says_so_and_changes_nothing(
        monkeypatch, verb, atomic_requests):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    job = job_in("dead" if verb in ("edit", "delete") else "failed")
    Job.objects.filter(pk=job.pk).update(run_at=job.run_at.replace(year=2100))
    start = end_state(job)
    client = operator()
    with short_lock_waits(), row_held(job):
        response = request(client, job, verb, follow=True)
    assert response.redirect_chain[-1][0] == job_url(job)
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("at the same moment" in text for text in said), said
    assert end_state(job) == start


@requires_row_locks
def test_a_job_a_worker_claims_while_its_delete_is_confirmed_is_kept_and_the_page_says_so():
    """The delete page read the job pending; a worker claimed it before the delete got its row:
    the job is kept, as the claim then the delete give, and the admin does not say deleted."""
    job = job_in("pending")
    client = operator()
    with claimed_once_waited_on(job):
        response = request(client, job, "delete", follow=True)
    assert response.redirect_chain[-1][0] == job_url(job)
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == [f"{job}: not deleted: running now (cancel it first)"], said
    assert end_state(job) == "processing"
