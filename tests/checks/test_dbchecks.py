"""System checks on the job database: unsupported backends and servers without SKIP LOCKED."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.checks import Error
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.utils import ConnectionHandler

from django_jobs.checks import databases as dbchecks
from django_jobs.checks.databases import check_skip_locked, has_skip_locked, vendor_problems
from django_jobs.models import Job, Worker
from tests.conftest import ROOT

on_mysql_backend = pytest.mark.skipif(connection.vendor != "mysql",
                                      reason="the SKIP LOCKED check is for MariaDB and MySQL")


def test_a_backend_other_than_postgresql_sqlite_or_mysql_is_refused():
    # Django's dummy backend stands in for any engine django-jobs was not built for (Oracle...).
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.dummy"}})
    [problem] = vendor_problems(handler)
    assert isinstance(problem, Error) and problem.id == "django_jobs.E020"
    assert "'unknown' database of DATABASES['default']" in problem.msg
    assert "MariaDB 10.6+" in problem.hint


def test_the_supported_backends_pass():
    assert vendor_problems(ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3",
                                                          "NAME": ":memory:"}})) == []


def test_mysql_at_repeatable_read_is_warned_about():
    pytest.importorskip("MySQLdb", reason="the MySQL backend needs mysqlclient (the mariadb extra)")
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.mysql",
                                             "OPTIONS": {"isolation_level": "repeatable read"}}})
    [problem] = vendor_problems(handler)
    assert problem.id == "django_jobs.W020" and "'repeatable read'" in problem.msg


@pytest.mark.parametrize(("is_mariadb", "version", "expected"), [
    (True, (10, 5, 27), False),  # MariaDB 10.5: Django 5.2 still runs on it
    (True, (10, 6, 0), True),  # the first MariaDB with SKIP LOCKED
    (True, (11, 4, 2), True),
    (False, (8, 0, 0), False),  # MySQL 8.0.0 (Django refuses it anyway)
    (False, (8, 0, 1), True),  # the first MySQL with SKIP LOCKED
])
def test_skip_locked_versions(is_mariadb, version, expected):
    assert has_skip_locked(is_mariadb, version) is expected


@pytest.mark.django_db
def test_the_test_database_passes_the_skip_locked_check():
    assert check_skip_locked(databases=["default"]) == []
    if connection.vendor == "mysql":  # the rule agrees with Django's own flag on a real server
        assert has_skip_locked(connection.mysql_is_mariadb, connection.mysql_version) is (
            connection.features.has_select_for_update_skip_locked)


@on_mysql_backend
@pytest.mark.django_db
@pytest.mark.parametrize(("server", "message"), [
    ((True, (10, 5, 27)), "MariaDB 10.5.27 (DATABASES['default']) has no SELECT ... FOR UPDATE"),
    ((False, (8, 0, 0)), "MySQL 8.0.0 (DATABASES['default']) has no SELECT ... FOR UPDATE"),
])
def test_a_server_without_skip_locked_is_refused(monkeypatch, server, message):
    # The real connection and check; only the version the server reported is replaced.
    monkeypatch.setattr(dbchecks, "server_version", lambda conn: server)
    [problem] = check_skip_locked(databases=["default"])
    assert isinstance(problem, Error) and problem.id == "django_jobs.E021"
    assert problem.msg.startswith(message)
    assert problem.hint == "upgrade to MariaDB 10.6+ or MySQL 8.0.1+"


@on_mysql_backend
@pytest.mark.django_db
def test_the_version_seam_reads_the_real_server():
    mariadb, version = dbchecks.server_version(connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        (text,) = cursor.fetchone()
    assert mariadb is ("mariadb" in text.lower())
    assert text.startswith(".".join(str(part) for part in version))


@on_mysql_backend
@pytest.mark.django_db
def test_runworker_refuses_a_server_without_skip_locked_before_it_claims(monkeypatch):
    job = Job.enqueue("echo")
    monkeypatch.setattr(dbchecks, "server_version", lambda conn: (True, (10, 5, 27)))
    with pytest.raises(CommandError) as refused:
        call_command("runworker", "--burst", verbosity=0)  # adds no log handler here
    assert str(refused.value) == (
        "django_jobs.E021: MariaDB 10.5.27 (DATABASES['default']) has no SELECT ... FOR UPDATE "
        "SKIP LOCKED, which django-jobs claims jobs with (upgrade to MariaDB 10.6+ or MySQL "
        "8.0.1+)")
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and not Worker.objects.exists()


@on_mysql_backend
@pytest.mark.django_db(transaction=True)
def test_runworker_logs_a_database_check_warning_and_runs():
    # A session without strict mode: Django's own database check (mysql.W002) warns about it.
    job = Job.enqueue("echo")
    env = {**os.environ, "JOBS_DB_NAME": str(settings.DATABASES["default"]["NAME"]),
           "DJANGO_JOBS_TEST_MARIADB_INIT": "SET sql_mode=''"}
    result = subprocess.run(
        [sys.executable, "-m", "django", "runworker", "--burst", "--settings=tests.settings"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert " WARNING mysql.W002: " in result.stderr
    job.refresh_from_db()
    assert job.status == Job.Status.COMPLETED
