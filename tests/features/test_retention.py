"""Retention: ``manage.py prunejobs`` and workers' automatic pruning."""

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from django_jobs.core.settings import jobs_settings
from django_jobs.features.retention import AutoPruner, prune, prune_pass
from django_jobs.models import Job, JobAttempt, JobStat
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from tests.conftest import wait_for


def make(status, days_ago, n=1):
    finished = timezone.now() - timedelta(days=days_ago)
    jobs = Job.enqueue_many("echo", [{"i": i} for i in range(n)])
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(
        status=status, finished_at=finished if status != "pending" else None,
        created_at=finished,
    )
    for job in jobs:
        JobAttempt.objects.create(job=job, number=1, started_at=finished, finished_at=finished,
                                  outcome="completed")
    return jobs


def statuses():
    return sorted(Job.objects.values_list("status", flat=True))


@pytest.mark.django_db
def test_prunejobs_deletes_only_finished_jobs_past_their_age_with_their_attempts():
    make("completed", 10, 3)
    keep_recent = make("completed", 1)
    make("dead", 40)
    make("dead", 10)
    make("canceled", 10)
    make("failed", 100)  # still to be retried: never pruned
    make("pending", 100)
    out = StringIO()
    call_command("prunejobs", stdout=out)
    assert "completed: deleted 3" in out.getvalue()
    assert statuses() == ["completed", "dead", "failed", "pending"]
    assert Job.objects.filter(status="completed").get().pk == keep_recent[0].pk
    assert JobAttempt.objects.count() == 4


@pytest.mark.django_db
def test_dry_run_counts_and_deletes_nothing():
    make("completed", 10, 2)
    out = StringIO()
    call_command("prunejobs", "--dry-run", "--completed", "1d", stdout=out)
    assert "completed: would delete 2" in out.getvalue()
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_ages_on_the_command_line_override_the_setting_and_never_keeps():
    make("completed", 2, 2)
    make("dead", 400)
    out = StringIO()
    call_command("prunejobs", "--completed", "36h", "--dead", "never", stdout=out)
    assert statuses() == ["dead"]
    assert "dead: kept" in out.getvalue()


@pytest.mark.django_db
def test_small_batches_delete_everything_in_several_transactions():
    make("completed", 10, 7)
    assert prune({"completed": timedelta(days=1)}, batch_size=3) == {"completed": 7}
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_max_batches_bounds_one_call():
    make("completed", 10, 7)
    assert prune({"completed": timedelta(days=1)}, batch_size=2, max_batches=2) == {
        "completed": 4}
    assert Job.objects.count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize("args", [["--completed", "soon"], ["--dead", "-3d"],
                                  ["--batch-size", "0"]])
def test_bad_arguments_are_a_command_error_and_delete_nothing(args):
    make("completed", 10)
    with pytest.raises(CommandError):
        call_command("prunejobs", *args, stdout=StringIO())
    assert Job.objects.count() == 1


@pytest.mark.django_db
@override_settings(DJANGO_JOBS={"RETENTION": {"finished": 5}})
def test_an_unknown_status_in_the_setting_is_a_command_error():
    with pytest.raises(CommandError, match="finished"):
        call_command("prunejobs", stdout=StringIO())


@pytest.mark.django_db
@override_settings(DJANGO_JOBS={"PRUNE_INTERVAL": 60, "RETENTION": {"completed": 86400}})
def test_the_auto_pruner_runs_once_per_interval():
    make("completed", 3, 2)
    pruner = AutoPruner()
    pruner.next_at = 0.0  # due now
    pruner("w")
    assert Job.objects.count() == 0
    make("completed", 3)
    pruner("w")  # the next pass is an interval away
    assert Job.objects.count() == 1


def a_burst_worker_due_to_prune() -> Worker:
    """An in-process burst worker whose pruner, if pruning is on, is due at its first heartbeat
    (not at the random point of its first interval a worker picks to spread a fleet out, from
    its second heartbeat on)."""
    worker = Worker(WorkerOptions(burst=True, concurrency=2, poll_interval=0.05))
    worker.periodic.started = True
    for step in worker.periodic.steps():
        if isinstance(step, AutoPruner):
            step.next_at = 0.0
    return worker


