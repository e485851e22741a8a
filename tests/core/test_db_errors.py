"""What a database error says about its statement: the codes read without a database (the
same errors raised by a real server are classified in tests/worker/test_outage.py)."""

from __future__ import annotations

import pytest

from django_jobs.core.db_errors import OUTAGE, classify, lock_conflict

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


def raised_from(cause):
    from django.db import OperationalError

    exc = OperationalError(str(cause))
    exc.__cause__ = cause
    return exc


def test_a_deadlock_or_lock_timeout_is_a_lock_conflict_and_other_errors_are_not():
    """Two pruners side by side on MariaDB deadlock now and then (InnoDB's foreign key checks
    lock the gaps between rows): the pass ends there, its batch rolled back, with no outage."""
    import psycopg.errors

    for conflict in (psycopg.errors.DeadlockDetected("deadlock"),
                     psycopg.errors.LockNotAvailable("lock")):
        assert lock_conflict(raised_from(conflict))
        # and, to the worker, an outage: the same statement works once the other is done
        assert classify(raised_from(conflict)) == OUTAGE
    assert not lock_conflict(raised_from(psycopg.errors.AdminShutdown("shutdown")))
    assert not lock_conflict(raised_from(ValueError("no driver's")))


def test_mariadb_deadlocks_and_lock_timeouts_are_lock_conflicts():
    MySQLdb = pytest.importorskip("MySQLdb", reason="MariaDB's driver (the mariadb extra)")
    for conflict in (MySQLdb.OperationalError(1213, "Deadlock found"),
                     MySQLdb.OperationalError(1205, "Lock wait timeout")):
        assert lock_conflict(raised_from(conflict))
        assert classify(raised_from(conflict)) == OUTAGE
    assert not lock_conflict(raised_from(MySQLdb.OperationalError(2006, "gone away")))
    assert not lock_conflict(raised_from(ValueError("no driver's")))
