"""Actions over a filter: the set is frozen at confirmation (later jobs are never reached), no
job is acted on twice (retrying every dead job ends), a stopped action goes on from its place,
an unknown filter is refused, and a real worker runs the action's job."""

import pytest
from django.core.management import CommandError, call_command

from django_jobs.features import bulk_actions
from django_jobs.models import BulkAction, Job
from tests.admin_helpers import make_job

pytestmark = pytest.mark.django_db(transaction=True)


def dead_jobs(n: int, **fields) -> list[Job]:
    return [make_job("dead", **fields) for _ in range(n)]


def test_retrying_every_dead_job_reaches_each_once_and_never_a_later_one():
    dead = dead_jobs(5)
    action = bulk_actions.start("retry", {"status": "dead"})
    assert (action.matched, action.matched_capped) == (5, False)
    later = make_job("dead")  # enqueued after the confirmation: outside the frozen set
    steps = 0
    while bulk_actions.step(action, batch=2):
        steps += 1
        # Every job retried so far dies again at once: the action must not meet it again.
        Job.objects.filter(pk__in=[j.pk for j in dead], status="pending").update(status="dead")
    assert steps == 3
    action.refresh_from_db()
    assert (action.changed, action.skipped) == (5, 0)
    assert action.finished_at is not None and action.cursor == dead[-1].pk
    assert Job.objects.get(pk=later.pk).status == "dead"


def test_an_action_goes_on_from_its_place_after_a_stop():
    dead_jobs(4)
    action = bulk_actions.start("retry", {"status": ["dead"]})
    assert bulk_actions.step(action, batch=3)
    # The job that ran it was lost; another run of it reads the action's row again.
    Job.objects.filter(status="pending").exclude(type=bulk_actions.TYPE).update(status="dead")
    again = BulkAction.objects.get(pk=action.pk)
    while bulk_actions.step(again, batch=3):
        pass
    assert (again.changed, again.skipped) == (4, 0)
    assert Job.objects.filter(status="pending").exclude(type=bulk_actions.TYPE).count() == 1


def test_jobs_a_verb_does_not_apply_to_are_skipped_and_counted():
    make_job("completed", type="report")
    make_job("processing", type="report")
    make_job("pending", type="report")
    action = bulk_actions.start("delete", {"type": "report"})
    while bulk_actions.step(action):
        pass
    assert (action.changed, action.skipped) == (2, 1)
    assert list(Job.objects.filter(type="report").values_list("status", flat=True)) == [
        "processing"]


def test_the_actions_own_job_is_never_in_its_set():
    first = bulk_actions.start("cancel", {})
    second = bulk_actions.start("cancel", {"status": "pending"})
    while bulk_actions.step(second):
        pass
    assert Job.objects.get(pk=first.job_id).status == "pending"
    assert second.changed == 0


@pytest.mark.parametrize(("spec", "message"), [
    ({"colour": "red"}, "cannot act over a filter on colour"),
    ({"status": "asleep"}, "unknown status 'asleep'"),
    ({"priority": "urgent"}, "priority must be one of"),
    ({"created_from": "yesterday"}, "created_from must be a date and time"),
])
def test_a_filter_it_cannot_follow_is_refused_and_nothing_starts(spec, message):
    with pytest.raises(bulk_actions.BadSpec, match=message):
        bulk_actions.start("retry", spec)
    assert not BulkAction.objects.exists() and not Job.objects.exists()


def test_a_real_worker_runs_the_action(start_worker):
    dead_jobs(7, type="echo")
    action = bulk_actions.start("cancel", {"status": "pending"})  # nothing pending but itself
    retry = bulk_actions.start("retry", {"status": "dead", "type": "echo"})
    assert start_worker("--burst").wait() == 0
    retry.refresh_from_db()
    action.refresh_from_db()
    assert (retry.changed, retry.finished_at is not None) == (7, True)
    assert action.finished_at is not None and action.changed == 0
    job = Job.objects.get(pk=retry.job_id)
    assert job.status == "completed" and job.result == {"changed": 7, "skipped": 0}
    # The retried jobs ran too, in the same burst or after it; none is dead any more.
    assert not Job.objects.filter(type="echo", status="dead").exists()


def test_the_command_counts_first_and_starts_with_yes(capsys):
    dead_jobs(3, type="email.send")
    call_command("jobs", "bulk", "retry", "--status", "dead", "--type", "email.send")
    assert "3 job(s) match" in capsys.readouterr().out
    assert not BulkAction.objects.exists()
    call_command("jobs", "bulk", "retry", "--status", "dead", "--yes")
    assert "started action" in capsys.readouterr().out
    assert BulkAction.objects.get().matched == 3
    with pytest.raises(CommandError):
        call_command("jobs", "bulk", "retry", "--status", "asleep")
