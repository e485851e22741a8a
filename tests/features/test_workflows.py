"""Workflows in one process: replay from the checkpoints, the lease fence on a step's commit,
determinism, sleeps by the database's clock, and events (kept, deduplicated, refused once the
workflow ended, raced by a timeout)."""

import uuid
from datetime import timedelta

import pytest
from django.test import override_settings

from django_jobs import send_event
from django_jobs.core import clock
from django_jobs.exceptions import InvalidJob, WorkflowFinished
from django_jobs.models import Job, WorkflowEvent, WorkflowStep
from django_jobs.worker.execution import run_job
from tests.models import Execution
from tests.workflow_jobs import CALLS, five_steps, replayed, waiting

pytestmark = pytest.mark.django_db(transaction=True)
S = Job.Status


def run_once(job):
    """Make ``job`` due, claim it, run it in this thread as a worker does, write its outcome."""
    Job.objects.filter(pk=job.pk).run_now()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert claimed.pk == job.pk
    Job.objects.finish([run_job(claimed)])
    job.refresh_from_db()
    return job


def keys(job):
    return list(WorkflowStep.objects.filter(job_id=job.pk).order_by("position")
                .values_list("key", flat=True))


def test_a_replay_returns_stored_results_without_running_the_steps_again():
    tag = uuid.uuid4().hex[:8]
    job = replayed.enqueue(tag, seconds=0.0)
    assert job.type == "wf_replay" and job.payload == {"tag": tag, "seconds": 0.0}
    job = run_once(job)
    assert job.status == S.COMPLETED and job.result == [{"price": 7}, 14]
    assert keys(job) == ["fetch#0", "sleep#0", "store#0"]
    assert CALLS[(tag, "fetch")] == 1 and CALLS[(tag, "store")] == 1


def test_a_sleep_ends_the_run_without_an_attempt_and_keeps_its_first_wake_time():
    tag = uuid.uuid4().hex[:8]
    job = run_once(replayed.enqueue(tag, seconds=3600.0))
    assert (job.status, job.attempt) == (S.PENDING, 0)
    wake = WorkflowStep.objects.get(job_id=job.pk, key="sleep#0").until
    assert abs((job.run_at - wake).total_seconds()) < 1
    assert wake - clock.now() > timedelta(minutes=59)
    job = run_once(job)  # woken early: the replay sleeps again until the same wake time
    assert job.status == S.PENDING
    assert WorkflowStep.objects.get(job_id=job.pk, key="sleep#0").until == wake
    assert CALLS[(tag, "fetch")] == 1  # replayed, not run again
    WorkflowStep.objects.filter(job_id=job.pk, key="sleep#0").update(
        until=clock.now() - timedelta(seconds=1))
    job = run_once(job)
    assert job.status == S.COMPLETED and job.result == [{"price": 7}, 14]
    assert CALLS[(tag, "fetch")] == 1 and CALLS[(tag, "store")] == 1


def test_the_decorated_step_is_numbered_by_call():
    job = run_once(Job.enqueue("wf_decorated", {"tag": "d"}))
    assert job.result == 3 and keys(job) == ["remember#0", "remember#1"]


def test_a_step_commit_after_the_lease_was_taken_over_is_refused_and_rolled_back():
    tag = uuid.uuid4().hex[:8]
    job = five_steps.enqueue(tag)
    (claimed,) = Job.objects.claim(worker_id="frozen", limit=1, lease_seconds=30)
    # another worker took the job over: the row's lease token is no longer this run's
    Job.objects.filter(pk=job.pk).update(lease_token=uuid.uuid4())
    outcome = run_job(claimed)
    assert outcome.error["type"] == "StepLeaseLost"
    assert not Execution.objects.filter(job_public_id=tag).exists()  # the step's write undone
    assert not WorkflowStep.objects.filter(job_id=job.pk).exists()


def test_a_replay_that_meets_another_step_goes_dead_naming_it():
    tag = uuid.uuid4().hex[:8]
    job = replayed.enqueue(tag, seconds=0.0)
    WorkflowStep.objects.create(job_id=job.pk, key="charge#0", position=0, kind="atomic",
                                result=1)
    job = run_once(job)
    assert job.status == S.DEAD and job.error["type"] == "WorkflowMismatch"
    assert "'fetch#0'" in job.error["message"] and "'charge#0'" in job.error["message"]
    assert (tag, "fetch") not in CALLS


