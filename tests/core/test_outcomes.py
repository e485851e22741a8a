"""AttemptOutcome keeps its times as integer microseconds and gives them back as datetimes."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome, micros, moment, now_us

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


def test_an_aware_time_goes_to_microseconds_and_back_exactly():
    when = datetime(2026, 11, 30, 7, 0, 0, 123457, tzinfo=UTC)
    assert micros(when) == 1_796_022_000_123_457
    assert moment(micros(when)) == when
    assert micros(micros(when)) == micros(when)


@pytest.mark.parametrize("tz", ["UTC", "Europe/Paris", "America/New_York"])
def test_without_use_tz_times_are_naive_in_the_default_time_zone(settings, tz):
    settings.USE_TZ, settings.TIME_ZONE = False, tz
    naive = datetime(2026, 7, 1, 12, 30, 0, 5)
    us = micros(naive)
    assert us == micros(timezone.make_aware(naive))
    back = moment(us)
    assert back.tzinfo is None and back == naive


def test_an_outcome_takes_datetimes_or_microseconds_and_gives_datetimes_and_seconds():
    start = timezone.now()
    outcome = AttemptOutcome(job=None, kind="completed", started_at=start,
                             finished_at=micros(start) + 1500, cpu_time=0.0015)
    assert outcome.started_at == start
    assert outcome.finished_at == start + timedelta(microseconds=1500)
    assert outcome.duration_ms == 1.5
    assert outcome.cpu_ns == 1_500_000 and outcome.cpu_time == 0.0015
    outcome.finished_at = start
    assert outcome.finished == outcome.started
    assert AttemptOutcome(job=None, kind="failed", started_at=0, finished_at=0).cpu_time is None
    assert "completed" in repr(outcome)


def test_now_us_is_the_clock_in_microseconds():
    before = micros(timezone.now())
    assert before <= now_us() <= micros(timezone.now())
