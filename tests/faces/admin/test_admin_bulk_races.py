"""The admin's list actions (retry, cancel, run now, delete selected) sent at the same moment as
each other and as the job page's buttons, with and without ``ATOMIC_REQUESTS``, never answer
500: each job ends as the actions, one at a time in some order, leave it. A list action does
the whole selection in one transaction: one that cannot get a row says so and changes none of
the selected jobs. Against a real worker finishing the jobs, no job it completed keeps a cancel
request."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client

from django_jobs.models import Job
from tests.conftest import requires_row_locks, wait_for
from tests.faces.admin.test_admin_races import operator, request
from tests.races import Raised, at_once, end_state, job_in, row_held, serially, short_lock_waits

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/django_jobs/job/"
ACTION = {"retry": "retry_jobs", "cancel": "cancel_jobs", "run_now": "run_jobs_now",
          "delete": "delete_jobs"}
STARTS = ("dead", "failed", "canceled", "processing")
CONFLICT = "at the same moment"  # in what an action says when it met another head on

# Two operators' list actions over the same jobs, and a third's button on one of them.
SETS = [
    ("retry", "cancel", "delete"),
    ("cancel", "delete", "retry"),
    ("delete", "retry", "cancel"),
    ("run_now", "cancel", "edit"),
    ("retry", "run_now", "cancel"),
    ("cancel", "cancel", "run_now"),
]
ROUNDS = 2  # per set: each round's button goes to another job


def started(status: str) -> Job:
    """A job in ``status``; a processing one as a worker's claim leaves it."""
    if status != "processing":
        return job_in(status)
    job = job_in("pending")
    assert Job.objects.filter(pk=job.pk, status="pending").update(
        status="processing", worker_id="w-1", attempt=job.attempt + 1)
    job.refresh_from_db()
    return job


def said(response) -> list[str]:
    """What this request said: its own messages, not those an earlier answer left unread in
    the client's cookie (the racing requests follow no redirect, so none reads them)."""
    return [str(m) for m in get_messages(response.wsgi_request)._queued_messages]


def bulk(client: Client, verb: str, jobs: list[Job], **extra):
    """The changelist's POST of ``verb`` over ``jobs``; a delete's is its confirmation page's."""
    data = {"action": ACTION[verb], ACTION_CHECKBOX_NAME: [j.pk for j in jobs], "index": 0}
    if verb == "delete":
        data["post"] = "yes"
    return client.post(LIST, data, **extra)


def sent_bulk(client: Client, verb: str, jobs: list[Job]):
    """A list action, as a person sends it; a delete first asks for its confirmation page
    (which counts the selection while the others act). Its answers and what it said."""
    def send():
        answers = []
        if verb == "delete":
            page = client.post(LIST, {"action": ACTION[verb], "index": 0,
                                      ACTION_CHECKBOX_NAME: [j.pk for j in jobs]})
            answers.append(page.status_code)
        response = bulk(client, verb, jobs)
        return [*answers, response.status_code], said(response)
    return send


def sent_page(client: Client, job: Job, verb: str):
    def send():
        response = request(client, job, verb)
        return [response.status_code], said(response)
    return send


def acted(verbs: list[str], results: list[tuple[list[int], list[str]]]) -> list[str]:
    """The verbs that may have changed something: one that met another head on says so and
    changes nothing."""
    return [verb for verb, (_, text) in zip(verbs, results, strict=True)
            if not any(CONFLICT in line for line in text)]


@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
def test_list_actions_at_once_with_each_other_and_a_job_page_end_as_some_order(
        monkeypatch, atomic_requests):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    first, second, third = operator(), operator(), operator()
    for one, other, button in SETS:
        for round_ in range(ROUNDS):
            jobs = [started(status) for status in STARTS]
            # the payload's edit is for a dead job; the other buttons go round the four
            target = jobs[0] if button == "edit" else jobs[(round_ + SETS.index(
                (one, other, button))) % len(jobs)]
            results = at_once([sent_bulk(first, one, jobs), sent_bulk(second, other, jobs),
                               sent_page(third, target, button)])
            assert not [r for r in results if isinstance(r, Raised)], results
            (one_codes, _), (other_codes, _), (page_codes, _) = results
            for verb, codes in ((one, one_codes), (other, other_codes)):
                # a redirect back to the list; a delete's confirmation page first
                assert codes == ([200, 302] if verb == "delete" else [302]), results
            assert set(page_codes) <= {302, 404}, results  # 404: the job deleted first
            for job, start in zip(jobs, STARTS, strict=True):
                verbs = [one, other, button] if job.pk == target.pk else [one, other]
                done = acted(verbs, results[:len(verbs)])
                ends = {status for status, _ in serially(start, done, lambda v, s: "")}
                assert end_state(job) in ends, (start, verbs, results)


