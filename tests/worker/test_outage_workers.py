"""Outages mid-drain, on real worker processes: whatever the database says while it is away,
read-only or out of time, every outcome is written once it is back and no handler runs twice.

Each job's handler (``outage_record``) notes its run in a table, so the tests count runs. The
outages are the database's own: the worker's sessions ended and the new ones read-only (25006;
MariaDB 1792), a statement timeout on the worker's sessions (57014; MariaDB 1969), the
worker's statement canceled (57014; MariaDB ``KILL QUERY``, 1317) or its connection ended
(57P01; MariaDB ``KILL``, 2013).
"""

import contextlib
import json
import os
import re
import signal
import time

import pytest
from django.db import connection, connections

from django_jobs.models import Job
from tests.conftest import requires_postgres, requires_row_locks, wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
SUFFIX = os.environ.get("DJANGO_JOBS_TEST_SUFFIX", "")
# A lease longer than any outage here: the worker must write its outcomes, not have its jobs
# rescued from it.
OPTIONS = ["--lease", "30", "--heartbeat", "1", "--poll-interval", "0.1"]
MB = 1_000_000


def runs() -> dict[str, int]:
    counts: dict[str, int] = {}
    for public_id in Execution.objects.values_list("job_public_id", flat=True):
        counts[public_id] = counts.get(public_id, 0) + 1
    return counts


def assert_each_completed_once(jobs, worker):
    ran = runs()
    for job in jobs:
        job.refresh_from_db()
        assert (job.status, job.attempt) == (S.COMPLETED, 1), (job, job.error, worker.output())
        assert ran.get(job.public_id) == 1, (job, ran.get(job.public_id))
    assert "refused" not in worker.output(), worker.output()


def stop(worker):
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=120) == 0, worker.output()


@contextlib.contextmanager
def rows_held():
    """Every job's row locked, by a second connection, until the block ends."""
    holder = connections.create_connection("default")
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute("SELECT id FROM django_jobs_job FOR UPDATE")
        yield
        holder.rollback()
    finally:
        holder.close()


def other_backends(cursor, name: str, where: str = "") -> list[int]:
    cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s "
                   f"AND pid <> pg_backend_pid() {where}", [name])
    return [pid for (pid,) in cursor.fetchall()]


# MariaDB: a worker's sessions are read-only while the flag row is there (a session setting,
# read as each session starts: the server's --read-only is not to be changed here).
MARIADB_READ_ONLY_FLAG = "outage test: read-only"
MARIADB_READ_ONLY_INIT = ("SET SESSION tx_read_only = (SELECT COUNT(*) FROM auth_group "
                          f"WHERE name = '{MARIADB_READ_ONLY_FLAG}')")


def read_only(on: bool) -> None:
    """New sessions of the test database's workers read-only, or writable again."""
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            change = "SET default_transaction_read_only = on" if on else (
                "RESET default_transaction_read_only")
            cursor.execute(f'ALTER DATABASE "{name}" {change}')
        elif on:
            cursor.execute("INSERT INTO auth_group (name) VALUES (%s)", [MARIADB_READ_ONLY_FLAG])
        else:
            cursor.execute("DELETE FROM auth_group WHERE name = %s", [MARIADB_READ_ONLY_FLAG])


def end_other_sessions() -> None:
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for pid in other_backends(cursor, name):
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            return
        cursor.execute("SELECT id FROM information_schema.processlist WHERE db = %s "
                       "AND id <> CONNECTION_ID()", [name])
        for (thread,) in cursor.fetchall():
            try:
                cursor.execute(f"KILL {int(thread)}")
            except Exception:  # noqa: S110  it ended already
                pass


@requires_row_locks
def test_a_database_read_only_mid_drain_is_an_outage(start_worker, tmp_path):
    """A failover onto a standby, as the worker sees it: its sessions end, and the new ones are
    read-only (``cannot execute UPDATE in a read-only transaction``, 25006; MariaDB 1792) for
    a few seconds."""
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"gate": str(gate), "n": n}) for n in range(12)]
    env = {"DJANGO_JOBS_TEST_MARIADB_INIT": MARIADB_READ_ONLY_INIT}
    worker = start_worker("--concurrency", "12", *OPTIONS, env=env)
    wait_for(lambda: Execution.objects.count() == 12, timeout=60)
    read_only(True)
    try:
        end_other_sessions()
        gate.touch()  # the handlers return: their outcomes meet the read-only database
        time.sleep(4)  # the window, in which the worker's backoff tries again 2-4 times
    finally:
        read_only(False)
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 12, timeout=120)
    stop(worker)
    assert_each_completed_once(jobs, worker)
    # One episode: its first error the sessions' end, then the read-only ones.
    (tries,) = re.findall(r"database available again after [0-9.]+ s \((\d+) failed tries\)",
                          worker.output())
    assert int(tries) >= 2, worker.output()


