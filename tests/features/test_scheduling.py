"""Recurring jobs: the setting, occurrence times, misfire policies, and exactly-once enqueue."""

import json
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_jobs.checks.schedules import check_schedules
from django_jobs.features.schedules.config import parse, schedules
from django_jobs.features.schedules.ticker import (
    Ticker,
    enqueue_occurrence,
    run_now,
    set_paused,
    tick,
)
from django_jobs.models import Job, Schedule, ScheduleOccurrence
from tests.conftest import wait_for

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)


def spec(**options):
    return parse("s", {"type": "echo", **options})


def jobs_settings(**schedules_):
    return override_settings(DJANGO_JOBS={"SCHEDULES": schedules_})


@pytest.mark.parametrize("options, words", [
    ({}, "exactly one of 'cron'"),
    ({"cron": "* * * * *", "every": 60}, "exactly one of 'cron'"),
    ({"cron": "61 * * * *"}, "Bad minute"),
    ({"cron": "* * * *"}, "five fields"),
    ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "unknown timezone"),
    ({"every": 0}, "every must be at least 1"),
    ({"every": 60, "timezone": "UTC"}, "cron' schedules only"),
    ({"every": 60, "misfire": "later"}, "misfire must be one of"),
    ({"every": 60, "colour": "red"}, "unknown option(s) colour"),
    ({"every": 60, "max_catchup": 0}, "max_catchup"),
])
def test_a_bad_schedule_is_refused_naming_it(options, words):
    with pytest.raises(ImproperlyConfigured) as err:
        spec(**options)
    assert "['s']" in str(err.value) and words in str(err.value)


def test_the_system_check_reports_bad_schedules_and_unknown_types():
    from django.core.checks.registry import registry

    assert check_schedules in registry.registered_checks
    with jobs_settings(a={"type": "echo", "cron": "nope"}):
        assert [e.id for e in check_schedules()] == ["django_jobs.E101"]
    with jobs_settings(a={"type": "no_such_type", "every": 60}):
        errors = check_schedules()
        assert [e.id for e in errors] == ["django_jobs.E102"] and "no_such_type" in errors[0].msg
    # A payload that does not fit a typed handler's arguments (tests/typed_jobs.py).
    with jobs_settings(a={"type": "typed_kwargs", "payload": {"order": 1}, "every": 60}):
        errors = check_schedules()
        assert [e.id for e in errors] == ["django_jobs.E102"]
        assert "order_id is required" in errors[0].msg, errors[0].msg
    with jobs_settings(a={"type": "typed_kwargs", "payload": {"order_id": 1}, "every": 60}):
        assert check_schedules() == []


def test_intervals_are_aligned_to_the_epoch_so_every_worker_computes_the_same_times():
    s = spec(every=900)
    assert s.next_after(T0 + timedelta(minutes=7)) == T0 + timedelta(minutes=15)
    assert s.next_after(T0 + timedelta(minutes=15)) == T0 + timedelta(minutes=30)


def test_cron_runs_in_its_time_zone_across_daylight_saving_changes():
    s = spec(cron="30 2 * * *", timezone="Europe/Paris")
    winter = datetime(2026, 1, 10, tzinfo=UTC)
    assert s.next_after(winter) == datetime(2026, 1, 10, 1, 30, tzinfo=UTC)
    # 29 March 2026: 02:30 does not exist in Paris; the job runs at 03:00 local (01:00 UTC).
    gap = datetime(2026, 3, 29, tzinfo=UTC)
    assert s.next_after(gap) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    # 25 October 2026: 02:30 happens twice; the job runs once, at the first.
    fall = list(islice(s.after(datetime(2026, 10, 24, 12, tzinfo=UTC)), 2))
    assert fall[0] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert fall[1] == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


@pytest.mark.parametrize("misfire, expected", [
    ("coalesce", [T0 + timedelta(minutes=59)]),  # one job, for the latest missed occurrence
    ("all", [T0 + timedelta(minutes=m) for m in range(50, 60)]),  # the latest max_catchup
    ("skip", []),
])
def test_misfire_policies_after_an_hour_of_downtime(misfire, expected):
    s = spec(every=60, misfire=misfire, max_catchup=10)
    now = T0 + timedelta(minutes=59, seconds=30)
    due = s.due(T0 - timedelta(seconds=1), now)
    assert len(due) == 10 and due[-1] == T0 + timedelta(minutes=59)
    assert s.to_enqueue(due, T0 + timedelta(hours=2)) == expected


