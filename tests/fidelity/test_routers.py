"""django-jobs under the two routers of Django's docs, on PostgreSQL: ``tests/routed_checks.py``
in a pytest of its own per router, since each needs settings with a second database
(``tests/settings_routers.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_jobs.checks.configuration import check_settings
from django_jobs.models.schema import jobs_database, migrate_hint
from tests.conftest import ROOT, requires_postgres


@requires_postgres
@pytest.mark.slow
@pytest.mark.settings_pass
@pytest.mark.parametrize("router", ["replica", "jobs"])
def test_every_read_and_write_goes_where_the_router_puts_the_jobs(router):
    env = {**os.environ, "DJANGO_JOBS_TEST_ROUTER": router}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--ds=tests.settings_routers", "tests/routed_checks.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
    assert " passed" in run.stdout and " failed" not in run.stdout, run.stdout[-5000:]


class JobsElsewhere:
    """Writes the app's tables to a ``jobs`` alias (no connection is opened here)."""

    def db_for_write(self, model, **hints):
        return "jobs" if model._meta.app_label == "django_jobs" else None


@pytest.mark.db_independent  # no database: once per Django
def test_jobs_off_default_get_a_warning_about_transactions():
    assert not [w for w in check_settings() if w.id == "django_jobs.W003"]
    with override_settings(DATABASE_ROUTERS=[JobsElsewhere()]):
        assert jobs_database() == "jobs"
        found = [w for w in check_settings() if w.id == "django_jobs.W003"]
    assert len(found) == 1
    assert "'jobs'" in found[0].msg and "transaction.atomic()" in found[0].msg
    assert "using='jobs'" in found[0].hint


@pytest.mark.db_independent  # no database: once per Django
def test_the_not_migrated_hint_names_an_alias_other_than_default():
    assert migrate_hint("default") == "run `manage.py migrate`"
    assert migrate_hint("jobs") == "run `manage.py migrate --database=jobs`"


@pytest.mark.db_independent  # no database: once per Django
def test_the_warning_about_atomic_is_silenced_as_usual():
    def check_output() -> str:
        out = StringIO()
        call_command("check", stdout=out, stderr=out)
        return out.getvalue()

    with override_settings(DATABASE_ROUTERS=[JobsElsewhere()]):
        assert "django_jobs.W003" in check_output()
        with override_settings(SILENCED_SYSTEM_CHECKS=["django_jobs.W003"]):
            assert "django_jobs.W003" not in check_output()