@pytest.mark.django_db
def test_a_worker_prunes_by_the_default_retention_without_any_prune_setting():
    assert "PRUNE_INTERVAL" not in settings.DJANGO_JOBS  # tests/settings.py leaves it out
    assert jobs_settings.PRUNE_INTERVAL == 300
    make("completed", 8, 2)  # default RETENTION: completed 7 days, dead 30 days
    keep = make("completed", 6) + make("dead", 20)
    make("dead", 31)
    a_burst_worker_due_to_prune().run()
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(j.pk for j in keep)


@pytest.mark.django_db
@pytest.mark.parametrize("off", [None, 0])
def test_prune_interval_none_or_0_turns_the_workers_pruning_off(off):
    make("completed", 8, 2)
    make("dead", 31)
    with override_settings(DJANGO_JOBS={"PRUNE_INTERVAL": off}):
        a_burst_worker_due_to_prune().run()
    assert statuses() == ["completed", "completed", "dead"]


@pytest.mark.django_db
@override_settings(DJANGO_JOBS={"PRUNE_BATCH_SIZE": 2, "LEASE_SECONDS": 0.001})
def test_a_pass_out_of_time_with_full_batches_goes_on_at_the_next_heartbeat():
    make("completed", 10, 5)
    pruner = AutoPruner()
    assert pruner.budget() == pytest.approx(0.0002)  # one round per pass
    pruner.next_at = 0.0
    pruner("w")
    assert Job.objects.count() == 3
    assert pruner.next_at <= time.monotonic()  # behind: due again at once
    pruner("w")
    pruner("w")  # the batch comes back short: caught up
    assert Job.objects.count() == 0
    assert pruner.next_at > time.monotonic() + 140  # the next pass half an interval away at least
    make("completed", 10)
    pruner("w")
    assert Job.objects.count() == 1


@override_settings(DJANGO_JOBS={})
def test_a_pass_takes_a_fifth_of_the_heartbeat_by_default():
    assert AutoPruner.budget() == pytest.approx(1.0)


@pytest.mark.django_db
def test_a_pass_deletes_a_batch_of_each_status_per_round():
    make("completed", 10, 5)
    make("dead", 40)
    counts, caught_up = prune_pass({"completed": timedelta(days=1), "dead": timedelta(days=1)},
                                   batch_size=2, max_batches=1)
    assert (counts, caught_up) == ({"completed": 2, "dead": 1}, False)
    counts, caught_up = prune_pass({"completed": timedelta(days=1)}, batch_size=2,
                                   deadline=time.monotonic() + 60)
    assert (counts, caught_up) == ({"completed": 3}, True)


