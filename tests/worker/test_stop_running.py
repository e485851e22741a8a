"""A stop never lets a job run twice at once, and children a handler forks are its own.

Real ``runworker`` processes and real signals: a job whose handler outlives the stop is handed
back only as its process ends, before any exit hook runs; a child a handler forks has the
default dispositions of the stop signals, not the worker's handlers.
"""

import itertools
import os
import signal
import threading

import pytest
from django.db import connections

from django_jobs.models import Job, JobAttempt
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]
ROUNDS = 5


def runs(path):
    """The runs in a marks file, in the order they began: [(pid, first mark, last mark)] (each
    worker process runs the job once)."""
    found: dict[int, tuple[int, int]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            pid, mark = (int(part) for part in line.split())
            first, _ = found.get(pid, (mark, mark))
            found[pid] = (first, mark)
    return [(pid, first, last) for pid, (first, last) in found.items()]


def marked_by(path, pid):
    return any(run[0] == pid for run in runs(path))


def stop_args(round_):
    """Even rounds: SIGTERM, and the handler outlives a 1 s shutdown timeout. Odd rounds: a
    second SIGINT during a long shutdown timeout (``Abort``)."""
    return ["--shutdown-timeout", "1" if round_ % 2 == 0 else "600", *FAST]


def hand_over(holder, spare, round_, marks):
    """Once ``spare`` is up, stop ``holder`` (as ``stop_args`` says for ``round_``); the job
    goes to ``spare``."""
    wait_for(lambda: "started; queues" in spare.output(), timeout=60)
    if round_ % 2 == 0:
        holder.signal(signal.SIGTERM)
    else:
        holder.signal(signal.SIGINT)
        wait_for(lambda: "stopping;" in holder.output())
        holder.signal(signal.SIGINT)
    assert holder.wait(timeout=60) == 0, holder.output()
    wait_for(lambda: marked_by(marks, spare.proc.pid), timeout=60)


def test_a_handler_outliving_the_stop_never_runs_beside_its_next_run(start_worker, tmp_path):
    """One job that runs for ten minutes, writing a mark every 5 ms; two workers up, each
    process with a 1 s exit hook. Round after round, the worker running it is stopped and the
    other takes it over: no mark of the stopped worker's run comes after the first mark of the
    next run (a run that went on while the exit hook slept would leave them)."""
    marks = tmp_path / "marks"
    env = {"DJANGO_JOBS_TEST_EXIT_HOOK": "1"}
    job = Job.enqueue("marking", {"log": str(marks), "seconds": 600})
    holder = start_worker(*stop_args(0), env=env)
    wait_for(lambda: marked_by(marks, holder.proc.pid), timeout=60)
    for round_ in range(ROUNDS):
        spare = start_worker(*stop_args(round_ + 1), env=env)
        hand_over(holder, spare, round_, marks)
        holder = spare
    found = runs(marks)
    assert len(found) == ROUNDS + 1, found
    for (pid, _, last), (_, first, _) in itertools.pairwise(found):
        assert last < first, f"the run in {pid} went on {(last - first) / 1e6:.1f} ms into the next"
    job.refresh_from_db()
    assert (job.status, job.attempt) == (S.PROCESSING, 1)  # every hand-back left it unspent
    assert job.attempts.filter(outcome=JobAttempt.Outcome.RELEASED).count() == ROUNDS


def test_a_worker_in_another_program_leaves_a_handler_still_running_its_lease(tmp_path):
    """``Worker.run()`` inside another program cannot end that program, so it cannot hand back
    a job whose handler still runs in it: the job keeps its lease, for the rescue."""
    marker = tmp_path / "started"
    job = Job.enqueue("slow", {"seconds": 3, "marker": str(marker)})
    worker = Worker(WorkerOptions(shutdown_timeout=0.2, poll_interval=0.05))

    def run():
        try:
            worker.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(marker.exists)
    worker.stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
    job.refresh_from_db()
    assert job.status == S.PROCESSING and job.leased_until is not None
    assert not job.attempts.exists()
    for slot in worker.executor.slots:  # the handler ends; its outcome is no one's now
        slot.join(timeout=30)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_fork_pool_that_a_handler_terminates_leaves_no_child(start_worker):
    job = Job.enqueue("fork_pool")
    worker = start_worker(*FAST)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == S.COMPLETED, timeout=40)
    job.refresh_from_db()
    pids = job.result["pids"]
    assert len(pids) == 2 and worker.proc.pid not in pids
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=10)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_child_forked_by_a_handler_has_the_default_stop_dispositions(start_worker):
    job = Job.enqueue("fork_dispositions")
    worker = start_worker("--burst", *FAST)
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert job.status == S.COMPLETED, job.error
    # The child has what the worker process started with: the defaults, but for a signal the
    # worker was started ignoring, as this test process may be (SIGHUP under nohup, SIGINT as
    # a background job of a non-interactive shell).
    def started_ignoring(signum):
        return signal.getsignal(signum) is signal.SIG_IGN

    hangup = "SIG_IGN" if started_ignoring(signal.SIGHUP) else "SIG_DFL"
    interrupt = "SIG_IGN" if started_ignoring(signal.SIGINT) else "default_int_handler"
    assert job.result == {"SIGTERM": "SIG_DFL", "SIGINT": interrupt, "SIGHUP": hangup}