# The statement timeout of the worker's sessions (seconds), a result (MB) whose write takes a
# tenth of it or less, how many in a batch take longer than it, and a result that takes longer
# alone. MariaDB writes a batch one statement per outcome (its max_statement_time is per
# statement, so no batch times out whole), and a statement must stay within its 16 MB
# max_allowed_packet, whose write does not outlast a timeout reliably: there a trigger makes
# the one result's write outlast it (SLOW_TRIGGER).
TIMEOUTS = {"postgresql": (0.5, 4, 16, 64), "mysql": (0.5, 0.1, 12, 0.1)}
SLOW_TRIGGER = """
CREATE TRIGGER test_slow_big BEFORE UPDATE ON django_jobs_job FOR EACH ROW
BEGIN
    IF JSON_VALUE(NEW.result, '$.n') = 'big' THEN
        DO SLEEP(5);
    END IF;
END
"""
SAID = {"postgresql": "canceling statement due to statement timeout",
        "mysql": "max_statement_time exceeded"}


@pytest.fixture
def timing_out():
    """The environment of a worker whose sessions have a statement timeout: on PostgreSQL a
    role of this test run with ``statement_timeout``, on MariaDB the session's
    ``max_statement_time`` (a server setting otherwise, not to be changed here)."""
    seconds = TIMEOUTS[connection.vendor][0]
    if connection.vendor == "mysql":
        yield {"DJANGO_JOBS_TEST_MARIADB_INIT": f"SET SESSION max_statement_time = {seconds}"}
        return
    role = f"django_jobs_timeout{SUFFIX}"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP ROLE IF EXISTS "{role}"')
        cursor.execute(f'CREATE ROLE "{role}" LOGIN SUPERUSER')
        cursor.execute(f'ALTER ROLE "{role}" SET statement_timeout = {int(seconds * 1000)}')
    yield {"PGUSER": role}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE usename = %s", [role])
        cursor.execute(f'DROP ROLE IF EXISTS "{role}"')


def start_timing_out(start_worker, env: dict, concurrency: int, extra: dict | None = None):
    env = {**env, "DJANGO_JOBS_TEST_EXTRA": json.dumps(extra or {})}
    return start_worker("--burst", "--concurrency", str(concurrency), *OPTIONS, env=env)


@requires_row_locks
def test_a_batch_that_keeps_timing_out_is_split_until_it_is_written(
    start_worker, timing_out, tmp_path
):
    """A batch of outcomes of some MB, finished together, takes longer to write in one statement
    than the sessions' statement timeout; one takes a tenth of it. The batch is written in
    parts, each job once."""
    if connection.vendor == "mysql":
        pytest.skip("MariaDB writes a batch one statement per outcome: no batch times out whole")
    _, size, batch, _ = TIMEOUTS[connection.vendor]
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"size": int(size * MB) - 100, "n": n,
                                          "gate": str(gate)}) for n in range(batch)]
    worker = start_timing_out(start_worker, timing_out, batch,
                              extra={"MAX_RESULT_BYTES": (size + 1) * MB})
    wait_for(lambda: Execution.objects.count() == batch, timeout=60)
    # The rows held for a moment while all the handlers return: their outcomes gather into one
    # batch (the worker writes as they come, so a few at a time, otherwise).
    with rows_held():
        gate.touch()
        time.sleep(2)
    assert worker.wait(timeout=180) == 0, worker.output()
    assert SAID[connection.vendor] in worker.output()
    assert_each_completed_once(jobs, worker)


