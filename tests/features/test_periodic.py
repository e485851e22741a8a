"""Schedules declared on a handler (``@periodic``): checked at import like the setting's, shown
beside them, refused when a name is taken twice, and run by a real worker's heartbeat exactly
once per occurrence."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_jobs import handler, periodic
from django_jobs.features.schedules.config import schedules
from django_jobs.handlers import registry
from django_jobs.models import Job, ScheduleOccurrence
from tests.conftest import wait_for


@pytest.fixture
def declared():
    made: list[str] = []

    def declare(job_type: str, /, **options):
        made.append(job_type)
        return periodic(**options)(handler(job_type)(lambda payload: payload))

    yield declare
    for job_type in made:
        registry.unregister(job_type)


def test_a_declared_schedule_is_listed_with_the_settings_ones(declared, settings):
    settings.DJANGO_JOBS = {"SCHEDULES": {"sync": {"type": "echo", "every": 60}}}
    declared("nightly", cron="0 3 * * *", timezone="Europe/Paris", queue="reports")
    found = schedules()
    assert found["sync"].declared_in == "settings"
    spec = found["nightly"]
    assert (spec.type, spec.cron, spec.timezone, spec.queue, spec.declared_in) == (
        "nightly", "0 3 * * *", "Europe/Paris", "reports", "@periodic")


@pytest.mark.parametrize(("options", "message"), [
    ({"every": 0}, "@periodic on 'bad_tick': every must be at least 1"),
    ({"cron": "0 3 * *"}, "must have five fields"),
    ({"cron": "0 3 * * *", "every": 5}, "exactly one of 'cron'"),
    ({"every": 5, "type": "other"}, "the type is the handler's"),
    ({"every": 5, "colour": "red"}, "unknown option"),
])
def test_bad_options_are_refused_at_import(declared, options, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        declared("bad_tick", **options)


def test_it_goes_above_handler():
    with pytest.raises(ImproperlyConfigured, match="goes above @handler"):
        periodic(every=5)(lambda payload: payload)


def test_a_name_taken_twice_is_refused(declared, settings):
    settings.DJANGO_JOBS = {"SCHEDULES": {"twice": {"type": "echo", "every": 60}}}
    declared("twice", every=30)
    with pytest.raises(ImproperlyConfigured, match="declared twice"):
        schedules()
    declared("twice_renamed", every=30, name="twice-b")
    settings.DJANGO_JOBS = {}
    assert {"twice", "twice-b"} <= set(schedules())


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_a_declared_schedule_once_per_occurrence(start_worker):
    env = {"DJANGO_JOBS_TEST_PERIODIC": "1"}
    workers = [start_worker("--heartbeat", "0.2", env=env) for _ in range(2)]
    wait_for(lambda: Job.objects.filter(type="periodic_tick", status="completed").count() >= 3,
             timeout=60)
    for worker in workers:
        worker.stop()
    occurrences = list(ScheduleOccurrence.objects.filter(schedule_id="periodic_tick")
                       .values_list("at", flat=True))
    assert len(occurrences) == len(set(occurrences)) >= 3
    assert Job.objects.filter(type="periodic_tick").count() == len(occurrences)
    assert Job.objects.filter(type="periodic_tick").first().payload == {"from": "periodic"}
