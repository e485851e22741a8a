"""outage.py: database errors that repeat on every turn back off and are logged once."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from django_jobs.lifecycle import bound_network_waits
from django_jobs.outage import RETRY_BASE_SECONDS, RETRY_CAP_SECONDS, Outages
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
