"""List actions and job-page buttons: each acts on the rows it applies to, says what it did,
and needs its own permission."""

from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.messages import get_messages
from django.utils import timezone

from django_jobs.models import Job, JobAttempt
from tests.admin_helpers import add_attempt, job_url, make_job, staff

LIST = "/admin/django_jobs/job/"
pytestmark = pytest.mark.django_db


def act(client, action: str, jobs, **extra):
    data = {"action": action, ACTION_CHECKBOX_NAME: [j.pk for j in jobs], "index": 0, **extra}
    return client.post(LIST, data, follow=True)


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def statuses(jobs) -> list[str]:
    return [Job.objects.get(pk=j.pk).status for j in jobs]


@pytest.fixture
def operator(client):
    client.force_login(staff("op", "view_job", "retry_job", "cancel_job", "change_job",
                             "delete_job"))
    return client


def test_retry_acts_on_dead_failed_and_canceled_jobs_and_names_the_skipped(operator):
    dead, failed, canceled = make_job("dead"), make_job("failed"), make_job("canceled")
    done1, done2 = make_job("completed"), make_job("completed")
    add_attempt(dead, "dead")
    response = act(operator, "retry_jobs", [dead, failed, canceled, done1, done2])
    assert said(response) == ["3 jobs retried; 2 skipped: already completed"]
    assert statuses([dead, failed, canceled, done1, done2]) == ["pending"] * 3 + ["completed"] * 2
    assert JobAttempt.objects.filter(job=dead).count() == 1  # history kept
    dead.refresh_from_db()
    assert dead.max_attempts == dead.attempt + 1 and dead.run_at <= timezone.now()


def test_retry_across_every_filtered_row(operator):
    dead = [make_job("dead") for _ in range(3)]
    make_job("completed")
    response = operator.post(LIST + "?status__exact=dead", {
        "action": "retry_jobs", ACTION_CHECKBOX_NAME: [dead[0].pk], "select_across": 1,
        "index": 0,
    }, follow=True)
    assert said(response) == ["3 jobs retried"]
    assert statuses(dead) == ["pending"] * 3


def test_cancel_cancels_waiting_jobs_and_asks_running_ones_to_stop(operator):
    pending, failed, running = make_job("pending"), make_job("failed"), make_job("processing")
    done, dead = make_job("completed"), make_job("dead")
    response = act(operator, "cancel_jobs", [pending, failed, running, done, dead])
    assert said(response) == [
        "2 jobs canceled; 1 job running, asked to stop; 1 skipped: already completed; "
        "1 skipped: dead (retry or delete it instead)"
    ]
    assert statuses([pending, failed, running, done, dead]) == [
        "canceled", "canceled", "processing", "completed", "dead"]
    assert Job.objects.get(pk=running.pk).cancel_requested


def test_run_now_makes_scheduled_jobs_due_and_skips_the_rest(operator):
    later = make_job("pending", run_at=timezone.now() + timedelta(hours=2))
    due = make_job("pending", run_at=timezone.now() - timedelta(seconds=1))
    done = make_job("completed")
    response = act(operator, "run_jobs_now", [later, due, done])
    assert said(response) == [
        "1 job made due now; 1 skipped: already completed; "
        "1 skipped: not waiting for a later time"
    ]
    assert Job.objects.get(pk=later.pk).run_at <= timezone.now()


def test_delete_asks_first_then_deletes_all_but_running_jobs_with_their_attempts(operator):
    dead, done, running = make_job("dead"), make_job("completed"), make_job("processing")
    add_attempt(dead)
    page = act(operator, "delete_jobs", [dead, done, running])
    html = page.content.decode()
    assert "2 jobs and all their attempts will be deleted" in html
    assert "1 running job will be left alone" in html
    assert Job.objects.count() == 3  # nothing yet
    response = act(operator, "delete_jobs", [dead, done, running], post="yes")
    assert said(response) == ["2 jobs deleted; 1 skipped: running now (cancel it first)"]
    assert list(Job.objects.values_list("pk", flat=True)) == [running.pk]
    assert not JobAttempt.objects.filter(job_id=dead.pk).exists()


