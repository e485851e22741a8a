"""The pure retry policy: backoff schedules, jitter bounds, the dead decision."""

from datetime import UTC, datetime, timedelta

import pytest

from django_jobs.core.retry import ExponentialBackoff, FixedSchedule, as_backoff, decide

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("attempt", "expected"), [
    (1, 10),     # first failure waits the base
    (2, 20),     # then doubles
    (3, 40),
    (9, 2560),
    (10, 3600),  # capped
    (80, 3600),  # no overflow for absurd attempt numbers
])
def test_exponential_without_jitter(attempt, expected):
    assert ExponentialBackoff(base=10, cap=3600, jitter=False).delay(attempt) == expected


@pytest.mark.parametrize(("rand", "expected"), [
    (0.0, 20.0),   # lowest draw: half the full delay
    (0.5, 30.0),
    (0.999999, 39.99998),  # highest draw: just under the full delay
])
def test_jitter_stays_between_half_and_full_delay(rand, expected):
    delay = ExponentialBackoff(base=10, cap=3600).delay(3, rand=lambda: rand)
    assert delay == pytest.approx(expected)


def test_jitter_spreads_real_draws_within_bounds():
    delays = [ExponentialBackoff(base=10, cap=3600).delay(2) for _ in range(500)]
    assert all(10 <= d <= 20 for d in delays)
    assert max(delays) - min(delays) > 5  # actually jittered, not constant


@pytest.mark.parametrize(("attempt", "expected"), [
    (1, 10), (2, 30), (3, 120), (4, 300),
    (7, 300),  # the last delay repeats
])
def test_fixed_schedule(attempt, expected):
    assert FixedSchedule((10, 30, 120, 300)).delay(attempt) == expected


def test_a_list_is_a_fixed_schedule():
    assert as_backoff([1, 2]) == FixedSchedule((1.0, 2.0))


def test_settings_choose_the_default_backoff(settings):
    settings.DJANGO_JOBS = {"BACKOFF_BASE": 2, "BACKOFF_CAP": 5, "BACKOFF_JITTER": False}
    assert as_backoff(None) == ExponentialBackoff(2, 5, False)
    settings.DJANGO_JOBS = {"BACKOFF_SCHEDULE": [10, 30]}
    assert as_backoff(None) == FixedSchedule((10, 30))


@pytest.mark.parametrize("bad", [(), (-1,), ])
def test_fixed_schedule_refuses_bad_delays(bad):
    with pytest.raises(ValueError):
        FixedSchedule(bad)


@pytest.mark.parametrize(("attempt", "max_attempts", "permanent", "retry_in"), [
    (1, 3, False, 10),    # attempts left: retry after the backoff
    (2, 3, False, 30),
    (3, 3, False, None),  # last attempt used: dead
    (1, 3, True, None),   # permanent error: dead at once
    (5, 3, False, None),  # over budget (retried dead job): dead
])
def test_decide(attempt, max_attempts, permanent, retry_in):
    decision = decide(attempt=attempt, max_attempts=max_attempts, permanent=permanent,
                      backoff=FixedSchedule((10, 30)), now=NOW)
    if retry_in is None:
        assert decision.dead and decision.retry_at is None
    else:
        assert not decision.dead and decision.retry_at == NOW + timedelta(seconds=retry_in)