# Each list action over four jobs, and the selected job another transaction holds: one the
# action applies to (a scheduled failed job: retry, cancel and run now all take it).
HELD = 1


@requires_row_locks
@pytest.mark.parametrize("atomic_requests", [False, True], ids=["autocommit", "atomic"])
@pytest.mark.parametrize("verb", ["retry", "cancel", "run_now", "delete"])
def test_a_list_action_that_cannot_get_one_row_says_so_and_changes_none_of_the_jobs(
        monkeypatch, verb, atomic_requests):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic_requests)
    jobs = [started(status) for status in ("dead", "failed", "canceled", "pending")]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(
        run_at=jobs[HELD].run_at.replace(year=2100))
    before = [seen(j) for j in jobs]
    client = operator()
    with short_lock_waits(), row_held(jobs[HELD]):
        response = bulk(client, verb, jobs, follow=True)
    assert response.redirect_chain[-1][0] == LIST
    text = [str(m) for m in get_messages(response.wsgi_request)]  # shown on the list
    assert len(text) == 1 and CONFLICT in text[0] and text[0].startswith("Nothing changed"), text
    assert [seen(j) for j in jobs] == before
    # sent again once the row is free, it acts on the jobs it applies to
    assert bulk(client, verb, jobs).status_code == 302
    for job, (start, run_at) in zip(jobs, before, strict=True):
        assert end_state(job) in {status for status, _ in serially(start, [verb], lambda v, s: "")}
        if verb == "run_now" and start in ("pending", "failed"):
            assert seen(job)[1] < run_at
    assert [seen(j) for j in jobs] != before


def seen(job: Job) -> tuple[str | None, object]:
    """The job's end state and when it is due (None: it is gone)."""
    return end_state(job), Job.objects.filter(pk=job.pk).values_list("run_at", flat=True).first()


# A heartbeat (which reads the cancel requests) slower than a job: many a job asked to stop
# completes before its worker reads the request.
WORKER = ["--concurrency", "4", "--heartbeat", "1", "--lease", "10", "--poll-interval", "0.1"]


def test_list_cancels_and_retries_while_a_worker_completes_the_jobs(start_worker):
    """Cancel and retry over every job, at once and again and again, while a real worker
    claims and completes them: no 500, and no job ends with a cancel request (a completed job
    carries none; a running one asked to stop ends canceled or completed, its request
    cleared)."""
    jobs = [Job.enqueue("slow", {"seconds": 0.2}) for _ in range(24)]
    first, second = operator(), operator()
    worker = start_worker(*WORKER)
    wait_for(lambda: Job.objects.filter(status="processing").exists())
    asked = 0
    for _ in range(40):  # until no job is left to run, the last ones canceled or completed
        results = at_once([sent_bulk(first, "cancel", jobs), sent_bulk(second, "retry", jobs)])
        assert not [r for r in results if isinstance(r, Raised)], results
        assert [codes for codes, _ in results] == [[302], [302]], results
        asked += sum("asked to stop" in line for line in results[0][1])
        if not Job.objects.filter(status__in=("pending", "processing")).exists():
            break
    wait_for(lambda: not Job.objects.filter(status__in=("pending", "processing")).exists(),
             timeout=120)
    assert worker.proc.poll() is None, worker.output()
    assert asked  # some cancel found a job running
    ends = list(Job.objects.values_list("status", "cancel_requested"))
    assert {status for status, _ in ends} <= {"completed", "canceled"}, ends
    assert not [end for end in ends if end[1]], ends
    assert Job.objects.filter(status="completed").exists()