@pytest.mark.django_db
def test_a_pass_keeps_going_while_full_batches_come_back_until_its_deadline():
    make("completed", 10, 9)
    counts, caught_up = prune_pass({"completed": timedelta(days=1)}, batch_size=2,
                                   deadline=time.monotonic() - 1)  # past: one round only
    assert (counts, caught_up) == ({"completed": 2}, False)
    counts, caught_up = prune_pass({"completed": timedelta(days=1)}, batch_size=2,
                                   deadline=time.monotonic() + 60)
    assert (counts, caught_up) == ({"completed": 7}, True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_several_workers_prune_one_backlog_together_without_errors(start_worker):
    """Each worker prunes on its own heartbeat; their batches skip the rows another holds
    (SQLite: one writer at a time), so together they delete the backlog exactly once."""
    make("completed", 30, 300)
    make("dead", 40, 20)
    (recent,) = make("completed", 0)
    extra = '{"PRUNE_INTERVAL": 0.2, "PRUNE_BATCH_SIZE": 7}'
    workers = [start_worker("--heartbeat", "0.1", "--lease", "5",
                            env={"DJANGO_JOBS_TEST_EXTRA": extra}) for _ in range(3)]
    wait_for(lambda: Job.objects.count() == 1, timeout=60)
    assert Job.objects.get().pk == recent.pk
    assert JobAttempt.objects.count() == 1
    for worker in workers:
        assert "Traceback" not in worker.output()
        assert "failed" not in worker.output()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_worker_prunes_old_jobs_when_prune_interval_is_set(start_worker):
    make("completed", 30, 3)
    make("completed", 0)
    start_worker("--heartbeat", "0.2", "--lease", "5",
                 env={"DJANGO_JOBS_TEST_EXTRA": '{"PRUNE_INTERVAL": 0.2}'})
    wait_for(lambda: Job.objects.count() == 1, timeout=30)


@pytest.mark.django_db
def test_occurrences_whose_job_was_pruned_go_a_day_later():
    from django_jobs.models import Schedule, ScheduleOccurrence

    Schedule.objects.create(name="s")
    (old_job,) = make("completed", 10)
    (recent_job,) = make("completed", 0)
    at = timezone.now() - timedelta(days=10)
    ScheduleOccurrence.objects.create(schedule_id="s", at=at, job=old_job)
    ScheduleOccurrence.objects.create(schedule_id="s", at=timezone.now(), job=recent_job)
    prune({"completed": timedelta(days=1)})
    assert list(ScheduleOccurrence.objects.values_list("job_id", flat=True)) == [recent_job.pk]


@pytest.mark.django_db
@override_settings(DJANGO_JOBS={"RETENTION": {"finished": 5}})
def test_a_pass_that_fails_waits_an_interval_before_the_next():
    pruner = AutoPruner()
    pruner.next_at = 0.0
    with pytest.raises(ValueError, match="finished"):
        pruner("w")
    assert pruner.next_at > time.monotonic() + 140  # half the default 300 s at least


@pytest.mark.django_db
@override_settings(DJANGO_JOBS={"PRUNE_INTERVAL": 60})
def test_workers_that_caught_up_together_prune_next_at_spread_points():
    """Pruners whose passes ended together (one shared backlog) must not stay in step: each
    picks its next pass between half and one and a half intervals on."""
    make("completed", 1)
    pruners = [AutoPruner() for _ in range(40)]
    started = time.monotonic()
    for pruner in pruners:
        pruner.next_at = 0.0
        pruner("w")
    ended = time.monotonic()
    offsets = [pruner.next_at - started for pruner in pruners]
    assert all(30 <= offset <= 90 + (ended - started) for offset in offsets)
    assert max(offsets) - min(offsets) > 30  # 40 in step would differ by milliseconds


@pytest.mark.django_db
def test_a_pass_drops_the_counts_of_finished_jobs_past_stats_retention():
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    for span in (1, 60):
        for hours_ago in (0, 1, 3, 47, 49, 72):
            JobStat.objects.create(bucket=now - timedelta(hours=hours_ago), span=span,
                                   worker_id="w", queue="default", type="noop",
                                   outcome="completed", count=1)
    with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "STATS_RETENTION": 48 * 3600}):
        prune_pass({}, batch_size=1, now=now)

    def kept(span):
        return sorted(now - b for b in JobStat.objects.filter(span=span).values_list(
            "bucket", flat=True))

    assert kept(1) == [timedelta(0), timedelta(hours=1)]  # two hours of minutes
    assert kept(60) == [timedelta(hours=h) for h in (0, 1, 3, 47)]
    with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "STATS_RETENTION": None}):
        prune_pass({}, now=now + timedelta(days=30))
    assert kept(1) == [] and len(kept(60)) == 4


@pytest.mark.django_db
def test_prunejobs_refuses_a_stats_retention_that_is_no_age():
    make("completed", 10)
    with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "STATS_RETENTION": "2 days"}):
        with pytest.raises(CommandError, match="STATS_RETENTION"):
            call_command("prunejobs", stdout=StringIO())
    assert statuses() == ["completed"]