def test_an_occurrence_found_within_the_grace_runs_whatever_the_policy():
    s = spec(every=60, misfire="skip", grace=30)
    due = s.due(T0 - timedelta(minutes=1), T0 + timedelta(seconds=20))
    assert s.to_enqueue(due, T0 + timedelta(seconds=20)) == [T0]


@pytest.mark.django_db
def test_ticks_enqueue_each_occurrence_once_and_never_the_past_on_first_sight():
    specs = {"s": spec(every=60)}
    assert tick(specs, T0 + timedelta(seconds=5)) == 0  # first sight: starts from now
    row = Schedule.objects.get(name="s")
    assert row.next_run_at == T0 + timedelta(minutes=1)
    assert tick(specs, T0 + timedelta(seconds=30)) == 0
    assert tick(specs, T0 + timedelta(minutes=1, seconds=2)) == 1
    assert tick(specs, T0 + timedelta(minutes=1, seconds=3)) == 0
    assert tick(specs, T0 + timedelta(minutes=2, seconds=1)) == 1
    occurrences = list(ScheduleOccurrence.objects.order_by("at"))
    assert [o.at for o in occurrences] == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
    assert Job.objects.filter(type="echo").count() == 2
    row.refresh_from_db()
    assert row.last_job_id == occurrences[-1].job_id
    assert row.next_run_at == T0 + timedelta(minutes=3)


@pytest.mark.django_db
def test_a_schedule_of_an_unknown_type_does_not_hold_back_the_others(caplog):
    specs = {"bad": parse("bad", {"type": "no_such_type", "every": 60}),
             "good": parse("good", {"type": "echo", "every": 60})}
    tick(specs, T0)
    assert tick(specs, T0 + timedelta(minutes=1, seconds=1)) == 1
    assert Job.objects.get().type == "echo"
    assert ScheduleOccurrence.objects.get().schedule_id == "good"
    assert "no_such_type" in caplog.text


@pytest.mark.django_db
def test_a_second_worker_inserting_the_same_occurrence_enqueues_nothing():
    s = spec(every=60, payload={"k": 1}, queue="reports", priority="high")
    Schedule.objects.create(name="s")
    job = enqueue_occurrence(s, T0)
    assert job.queue == "reports" and job.priority == 10 and job.payload == {"k": 1}
    assert enqueue_occurrence(s, T0) is None
    assert Job.objects.count() == 1 and ScheduleOccurrence.objects.count() == 1


@pytest.mark.django_db
def test_a_paused_schedule_enqueues_nothing_and_resuming_skips_what_fell_due():
    specs = {"s": spec(every=60)}
    tick(specs, T0)
    assert set_paused(["s"], True) == 1
    assert tick(specs, T0 + timedelta(minutes=5)) == 0
    set_paused(["s"], False)
    row = Schedule.objects.get(name="s")
    assert row.last_occurrence > T0 + timedelta(days=1)  # resumed "now", past T0
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_run_now_enqueues_a_manual_occurrence():
    with jobs_settings(s={"type": "echo", "cron": "0 3 * * *", "payload": {"a": 1}}):
        job = run_now("s")
    assert job.payload == {"a": 1}
    occurrence = ScheduleOccurrence.objects.get()
    assert occurrence.manual and occurrence.job_id == job.pk
    assert Schedule.objects.get(name="s").last_job_id == job.pk


@pytest.mark.django_db
def test_the_ticker_makes_no_query_without_schedules(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert Ticker()("w") == 0


def test_schedules_reads_the_setting():
    with jobs_settings(a={"type": "echo", "every": timedelta(minutes=5)}):
        assert schedules()["a"].every == timedelta(minutes=5)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_four_workers_enqueue_exactly_one_job_per_occurrence(start_worker):
    """Four runworker processes heartbeat every 0.1 s against a schedule firing every second;
    every occurrence gets exactly one job, whichever worker saw it first."""
    extra = json.dumps({"SCHEDULES": {"tick": {"type": "noop", "every": 1}}})
    workers = [start_worker("--heartbeat", "0.1", "--lease", "5",
                            env={"DJANGO_JOBS_TEST_EXTRA": extra}) for _ in range(4)]
    wait_for(lambda: ScheduleOccurrence.objects.count() >= 5, timeout=60)
    for worker in workers:
        worker.stop()
    occurrences = list(ScheduleOccurrence.objects.order_by("at"))
    times = [o.at for o in occurrences]
    assert len(set(times)) == len(times)
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(times))
    assert Job.objects.filter(type="noop").count() == len(occurrences)
    assert len({o.job_id for o in occurrences}) == len(occurrences)
