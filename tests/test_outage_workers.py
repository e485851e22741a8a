"""Outages mid-drain, on real worker processes: whatever the database says while it is away,
read-only or out of time, every outcome is written once it is back and no handler runs twice.

Each job's handler (``outage_record``) notes its run in a table, so the tests count runs. The
outages are the database's own: a database made read-only for new sessions and the worker's
sessions ended (25006), a role with a ``statement_timeout`` (57014), the worker's statement
canceled (57014) or its connection terminated (57P01); on MariaDB a session
``max_statement_time`` (1969) and ``KILL QUERY`` / ``KILL`` (1317, 2013).
"""

import json
import os
import re
import signal
import time

import pytest
from django.db import connection

from django_jobs.models import Job
from tests.conftest import requires_postgres, wait_for
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


def other_backends(cursor, name: str, where: str = "") -> list[int]:
    cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s "
                   f"AND pid <> pg_backend_pid() {where}", [name])
    return [pid for (pid,) in cursor.fetchall()]


@requires_postgres
def test_a_database_read_only_mid_drain_is_an_outage(start_worker, tmp_path):
    """A failover onto a standby, as the worker sees it: its sessions end, and the new ones are
    read-only (``cannot execute UPDATE in a read-only transaction``, 25006) for a few seconds."""
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"gate": str(gate), "n": n}) for n in range(12)]
    worker = start_worker("--concurrency", "12", *OPTIONS)
    wait_for(lambda: Execution.objects.count() == 12, timeout=60)
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    try:
        with connection.cursor() as cursor:
            for pid in other_backends(cursor, name):
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        gate.touch()  # the handlers return: their outcomes meet the read-only database
        time.sleep(4)  # the window, in which the worker's backoff tries again 2-4 times
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 12, timeout=120)
    stop(worker)
    assert_each_completed_once(jobs, worker)
    # One episode: its first error the sessions' end, then the read-only ones.
    (tries,) = re.findall(r"database available again after [0-9.]+ s \((\d+) failed tries\)",
                          worker.output())
    assert int(tries) >= 2, worker.output()


@requires_postgres
@pytest.mark.parametrize(("how", "said"), [
    ("pg_cancel_backend", "canceling statement due to user request"),  # 57014
    ("pg_terminate_backend", "terminating connection due to administrator command"),  # 57P01
])
def test_a_write_canceled_or_its_connection_ended_is_written_again(
    start_worker, tmp_path, how, said
):
    """The worker's write of a batch (big enough to be caught running) is canceled, or its
    session ended, twice: the outcomes are written later, each job once."""
    gate = tmp_path / "gate"
    jobs = [Job.enqueue("outage_record", {"gate": str(gate), "size": 4 * MB, "n": n})
            for n in range(16)]
    worker = start_worker("--concurrency", "16", *OPTIONS,
                          env={"DJANGO_JOBS_TEST_EXTRA": json.dumps({"MAX_RESULT_BYTES": 8 * MB})})
    wait_for(lambda: Execution.objects.count() == 16, timeout=60)
    name = connection.settings_dict["NAME"]
    gate.touch()
    hits = 0
    deadline = time.monotonic() + 60
    while (hits < 2 and time.monotonic() < deadline
           and Job.objects.filter(status=S.COMPLETED).count() < 16):
        with connection.cursor() as cursor:
            for pid in other_backends(cursor, name, "AND state = 'active' AND query LIKE "
                                                    "'%%jsonb_to_recordset%%'"):
                cursor.execute(f"SELECT {how}(%s)", [pid])
                hits += cursor.fetchone()[0]
        time.sleep(0.02)
    wait_for(lambda: Job.objects.filter(status=S.COMPLETED).count() == 16, timeout=120)
    stop(worker)
    assert said in worker.output(), worker.output()
    assert_each_completed_once(jobs, worker)
