"""outage.py: database errors that repeat on every turn back off and are logged once."""

from __future__ import annotations

import logging
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections

from django_jobs.worker.outage import RETRY_BASE_SECONDS, RETRY_CAP_SECONDS, Outages
from django_jobs.worker.watchman import bound_network_waits
from tests.conftest import requires_postgres

pytestmark = pytest.mark.django_db(transaction=True)


def refused() -> None:
    """A statement the database refuses every time (an IntegrityError on both databases)."""
    get_user_model().objects.create(username="taken")


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "django_jobs.worker"]


def test_a_statement_refused_every_turn_is_logged_once_and_then_its_recovery(caplog):
    get_user_model().objects.create(username="taken")
    caplog.set_level(logging.DEBUG, logger="django_jobs.worker")
    outages = Outages("w1")
    for _ in range(5):
        assert outages.attempt("claim", refused) is None
        outages.retry_now()  # as if each backoff had run out
    assert outages.attempt("claim", lambda: 7) == 7
    lines = messages(caplog)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "database error in claim" in warnings[0].getMessage()
    assert "IntegrityError" in warnings[0].getMessage()
    assert "Traceback" not in warnings[0].getMessage() and warnings[0].exc_info is None
    assert sum("claim works again after" in m and "(5 failed tries)" in m for m in lines) == 1
    assert not outages.active


def test_a_refused_statement_holds_back_only_its_own_step():
    get_user_model().objects.create(username="taken")
    outages = Outages("w1")
    assert outages.attempt("claim", refused) is None
    assert outages.attempt("heartbeat", lambda: "beat") == "beat"  # not held back
    assert outages.active  # the claim's episode is still open
    ran: list[str] = []
    assert outages.attempt("claim", lambda: ran.append("claim")) is None  # within its delay
    assert ran == []


def test_a_lost_connection_holds_back_every_step_and_any_success_ends_it(caplog):
    from django.db import OperationalError

    caplog.set_level(logging.INFO, logger="django_jobs.worker")
    outages = Outages("w1")

    def lost() -> None:
        raise OperationalError("server closed the connection unexpectedly\n\tmore detail")

    assert outages.attempt("heartbeat", lost) is None
    ran: list[str] = []
    assert outages.attempt("claim", lambda: ran.append("claim")) is None
    assert ran == []
    outages.retry_now()
    assert outages.attempt("claim", lambda: "claimed") == "claimed"
    assert not outages.active
    lines = messages(caplog)
    assert lines[0].endswith(
        "database unavailable: OperationalError: server closed the connection unexpectedly; "
        "retrying with backoff")
    assert "database available again after" in lines[1] and len(lines) == 2


@pytest.mark.parametrize(("failures", "longest"), [
    (1, RETRY_BASE_SECONDS),  # the first retry comes soon
    (3, RETRY_BASE_SECONDS * 4),  # doubling
    (30, RETRY_CAP_SECONDS),  # capped
])
def test_retry_delays_double_up_to_the_cap_with_jitter(failures, longest):
    from django.db import OperationalError

    outages = Outages("w1")
    for _ in range(failures):
        outages.failed("claim", OperationalError("down"), now=100.0)
    delay = outages.wait(100.0, default=0.0)
    assert longest / 2 <= delay <= longest


@requires_postgres
def test_a_worker_bounds_how_long_a_silent_connection_can_hold_it():
    """runworker gives its PostgreSQL connections TCP keepalives and a user timeout, so a
    partition that leaves the connection silent ends in an error (an outage it waits out);
    a value the site set itself is kept."""
    options = connections.settings["default"].setdefault("OPTIONS", {})
    saved = dict(options)
    options["keepalives_idle"] = 60
    try:
        bound_network_waits()
        wrapper = connections.create_connection("default")
        wrapper.ensure_connection()
        dsn = wrapper.connection.info.dsn
        wrapper.close()
    finally:
        options.clear()
        options.update(saved)
    assert "keepalives_idle=60" in dsn, dsn
    assert "tcp_user_timeout=30000" in dsn and "keepalives_count=3" in dsn, dsn


def _error_of(*statements: str) -> BaseException:
    """The Django error the last of ``statements`` raises on the test's connection."""
    from django.db import DatabaseError

    with connection.cursor() as cursor:
        for sql in statements[:-1]:
            cursor.execute(sql)
        try:
            cursor.execute(statements[-1])
        except DatabaseError as exc:
            return exc
    raise AssertionError(f"{statements[-1]!r} raised nothing")


READ_ONLY = {  # a write in a read-only transaction: what a standby, or a demoted primary, says
    "postgresql": ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
                   "UPDATE django_jobs_job SET attempt = attempt"),
    "mysql": ("SET SESSION TRANSACTION READ ONLY", "UPDATE django_jobs_job SET attempt = attempt"),
}
READ_WRITE = {"postgresql": "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
              "mysql": "SET SESSION TRANSACTION READ WRITE"}


def _read_only_error() -> BaseException:
    try:
        return _error_of(*READ_ONLY[connection.vendor])
    finally:
        with connection.cursor() as cursor:
            cursor.execute(READ_WRITE[connection.vendor])
TIMED_OUT = {  # a statement past the session's statement timeout
    "postgresql": ("SET statement_timeout = 50", "SELECT pg_sleep(2)"),
    "mysql": ("SET STATEMENT max_statement_time = 0.05 FOR "
              "SELECT COUNT(*) FROM information_schema.columns a, information_schema.columns b, "
              "information_schema.columns c",),
}


@pytest.mark.skipif(connection.vendor not in READ_ONLY, reason="PostgreSQL's and MariaDB's codes")
def test_real_errors_are_classified_by_their_code():
    """The server's own errors: read-only is an outage (25006 is an InternalError, 1792 an
    OperationalError), a statement timeout a timeout (57014, 1969), a constraint a refusal."""
    from django_jobs.core.db_errors import OUTAGE, REFUSAL, TIMEOUT, classify

    read_only = _read_only_error()
    assert classify(read_only) == OUTAGE, read_only
    timed_out = _error_of(*TIMED_OUT[connection.vendor])
    connection.close()  # the next statement opens a fresh connection, without the timeout
    assert classify(timed_out) == TIMEOUT, timed_out
    get_user_model().objects.create(username="taken")
    taken = _error_of("INSERT INTO auth_user (username, password, is_superuser, first_name, "
                      "last_name, email, is_staff, is_active, date_joined) VALUES ('taken', '', "
                      "false, '', '', '', false, true, '2026-01-01')")
    assert classify(taken) == REFUSAL, taken


@pytest.mark.skipif(connection.vendor not in READ_ONLY, reason="PostgreSQL's and MariaDB's codes")
def test_a_read_only_database_holds_back_every_step_as_an_outage():
    outages = Outages("w1")
    read_only = _read_only_error()
    outages.failed("claim", read_only, now=time.monotonic())
    ran: list[str] = []
    assert outages.attempt("heartbeat", lambda: ran.append("beat")) is None  # held back too
    assert ran == []