@pytest.mark.parametrize(
    ("action", "missing", "status"),
    [
        ("retry_jobs", "retry_job", "dead"),
        ("cancel_jobs", "cancel_job", "pending"),
        ("run_jobs_now", "change_job", "pending"),
        ("delete_jobs", "delete_job", "dead"),
    ],
)
def test_each_action_needs_its_own_permission(client, action, missing, status):
    perms = {"view_job", "retry_job", "cancel_job", "change_job", "delete_job"} - {missing}
    client.force_login(staff("partial", *perms))
    job = make_job(status, run_at=timezone.now() + timedelta(hours=1))
    assert action not in client.get(LIST).content.decode()
    act(client, action, [job], post="yes")
    after = Job.objects.filter(pk=job.pk).first()
    assert after is not None and after.status == status
    assert after.run_at > timezone.now()


def test_a_viewer_sees_no_actions_at_all(client):
    client.force_login(staff("viewer", "view_job"))
    make_job("dead")
    html = client.get(LIST).content.decode()
    for action in ("retry_jobs", "cancel_jobs", "run_jobs_now", "delete_jobs"):
        assert action not in html


# The job page's buttons.


def test_job_page_offers_the_buttons_that_apply(operator):
    assert "Retry</button>" in operator.get(job_url(make_job("dead"))).content.decode()
    pending_page = operator.get(job_url(make_job("pending"))).content.decode()
    assert "Cancel</button>" in pending_page and "Retry</button>" not in pending_page
    running_page = operator.get(job_url(make_job("processing"))).content.decode()
    assert "Ask worker to cancel</button>" in running_page
    done_page = operator.get(job_url(make_job("completed"))).content.decode()
    assert "dj-jobs-button" not in done_page


def test_job_page_retry_button_retries_and_says_so(operator):
    job = make_job("dead")
    url = job_url(job).replace("/change/", "/do/retry/")
    response = operator.post(url, follow=True)
    assert said(response) == ["1 job retried"]
    assert response.redirect_chain[-1][0] == job_url(job)
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_job_page_cancel_on_a_running_job_requests_the_cancel(operator):
    job = make_job("processing")
    operator.post(job_url(job).replace("/change/", "/do/cancel/"))
    job.refresh_from_db()
    assert (job.status, job.cancel_requested) == ("processing", True)


def test_job_page_buttons_need_post_and_the_permission(client):
    client.force_login(staff("viewer", "view_job"))
    job = make_job("dead")
    url = job_url(job).replace("/change/", "/do/retry/")
    assert "Retry</button>" not in client.get(job_url(job)).content.decode()
    assert client.post(url).status_code == 403
    assert client.get(url).status_code == 405
    assert Job.objects.get(pk=job.pk).status == "dead"


def test_an_unknown_button_verb_or_job_is_404(operator):
    job = make_job("dead")
    assert operator.post(job_url(job).replace("/change/", "/do/explode/")).status_code == 404
    assert operator.post(LIST + "not-a-number/do/retry/").status_code == 404
    assert operator.post(LIST + "999999/do/retry/").status_code == 404
    assert operator.get(LIST + "abc/edit-payload/").status_code == 404


def test_the_delete_page_refuses_a_running_job(operator):
    job = make_job("processing")
    assert operator.get(job_url(job, "delete")).status_code == 403
    assert operator.post(job_url(job, "delete"), {"post": "yes"}).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()


def test_the_delete_page_deletes_an_idle_job(operator):
    job = make_job("dead")
    add_attempt(job)
    operator.post(job_url(job, "delete"), {"post": "yes"})
    assert not Job.objects.filter(pk=job.pk).exists()
    assert not JobAttempt.objects.filter(job_id=job.pk).exists()
