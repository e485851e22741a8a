"""What holds back vacuum (PostgreSQL's xmin horizon): the engine's read, the worker's warning,
the metrics' gauges and the admin overview's banner, each against a real second session that
holds a snapshot."""

import logging
import time

import psycopg
import pytest
from django.db import connection
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from django_jobs.engine.postgres import horizon_holders
from django_jobs.worker.horizon_warning import HorizonWatch
from tests.admin_helpers import staff
from tests.api_support import Api, make_token
from tests.conftest import requires_postgres, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

OVERVIEW = "/admin/django_jobs/job/overview/"


def open_holder(name: str = "horizon-holder") -> psycopg.Connection:
    """A second real session on the test database, in REPEATABLE READ, that has run a SELECT
    and stays in its transaction: it holds a snapshot."""
    params = connection.settings_dict
    holder = psycopg.connect(host=params["HOST"], port=params["PORT"], user=params["USER"],
                             dbname=params["NAME"], application_name=name)
    holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    holder.execute("SELECT count(*) FROM django_jobs_job").fetchone()
    return holder


def gone(pid: int) -> None:
    """Wait until the backend of a closed session has left pg_stat_activity."""
    def left() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            return cursor.fetchone()[0] == 0
    wait_for(left, timeout=10)


@pytest.fixture
def sessions():
    """Opens holders, and closes every one at the end (an open one would block the flush)."""
    opened: list[psycopg.Connection] = []

    def open_one(name: str = "horizon-holder") -> psycopg.Connection:
        opened.append(open_holder(name))
        return opened[-1]

    yield open_one
    for session in opened:
        session.close()


@pytest.fixture
def holder(sessions):
    return sessions()


def mine(pid: int) -> horizon_holders.Holder | None:
    return next((h for h in horizon_holders.holders("default") if h.pid == pid), None)


@requires_postgres
def test_the_read_names_the_session_that_holds_a_snapshot(holder):
    time.sleep(1.1)
    found = mine(holder.info.backend_pid)
    assert found is not None
    assert found.kind == "snapshot"
    assert found.application_name == "horizon-holder"
    assert found.state == "idle in transaction"
    assert found.detail.startswith("SELECT count(*) FROM django_jobs_job")
    assert found.age_seconds is not None and 1.0 <= found.age_seconds < 60
    assert found.client == "127.0.0.1"
    assert f"pid {holder.info.backend_pid}" in found.describe()
    read = horizon_holders.read("default")
    assert read is not None and read.age_seconds >= 1.0 and read.past(1)
    assert not read.past(0) and not read.past(None)


@requires_postgres
def test_the_read_leaves_out_its_own_session_and_ended_holders(sessions):
    connection.ensure_connection()
    own = connection.connection.info.backend_pid
    session = sessions()
    pid = session.info.backend_pid
    assert mine(pid) is not None
    session.rollback()  # the transaction ends: no snapshot is held any more
    assert mine(pid) is None
    session.close()
    assert mine(own) is None


def warnings_and_infos(caplog):
    lines = [r for r in caplog.records if r.name == "django_jobs.worker"
             and getattr(r, "event", "") in ("horizon_held", "horizon_clear")]
    return [(r.levelno, r.getMessage()) for r in lines]


@requires_postgres
def test_the_worker_warns_once_while_a_holder_persists_and_once_when_it_clears(sessions,
                                                                               caplog):
    caplog.set_level(logging.INFO, logger="django_jobs.worker")
    watch = HorizonWatch()
    with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": 1}):
        session = sessions()
        pid = session.info.backend_pid
        watch("w1")
        assert warnings_and_infos(caplog) == []  # not yet older than the bound
        time.sleep(1.2)
        for _ in range(3):  # three heartbeats, one warning
            watch("w1")
        [(level, text)] = warnings_and_infos(caplog)
        assert level == logging.WARNING
        assert f"snapshot of pid {pid}" in text
        assert "'horizon-holder'" in text and "client 127.0.0.1" in text
        assert "SELECT count(*) FROM django_jobs_job" in text
        assert "HORIZON_WARNING_SECONDS = 1 s" in text

        other = sessions("second-holder")  # a different holder, once the first has ended
        session.close()
        time.sleep(1.2)
        watch("w1")
        watch("w1")
        lines = warnings_and_infos(caplog)
        assert len(lines) == 2 and lines[1][0] == logging.WARNING
        assert "'second-holder'" in lines[1][1]

        other_pid = other.info.backend_pid
        other.close()
        gone(other_pid)  # a closed session's backend leaves pg_stat_activity a moment later
        watch("w1")
        watch("w1")
    lines = warnings_and_infos(caplog)
    assert len(lines) == 3
    assert lines[2][0] == logging.INFO and "no longer held back" in lines[2][1]


@requires_postgres
def test_the_warning_can_be_turned_off(holder, caplog):
    caplog.set_level(logging.INFO, logger="django_jobs.worker")
    time.sleep(1.1)
    for off in (0, None):
        with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": off}):
            HorizonWatch()("w1")
    assert warnings_and_infos(caplog) == []


@requires_postgres
def test_the_metrics_carry_the_horizon_age_and_xid_age(holder):
    time.sleep(1.1)
    api = Api(make_token("read"))
    body = api.get("/api/metrics/jobs").json()
    assert body["horizon"]["age_seconds"] >= 1.0
    assert f"pid {holder.info.backend_pid}" in body["horizon"]["holder"]
    text = api.get("/api/metrics/jobs", format="prometheus").content.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [age] = families["django_jobs_horizon_age_seconds"].samples
    assert families["django_jobs_horizon_age_seconds"].type == "gauge"
    assert 1.0 <= age.value < 60
    [xid_age] = families["django_jobs_horizon_xid_age"].samples
    assert xid_age.value >= 0
    holder.close()
    body = api.get("/api/metrics/jobs").json()
    assert body["horizon"]["holder"] is None or f"pid {holder.info.backend_pid}" not in (
        body["horizon"]["holder"])


@requires_postgres
def test_the_admin_overview_shows_a_banner_past_the_bound(client, holder):
    client.force_login(staff("viewer", "view_job"))
    time.sleep(1.1)
    with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": 1}):
        page = client.get(OVERVIEW).content.decode()
    assert 'id="horizon"' in page
    assert f"snapshot of pid {holder.info.backend_pid}" in page
    assert "horizon-holder" in page
    with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": 3600}):
        assert 'id="horizon"' not in client.get(OVERVIEW).content.decode()
    holder.close()
    with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": 1}):
        assert 'id="horizon"' not in client.get(OVERVIEW).content.decode()


@pytest.mark.parametrize("value", ["300", -1, True, [300]])
def test_a_bad_horizon_setting_is_refused_by_the_system_check(value):
    from django_jobs.checks.configuration import check_settings

    with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": value}):
        assert [e.id for e in check_settings()] == ["django_jobs.E007"]
    for fine in (None, 0, 300, 0.5):
        with override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": fine}):
            assert check_settings() == []
