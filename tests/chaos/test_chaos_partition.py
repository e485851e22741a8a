"""Chaos: a worker cut off from the database mid-job loses its lease, and its late finish is
refused.

The cut-off worker reaches PostgreSQL through a TCP proxy (tests/chaos/proxy.py) that the test
turns into a black hole while the job runs: the worker cannot heartbeat, its lease expires, a
second worker on a direct connection rescues the job and runs it to completion. Then the
partition ends, the cut-off worker's handler has returned, and its finishing write reaches the
database: the fence (job id, lease token, status) refuses it, and the job keeps the second
attempt's result.
"""

import signal
from pathlib import Path

import pytest
from django.conf import settings

from django_jobs.models import Job
from tests.chaos.ledger import RAN, RETURNED, collect, interrupted_outcomes, read_runs, verify
from tests.chaos.proxy import Proxy
from tests.conftest import requires_postgres, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.chaos,
    requires_postgres,
]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


@pytest.fixture
def proxy():
    made = Proxy(int(settings.DATABASES["default"]["PORT"]),
                 settings.DATABASES["default"]["HOST"])
    yield made
    made.close()


def runs_of(log, event, public_id):
    return [run for run in read_runs(log) if run.event == event and run.public_id == public_id]


def fenced_fields(job):
    """What a finishing write would change: compared before and after the late finish."""
    return Job.objects.filter(pk=job.pk).values(
        "status", "attempt", "worker_id", "lease_token", "result", "error", "finished_at"
    ).get()


@pytest.mark.parametrize("late_finish_arrives", ["while the second attempt runs",
                                                 "after the second attempt completed"])
def test_cut_off_worker_loses_its_lease_and_its_late_finish_is_refused(
    proxy, start_worker, tmp_path, late_finish_arrives
):
    log, gate = str(tmp_path / "runs.log"), tmp_path / "gate"
    job = Job.enqueue("chaos_record", {"log": log, "gate": str(gate)}, queue="cut")
    cut_off = start_worker("--queues", "cut,after", "--worker-id", "cut-off", *FAST,
                           env={"PGPORT": str(proxy.port)})
    wait_for(lambda: runs_of(log, RAN, job.public_id), timeout=60)
    proxy.blackhole()

    rescuer = start_worker("--queues", "cut", "--worker-id", "rescuer", *FAST)
    wait_for(lambda: len(runs_of(log, RAN, job.public_id)) == 2, timeout=60)
    assert [run.pid for run in runs_of(log, RAN, job.public_id)] == [
        cut_off.proc.pid, rescuer.proc.pid]
    first = job.attempts.get()
    assert (first.worker_id, first.outcome in interrupted_outcomes()) == ("cut-off", True)
    if late_finish_arrives == "after the second attempt completed":
        Path(f"{gate}.{rescuer.proc.pid}").touch()
        wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    Path(f"{gate}.{cut_off.proc.pid}").touch()  # the cut-off worker's handler returns
    wait_for(lambda: [r for r in runs_of(log, RETURNED, job.public_id)
                      if r.pid == cut_off.proc.pid], timeout=60)
    before = fenced_fields(job)
    assert before["worker_id"] == "rescuer"

    proxy.restore()
    # A job only the cut-off worker serves: once it completes, that worker is connected again
    # and has been through a turn, and every turn first writes the outcomes it holds.
    after = Job.enqueue("echo", {"n": 1}, queue="after")
    wait_for(lambda: Job.objects.get(pk=after.pk).status == S.COMPLETED, timeout=60)
    assert Job.objects.get(pk=after.pk).worker_id == "cut-off"
    assert fenced_fields(job) == before  # the late finish changed nothing

    Path(f"{gate}.{rescuer.proc.pid}").touch()
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=60)
    job.refresh_from_db()
    assert (job.worker_id, job.result["pid"]) == ("rescuer", rescuer.proc.pid)
    assert [(a.worker_id, a.outcome) for a in job.attempts.all()][1:] == [
        ("rescuer", "completed")]
    verify({job.public_id: collect()[job.public_id]}, read_runs(log))
    for worker in (cut_off, rescuer):
        assert worker.proc.poll() is None, worker.output()[-2000:]
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, worker.output()[-2000:]
