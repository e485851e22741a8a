"""System checks on the job database: unsupported backends and servers without SKIP LOCKED."""

import pytest
from django.core.checks import Error
from django.db import connection
from django.db.utils import ConnectionHandler

from django_jobs.dbchecks import check_skip_locked, has_skip_locked, vendor_problems


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
