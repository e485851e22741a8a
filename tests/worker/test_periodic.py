"""A heartbeat step's database error (``worker/heartbeat.py``): an outage is the worker's to
report, once, as it reports one anywhere (``worker/outage.py``); a statement the database
refused is the step's own, logged with its traceback."""

import logging

import pytest
from django.db import DatabaseError, connection

from django_jobs.worker.heartbeat import Periodic

# A statement that ends its own session on the server: the step's connection is lost.
ENDS_ITS_SESSION = {
    "postgresql": "SELECT pg_terminate_backend(pg_backend_pid())",
    "mysql": "KILL CONNECTION_ID()",
}


class Sends:
    """A heartbeat step that sends one statement."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def __call__(self, worker_id: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(self.sql)


def run_step(step: Sends) -> None:
    periodic = Periodic()
    periodic.steps = lambda: [step]  # type: ignore[method-assign]
    periodic("w1")


@pytest.mark.django_db
def test_a_statement_the_database_refuses_is_logged_by_its_step(caplog):
    with caplog.at_level(logging.ERROR, "django_jobs.worker"), pytest.raises(DatabaseError):
        run_step(Sends("INSERT INTO django_jobs_job (type) VALUES (NULL)"))  # NOT NULL
    [record] = [r for r in caplog.records if "Sends failed" in r.getMessage()]
    assert record.getMessage() == "worker w1: Sends failed" and record.exc_info


@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_is_left_to_the_worker_to_report(caplog):
    if connection.vendor not in ENDS_ITS_SESSION:
        pytest.skip("SQLite has no server to end a session")
    try:
        with caplog.at_level(logging.DEBUG, "django_jobs.worker"), \
                pytest.raises(DatabaseError):
            run_step(Sends(ENDS_ITS_SESSION[connection.vendor]))
    finally:
        connection.close()  # the session is gone; the test's teardown opens a new one
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
