"""Snooze, follow-ups that commit with the completion, dependencies, and progress, for sync
handlers and their ``async def`` twins (tests/async_handlers.py)."""

import pytest
from django.utils import timezone

from django_jobs import InvalidJob, Snooze, enqueue_after_success, set_progress
from django_jobs.features.dependencies import JobDependency
from django_jobs.models import Job, JobAttempt
from django_jobs.worker.execution import query_thread, run_job
from django_jobs.worker.heartbeat import ReleaseWaiting
from tests.conftest import wait_for


def run_once(expected=None):
    """Claim one job, run it in this thread as a worker does, and write its outcome."""
    (job,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    if expected is not None:
        assert job.pk == expected.pk
    with query_thread("test-queries"):  # an async handler's queries, as in a slot thread
        outcome = run_job(job)
    Job.objects.finish([outcome])
    job.refresh_from_db()
    return job


def twins(name):
    """Run a test for the sync fixture handler ``name`` and for its async twin."""
    return pytest.mark.parametrize("type", [name, f"async_{name}"])


@pytest.mark.django_db(transaction=True)
@twins("snoozer")
def test_a_snooze_runs_the_job_again_without_spending_an_attempt(type):
    job = Job.enqueue(type, {"times": 2})
    assert run_once(job).status == "pending"
    again = run_once(job)
    assert again.status == "pending" and again.attempt == 0 and again.max_attempts == 1
    done = run_once(job)
    assert done.status == "completed" and done.result == {"snoozed": 2, "attempt": 1}
    outcomes = list(JobAttempt.objects.filter(job=job).values_list("outcome", flat=True))
    assert outcomes == ["snoozed", "snoozed", "completed"]


@pytest.mark.django_db(transaction=True)
@twins("snoozer")
def test_a_snoozed_job_waits_for_its_delay(type):
    job = Job.enqueue(type, {"times": 1, "seconds": 3600})
    before = timezone.now()
    snoozed = run_once(job)
    assert snoozed.status == "pending" and snoozed.run_at > before.replace(microsecond=0)
    assert (snoozed.run_at - before).total_seconds() > 3500
    assert Job.objects.claim(worker_id="w", limit=1, lease_seconds=30) == []


@pytest.mark.parametrize("seconds", [-1, "soon", float("nan"), True])
def test_a_bad_snooze_is_refused(seconds):
    with pytest.raises(ValueError):
        Snooze(seconds)


@pytest.mark.django_db(transaction=True)
@twins("with_followup")
def test_follow_ups_are_enqueued_only_when_the_handler_completes(type):
    ok = Job.enqueue(type)
    run_once(ok)
    follow = Job.objects.get(type="echo")
    assert follow.payload == {"after": ok.public_id} and follow.status == "pending"
    failed = run_once_for(Job.enqueue(type, {"fail": True}), skip=follow)
    assert failed.status == "dead"
    assert Job.objects.filter(type="echo").count() == 1


def run_once_for(job, skip):
    Job.objects.filter(pk=skip.pk).update(status="canceled")  # keep the claim on ``job``
    return run_once(job)


@pytest.mark.django_db(transaction=True)
def test_a_bad_follow_up_fails_the_handler_at_once():
    job = run_once(Job.enqueue("with_followup", {"then": "no_such_type"}))
    assert job.status == "dead" and job.error["type"] == "UnknownJobType"
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_sync_set_progress_in_an_async_handler_fails_it_naming_aset_progress():
    job = run_once(Job.enqueue("async_sync_progress"))
    assert job.error["type"] == "SynchronousOnlyOperation"
    assert "aset_progress" in job.error["message"] and job.progress is None


def test_handler_helpers_refuse_to_run_outside_a_worker():
    with pytest.raises(RuntimeError):
        enqueue_after_success("echo")
    with pytest.raises(RuntimeError):
        set_progress(0.5)


@pytest.mark.django_db(transaction=True)
def test_a_job_waits_until_all_its_dependencies_complete():
    a, b = Job.enqueue("echo", {"n": "a"}), Job.enqueue("echo", {"n": "b"})
    c = Job.enqueue("echo", {"n": "c"}, depends_on=[a, b.pk])
    assert c.status == "waiting"
    assert JobDependency.objects.filter(job=c).count() == 2
    first = run_once(a)
    assert first.pk == a.pk
    c.refresh_from_db()
    assert c.status == "waiting"
    run_once(b)
    c.refresh_from_db()
    assert c.status == "pending"
    assert run_once(c).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_depending_on_completed_jobs_is_pending_at_once_and_many_share_the_links():
    a = run_once(Job.enqueue("echo"))
    jobs = Job.enqueue_many("echo", [{"i": 1}, {"i": 2}], depends_on=[a])
    assert [j.status for j in jobs] == ["pending", "pending"]
    assert JobDependency.objects.filter(depends_on=a).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_dependent_missed_by_the_finish_is_released_by_the_heartbeat_sweep():
    """The finishing worker read ``has_dependents`` before the dependent was enqueued."""
    Job.enqueue("echo")
    (a,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    c = Job.enqueue("echo", {"n": "c"}, depends_on=[a])
    assert c.status == "waiting" and not a.has_dependents  # the worker's stale copy
    Job.objects.finish([run_job(a)])
    c.refresh_from_db()
    assert c.status == "waiting"
    ReleaseWaiting()()
    c.refresh_from_db()
    assert c.status == "pending"


@pytest.mark.django_db(transaction=True)
def test_a_waiting_job_can_be_canceled():
    a = Job.enqueue("echo")
    c = Job.enqueue("echo", depends_on=[a])
    assert c.cancel() and c.status == "canceled"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("depends_on", [[999999], "j-1", [1.5], 7])
def test_bad_dependencies_are_refused_and_insert_nothing(depends_on):
    with pytest.raises(InvalidJob) as err:
        Job.enqueue("echo", depends_on=depends_on)
    assert "depends_on" in err.value.message_dict
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@twins("progressing")
def test_progress_is_stored_on_the_job_while_it_runs(type):
    job = run_once(Job.enqueue(type, {"fraction": 0.75, "message": "x" * 300}))
    assert job.status == "completed" and job.result == {"recorded": [True, True]}
    assert job.progress == {"fraction": 0.75, "message": "x" * 200}
    assert job.progress_fraction == 0.75 and job.progress_message == "x" * 200


@pytest.mark.django_db(transaction=True)
@twins("progressing")
@pytest.mark.parametrize("fraction", [1.5, -0.1, "half", None])
def test_bad_progress_fails_the_handler_with_a_clear_error(fraction, type):
    job = run_once(Job.enqueue(type, {"fraction": fraction}))
    assert job.error["type"] == "InvalidJob" and "progress" in job.error["message"]


@pytest.mark.django_db(transaction=True)
def test_progress_of_a_job_no_longer_held_is_not_written():
    job = Job.enqueue("echo")
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    Job.objects.filter(pk=job.pk).update(lease_token=None)  # taken over
    assert Job.objects.record_progress(claimed, 0.5, "late") is False
    job.refresh_from_db()
    assert job.progress is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_worker_runs_a_chain_in_order_with_its_follow_up(start_worker):
    first = Job.enqueue("with_followup")
    second = Job.enqueue("echo", {"n": 2}, depends_on=[first])
    worker = start_worker("--concurrency", "2", "--heartbeat", "0.5", "--lease", "5")
    wait_for(lambda: Job.objects.filter(status="completed").count() == 3, timeout=60)
    worker.stop()
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.started_at >= first.finished_at
    assert Job.objects.get(payload__after=first.public_id).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_two_dependencies_completing_at_once_release_the_dependent_without_the_sweep():
    """Two finish transactions race; the dependent's row lock orders them, so the second to
    commit sees the first dependency completed and releases the waiting job at once."""
    import threading

    from django.db import connection

    a, b = Job.enqueue("echo", {"n": "a"}), Job.enqueue("echo", {"n": "b"})
    c = Job.enqueue("echo", {"n": "c"}, depends_on=[a, b])
    claimed = Job.objects.claim(worker_id="w", limit=2, lease_seconds=30)
    assert {j.pk for j in claimed} == {a.pk, b.pk} and all(j.has_dependents for j in claimed)
    barrier = threading.Barrier(2)
    errors = []

    def finish(job):
        try:
            barrier.wait()
            now = timezone.now()
            from django_jobs.core.outcomes import AttemptOutcome

            Job.objects.finish([AttemptOutcome(job=job, kind="completed", started_at=now,
                                               finished_at=now)])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=finish, args=(job,)) for job in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    c.refresh_from_db()
    assert c.status == "pending"
