"""The system check of ``DJANGO_JOBS``'s keys (``django_jobs.E002``): an unknown key is named,
with the setting it is nearest to as the hint, or the list of them when none is near."""

import pytest

from django_jobs.checks.configuration import check_settings

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


@pytest.mark.parametrize(("key", "hint"), [
    ("MAX_ATTEMPT", "did you mean 'MAX_ATTEMPTS'?"),
    ("lease_seconds", "did you mean 'LEASE_SECONDS'?"),
    ("RETENTON", "did you mean 'RETENTION'?"),
])
def test_a_misspelt_key_is_named_with_the_setting_meant(settings, key, hint):
    settings.DJANGO_JOBS = {key: 1}
    [error] = [e for e in check_settings() if e.id == "django_jobs.E002"]
    assert error.msg == f"DJANGO_JOBS has an unknown key {key!r}"
    assert error.hint == hint


def test_a_key_near_no_setting_lists_them_all(settings):
    settings.DJANGO_JOBS = {"COLOUR": "red"}
    [error] = [e for e in check_settings() if e.id == "django_jobs.E002"]
    assert error.hint.startswith("known keys: ADMIN_REFRESH_SECONDS, API_MAX_PAGE_SIZE, ")
    assert "SCHEDULES" in error.hint