@override_settings(DJANGO_JOBS={"MAX_WORKFLOW_STEPS": 3})
def test_a_history_past_max_workflow_steps_goes_dead():
    job = run_once(Job.enqueue("wf_loop", {"steps": 5}))
    assert job.status == S.DEAD and "MAX_WORKFLOW_STEPS (3)" in job.error["message"]
    assert keys(job) == ["n#0", "n#1", "n#2"]


def park(job):
    """Run ``job`` until it waits for its event (past its step and its short sleep)."""
    for _ in range(5):
        job = run_once(job)
        if WorkflowStep.objects.filter(job_id=job.pk, kind="wait").exists():
            return job
        WorkflowStep.objects.filter(job_id=job.pk, kind="sleep").update(
            until=clock.now() - timedelta(seconds=1))
    raise AssertionError("the workflow never reached its wait")


def test_an_event_wakes_the_waiting_workflow_and_a_duplicate_is_dropped():
    job = park(waiting.enqueue("e1"))
    assert job.status == S.PENDING and job.run_at - clock.now() > timedelta(seconds=30)
    assert send_event(job, "paid", {"amount": 5}, event_id="evt-1") is True
    job.refresh_from_db()
    assert job.run_at <= clock.now()  # due now
    assert send_event(job.pk, "paid", {"amount": 5}, event_id="evt-1") is False
    assert WorkflowEvent.objects.filter(job_id=job.pk).count() == 1
    job = run_once(job)
    assert job.status == S.COMPLETED and job.result == {"paid": {"amount": 5}}
    with pytest.raises(WorkflowFinished):
        send_event(job, "paid", {"amount": 6})


def test_an_event_sent_before_the_wait_is_kept_and_events_are_taken_in_order():
    job = Job.enqueue("wf_two_waits")
    send_event(job, "ping", 1)
    send_event(job, "ping", 2)
    job = run_once(job)
    assert job.status == S.COMPLETED and job.result == [1, 2]
    assert set(WorkflowEvent.objects.filter(job_id=job.pk).values_list("taken_by", flat=True)) \
        == {"wait:ping#0", "wait:ping#1"}


def test_a_timeout_that_passes_first_wins_and_a_later_event_is_kept():
    job = park(waiting.enqueue("t1", timeout=3600.0))
    WorkflowStep.objects.filter(job_id=job.pk, kind="wait").update(
        until=clock.now() - timedelta(seconds=1))
    job = run_once(job)
    assert job.status == S.COMPLETED and job.result == {"timeout": True}
    assert WorkflowStep.objects.get(job_id=job.pk, kind="wait").result == {"timeout": True}


def test_an_event_sent_while_the_run_is_parking_makes_it_due_at_its_finish():
    job = park(waiting.enqueue("r1"))
    Job.objects.filter(pk=job.pk).run_now()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    outcome = run_job(claimed)  # parks: no event yet
    send_event(job, "paid", "late")  # the job is still processing: nothing to make due
    Job.objects.finish([outcome])  # the finish sees the event and makes the job due
    job.refresh_from_db()
    assert job.status == S.PENDING and job.run_at <= clock.now()


def test_send_event_refuses_what_is_not_a_workflow_and_bad_arguments():
    plain = Job.enqueue("echo", {})
    with pytest.raises(InvalidJob):
        send_event(plain, "paid")
    job = waiting.enqueue("x")
    with pytest.raises(InvalidJob):
        send_event(job, "", None)
    with pytest.raises(InvalidJob):
        send_event(job, "paid", object())
    with pytest.raises(Job.DoesNotExist):
        send_event(job.pk + 1000, "paid")


@pytest.mark.django_db
def test_run_jobs_skips_sleeps_and_runs_a_workflow_with_its_event_injected():
    from django_jobs.testing import run_jobs

    job = waiting.enqueue("inline", timeout=3600.0)
    send_event(job, "paid", {"amount": 3})
    run_jobs(include_delayed=True)
    job.refresh_from_db()
    assert job.status == S.COMPLETED and job.result == {"paid": {"amount": 3}}


