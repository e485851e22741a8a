"""Workflows under real ``runworker`` processes: kill -9 at a step boundary and inside an
atomic step's transaction, a frozen worker resumed after another took over, and sleeps and
waits that hold no worker slot."""

import signal
import uuid

import pytest

from django_jobs import send_event
from django_jobs.models import Job, WorkflowStep
from tests.conftest import requires_row_locks, wait_for
from tests.models import Execution
from tests.workflow_jobs import five_steps, waiting

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def status_of(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def rows_of(tag):
    return sorted(Execution.objects.filter(job_public_id=tag).values_list("attempt", flat=True))


@pytest.mark.parametrize("where", ["hold_after", "hold_inside"])
def test_kill_9_mid_workflow_resumes_after_the_last_step_with_each_write_once(
        start_worker, tmp_path, where):
    tag = uuid.uuid4().hex[:12]
    job = five_steps.enqueue(tag, marker_dir=str(tmp_path), **{where: 2})
    marker = tmp_path / ("after-2" if where == "hold_after" else "inside-2")
    first = start_worker("--worker-id", "doomed", *FAST)
    wait_for(marker.exists)
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    done_before = 3 if where == "hold_after" else 2  # inside step 2: its write rolled back
    assert rows_of(tag) == list(range(done_before))
    second = start_worker("--worker-id", "rescuer", *FAST)
    wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
    job.refresh_from_db()
    assert job.result == {"total": 15}
    assert rows_of(tag) == [0, 1, 2, 3, 4]  # every atomic step's row exactly once
    assert list(WorkflowStep.objects.filter(job_id=job.pk).order_by("position")
                .values_list("key", flat=True)) == [f"write#{n}" for n in range(5)]
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


# On SQLite the step's open transaction holds the database's one write lock, which the worker's
# hand-back waits for: the step ends (and commits) before the worker can hand the job back.
@requires_row_locks
def test_sigterm_mid_step_hands_the_workflow_back_with_the_step_undone(start_worker, tmp_path):
    tag = uuid.uuid4().hex[:12]
    job = five_steps.enqueue(tag, marker_dir=str(tmp_path), hold_inside=2)
    first = start_worker("--shutdown-timeout", "0.5", *FAST)
    wait_for((tmp_path / "inside-2").exists)
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=20) == 0
    job.refresh_from_db()
    assert (job.status, job.attempt) == (S.PENDING, 0)  # handed back, no attempt spent
    assert rows_of(tag) == [0, 1]  # step 2's transaction did not commit
    second = start_worker(*FAST)
    wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
    assert rows_of(tag) == [0, 1, 2, 3, 4]
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


def test_a_frozen_worker_resumed_after_a_takeover_writes_no_step(start_worker, tmp_path):
    tag = uuid.uuid4().hex[:12]
    job = five_steps.enqueue(tag, marker_dir=str(tmp_path), hold_after=1, hold_seconds=2.0)
    frozen = start_worker("--worker-id", "frozen", *FAST)
    wait_for((tmp_path / "after-1").exists)
    frozen.signal(signal.SIGSTOP)
    other = start_worker("--worker-id", "other", *FAST)
    wait_for(lambda: status_of(job) == S.COMPLETED, timeout=60)
    frozen.signal(signal.SIGCONT)  # wakes in step 1's hold and meets step 2, already taken
    # its run ends (a step refused by the fence, or interrupted) and its outcome is dropped
    wait_for(lambda: "not written" in frozen.output(), timeout=20)
    job.refresh_from_db()
    assert job.result == {"total": 15} and job.worker_id == "other"
    assert rows_of(tag) == [0, 1, 2, 3, 4]
    for worker in (frozen, other):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0


def test_sleeps_and_waits_hold_no_slot_and_an_event_finishes_the_workflow(
        start_worker, tmp_path):
    job = waiting.enqueue(uuid.uuid4().hex[:12], marker_dir=str(tmp_path))
    worker = start_worker("--concurrency", "1", *FAST)
    wait_for((tmp_path / "waiting").exists)
    wait_for(lambda: status_of(job) == S.PENDING)  # parked on its wait
    plain = Job.enqueue("echo", {"n": 1})  # the one slot is free for it
    wait_for(lambda: status_of(plain) == S.COMPLETED)
    assert status_of(job) == S.PENDING
    assert send_event(job, "paid", {"amount": 12}, event_id="pay-1")
    wait_for(lambda: status_of(job) == S.COMPLETED)
    job.refresh_from_db()
    assert job.result == {"paid": {"amount": 12}}
    assert job.attempt == 1  # the sleep and the wait spent no attempt
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
