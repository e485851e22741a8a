"""The shelf rule on its own (``core/shelves.py``): the first UTC day boundary at or after the
finish plus the status's ``RETENTION`` age; the open and kept days."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from django.test import override_settings

from django_jobs.core.shelves import KEPT_SHELF, OPEN_BEFORE, OPEN_SHELF, prune_day

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

DAY = timedelta(days=1)


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_the_sentinels_bound_the_prune_days():
    assert OPEN_SHELF < OPEN_BEFORE <= date(2000, 1, 1) < KEPT_SHELF == date(9999, 12, 31)


@pytest.mark.parametrize("status", ["waiting", "pending", "processing", "failed"])
def test_an_open_status_is_on_the_open_shelf(status):
    assert prune_day(status, at(2026, 12, 4, 5)) == OPEN_SHELF


@pytest.mark.parametrize(("finished", "status", "day"), [
    (at(2026, 12, 4, 0), "completed", date(2026, 12, 11)),  # on a boundary: that day
    (at(2026, 12, 4, 0, 0, 0, 1), "completed", date(2026, 12, 12)),  # a microsecond past it
    (at(2026, 12, 4, 23, 59), "canceled", date(2026, 12, 12)),
    (at(2026, 12, 4, 5), "dead", date(2027, 1, 4)),  # 30 days
])
def test_a_finished_job_is_pruned_between_its_age_and_its_age_plus_a_day(finished, status,
                                                                           day):
    assert prune_day(status, finished) == day


def test_the_day_is_the_utc_one_whatever_the_time_zone_of_the_finish():
    east = timezone(timedelta(hours=9))
    finished = datetime(2026, 12, 5, 8, 0, tzinfo=east)  # 2026-12-04 23:00 UTC
    assert prune_day("completed", finished) == date(2026, 12, 12)


def test_ages_under_a_day_and_none_and_ages_past_the_calendar():
    retention = {"completed": 60, "canceled": None, "dead": timedelta(days=3 * 10**6)}
    with override_settings(DJANGO_JOBS={"RETENTION": retention}):
        assert prune_day("completed", at(2026, 12, 4, 5)) == date(2026, 12, 5)
        assert prune_day("completed", at(2026, 12, 4, 23, 59, 30)) == date(2026, 12, 6)
        assert prune_day("canceled", at(2026, 12, 4, 5)) == KEPT_SHELF
        assert prune_day("dead", at(2026, 12, 4, 5)) == KEPT_SHELF  # past 9999: kept
    with override_settings(DJANGO_JOBS={"RETENTION": {"completed": 0}}):
        assert prune_day("completed", at(2026, 12, 4, 5)) == date(2026, 12, 5)
        assert prune_day("dead", at(2026, 12, 4, 5)) == KEPT_SHELF  # not in the setting
    assert prune_day("completed", at(2026, 12, 4, 5)) == date(2026, 12, 12)  # the default


def test_a_naive_finish_is_read_in_the_sites_time_zone():
    with override_settings(USE_TZ=False, TIME_ZONE="Asia/Tokyo"):
        assert prune_day("completed", datetime(2026, 12, 5, 8, 0)) == date(2026, 12, 12)