def test_retention_drops_the_steps_and_events_of_pruned_workflows_only():
    from django_jobs.features.retention import prune_workflow_histories

    gone, kept = Job.enqueue("wf_loop", {"steps": 1}), Job.enqueue("wf_loop", {"steps": 1})
    long_ago = clock.now() - timedelta(days=40)
    for job in (gone, kept):
        WorkflowStep.objects.create(job_id=job.pk, key="n#0", position=0, kind="plain",
                                    created_at=long_ago)
        WorkflowEvent.objects.create(job_id=job.pk, name="e", event_id="1", created_at=long_ago)
    Job.objects.filter(pk=gone.pk).delete()
    ages = {"completed": timedelta(days=7), "dead": timedelta(days=30),
            "canceled": timedelta(days=7)}
    assert prune_workflow_histories({**ages, "dead": None}, clock.now(), 10) == 0
    assert prune_workflow_histories(ages, clock.now(), 1) == 1
    assert set(WorkflowStep.objects.values_list("job_id", flat=True)) == {kept.pk}
    assert set(WorkflowEvent.objects.values_list("job_id", flat=True)) == {kept.pk}


@pytest.mark.django_db
def test_an_async_workflow_function_is_refused_at_registration():
    from django.core.exceptions import ImproperlyConfigured

    from django_jobs import workflow

    with pytest.raises(ImproperlyConfigured, match="not async def"):
        @workflow("wf_async_refused")
        async def refused() -> None:
            pass


def test_a_query_outside_a_step_is_logged_once_and_steps_are_not(caplog):
    with caplog.at_level("WARNING", logger="django_jobs.workflows"):
        quiet = run_once(Job.enqueue("wf_loop", {"steps": 3}))
        assert quiet.status == S.COMPLETED and not caplog.records
        job = run_once(Job.enqueue("wf_reads_outside"))
    assert job.status == S.COMPLETED
    (record,) = caplog.records
    assert "outside a step" in record.getMessage() and job.public_id in record.getMessage()


def test_a_parked_workflow_is_canceled_at_once_and_then_refuses_events():
    job = park(waiting.enqueue("c1"))
    assert job.cancel() is True
    job.refresh_from_db()
    assert job.status == S.CANCELED
    with pytest.raises(WorkflowFinished):
        send_event(job, "paid", 1)
    assert not WorkflowEvent.objects.filter(job_id=job.pk).exists()


def test_step_key_is_the_workflow_and_the_step_and_only_inside_a_step():
    from django_jobs import step_key

    job = run_once(Job.enqueue("wf_keys"))
    assert job.result == [f"{job.public_id}:call#0", f"{job.public_id}:call#1"]
    with pytest.raises(RuntimeError):
        step_key()


def test_a_version_marker_keeps_old_histories_on_the_old_path_and_new_runs_on_the_new():
    new = run_once(Job.enqueue("wf_patched", {"tag": "p-new"}))
    assert new.result == ["first", "check", "last"]
    assert keys(new) == ["first#0", "patch:check#0", "check#0", "last#0"]
    old = Job.enqueue("wf_patched", {"tag": "p-old"})  # its history written by the old code
    for position, key in enumerate(["first#0", "old#0"]):
        WorkflowStep.objects.create(job_id=old.pk, key=key, position=position, kind="atomic",
                                    result=key[:-2])
    old = run_once(old)
    assert old.status == S.COMPLETED and old.result == ["first", "old", "last"]
    assert keys(old) == ["first#0", "old#0", "last#0"]


def test_a_workflow_that_returns_before_the_end_of_its_history_goes_dead():
    job = Job.enqueue("wf_loop", {"steps": 1})
    for position in range(2):
        WorkflowStep.objects.create(job_id=job.pk, key=f"n#{position}", position=position,
                                    kind="atomic", result=position)
    job = run_once(job)
    assert job.status == S.DEAD and job.error["type"] == "WorkflowMismatch"
    assert "returned at step 1" in job.error["message"] and "'n#1'" in job.error["message"]


def test_the_job_page_shows_a_workflows_steps_and_a_plain_jobs_page_no_section(client):
    from tests.admin_helpers import job_url, staff

    client.force_login(staff("admin", superuser=True))
    job = run_once(replayed.enqueue("admin", seconds=3600.0))
    page = client.get(job_url(job)).content.decode()
    assert "Workflow steps" in page and "fetch#0" in page and "sleep#0" in page
    assert "{&quot;price&quot;: 7}" in page
    plain = Job.enqueue("echo", {})
    assert "Workflow steps" not in client.get(job_url(plain)).content.decode()