@requires_row_locks
def test_an_outcome_that_always_times_out_fails_its_job_and_not_its_neighbours(
    start_worker, timing_out
):
    """One result whose write alone takes longer than the statement timeout, among ordinary
    ones: the ordinary ones are written once each, the big one ends as its job's failure
    saying why (its attempt spent: max_attempts=1, so dead)."""
    _, size, batch, too_big = TIMEOUTS[connection.vendor]
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute(SLOW_TRIGGER)
    ordinary = [Job.enqueue("outage_record", {"size": int(size * MB) - 100, "n": n})
                for n in range(batch - 1)]
    big = Job.enqueue("outage_record", {"size": int(too_big * MB) - 1000, "n": "big"})
    worker = start_timing_out(start_worker, timing_out, batch,
                              extra={"MAX_RESULT_BYTES": int(too_big + 1) * MB})
    try:
        assert worker.wait(timeout=180) == 0, worker.output()
    finally:
        if connection.vendor == "mysql":
            with connection.cursor() as cursor:
                cursor.execute("DROP TRIGGER IF EXISTS test_slow_big")
    assert_each_completed_once(ordinary, worker)
    big.refresh_from_db()
    assert (big.status, big.attempt, big.result) == (S.DEAD, 1, None), (big, big.error)
    assert big.error["type"] == "OutcomeTimedOut", big.error
    assert "timed out writing this job's outcome, alone, 5 times" in big.error["message"]
    assert SAID[connection.vendor] in big.error["message"], big.error
    assert runs()[big.public_id] == 1


@requires_postgres
@pytest.mark.parametrize(("how", "said"), [
    ("pg_cancel_backend", "canceling statement due to user request"),  # 57014
    ("pg_terminate_backend", "terminating connection due to administrator command"),  # 57P01
])
def test_a_write_canceled_or_its_connection_ended_is_written_again(
    start_worker, tmp_path, how, said
):
    """The worker's write of a batch (waiting for rows the test holds, to be caught running)
    is canceled, or its session ended, twice: the outcomes are written later, each job once."""
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"gate": str(gate), "n": n}) for n in range(16)]
    worker = start_worker("--concurrency", "16", *OPTIONS)
    wait_for(lambda: Execution.objects.count() == 16, timeout=60)
    name = connection.settings_dict["NAME"]
    hits = 0
    with rows_held():
        gate.touch()
        deadline = time.monotonic() + 60
        while hits < 2 and time.monotonic() < deadline:
            with connection.cursor() as cursor:
                # Every statement of the worker that waits for the rows (its heartbeat too, or
                # the loop would wait there); the writes of outcomes are counted.
                cursor.execute("SELECT pid, query LIKE '%%jsonb_to_recordset%%' "
                               "FROM pg_stat_activity WHERE datname = %s "
                               "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
                               [name])
                for pid, write in cursor.fetchall():
                    cursor.execute(f"SELECT {how}(%s)", [pid])
                    hits += bool(write and cursor.fetchone()[0])
            time.sleep(0.05)
    assert hits == 2
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 16, timeout=120)
    stop(worker)
    assert said in worker.output(), worker.output()
    assert_each_completed_once(jobs, worker)


SLOW_ONCE_TRIGGER = """
CREATE TRIGGER test_slow_marked BEFORE UPDATE ON django_jobs_job FOR EACH ROW
BEGIN
    IF JSON_VALUE(NEW.result, '$.n') = 'slow' THEN
        DO SLEEP(2);
    END IF;
END
"""


@pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB's KILL")
@pytest.mark.parametrize(("how", "said"), [
    ("KILL QUERY", "1317, 'Query execution was interrupted'"),
    ("KILL", "Lost connection to server during query"),  # 2013
])
def test_a_write_killed_on_mariadb_is_written_again(start_worker, tmp_path, how, said):
    """The worker's write of an outcome (made slow by a trigger, to be caught running) is
    killed, or its connection, twice: the outcomes are written later, each job once."""
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"gate": str(gate), "n": n}) for n in range(7)]
    jobs.append(Job.enqueue("outage_record", {"gate": str(gate), "n": "slow"}))
    with connection.cursor() as cursor:
        cursor.execute(SLOW_ONCE_TRIGGER)
    try:
        worker = start_worker("--concurrency", "8", *OPTIONS)
        wait_for(lambda: Execution.objects.count() == 8, timeout=60)
        gate.touch()
        hits = 0
        deadline = time.monotonic() + 60
        while hits < 2 and time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute("SELECT id FROM information_schema.processlist WHERE db = %s "
                               "AND id <> CONNECTION_ID() AND info LIKE %s",
                               [connection.settings_dict["NAME"], "DO SLEEP%"])  # the trigger's
                for (thread,) in cursor.fetchall():
                    cursor.execute(f"{how} {int(thread)}")
                    hits += 1
            time.sleep(0.05)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS test_slow_marked")
    assert hits == 2
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 8, timeout=120)
    stop(worker)
    assert said in worker.output(), worker.output()
    assert_each_completed_once(jobs, worker)
