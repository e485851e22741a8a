"""How a worker ends, whatever ended its loop (a stop signal, a second one, ``--burst``,
``--max-jobs``, an error): nothing it holds is lost, nothing of it is left behind, and no job
it hands back can run elsewhere while its handler still runs here.

The claimed jobs no thread has started are taken out of the inbox first, and the inbox is
closed, so no thread starts another; the outcomes that came in are written (one last try, even
during an outage); the jobs waiting for a thread, and those of a claim whose reply was lost
(``worker/turn.py``), are handed back to the queue, their attempt unspent, for another worker to
run; the listener is stopped; the worker's row is removed; the process's signal handlers are
restored; the summary of finished jobs is logged.

A job whose handler is still running (past the shutdown timeout, or at a second signal) cannot
be stopped from outside its thread. When the worker owns its process (``runworker``), it hands
such jobs back last, due ``HANDBACK_MARGIN_SECONDS`` ahead so that no worker takes them before
this process is gone, and ends the process at once (``leave_now``; status
``Watchman.exit_status``, 0 unless a reload stopped it, or 1 with the traceback logged if an error
ended the loop): no ``atexit`` function runs, since the
handler would still be running while it did. A worker run inside another program
(``Worker.run()``) cannot end that program: it keeps their leases, and once the lease runs out
the rescue hands them back (``worker/heartbeat.py``), counting a crash. A stop signal that comes
while the worker ends is ignored.

How the process ends when a handler left a non-daemon thread running: Python waits for every
non-daemon thread before a process exits, so one such thread, started by a handler and never
stopped, would keep ``runworker`` (``--burst`` included) alive for ever after its work is done.
Once the worker has stopped cleanly, the process leaves without those threads
(``exit_without_stray_threads``): it logs their names, closes its database connections, runs
the ``atexit`` functions, flushes its output and ends with ``os._exit``. The threads are
abandoned where they stand; nothing they were doing is part of any job's outcome. With no such
thread the process exits normally.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, NoReturn

from django.db import connections

from django_jobs.engine import finish_counts, hooks
from django_jobs.models import Job
from django_jobs.models import Worker as WorkerRow
from django_jobs.worker import turn
from django_jobs.worker.handoff import handoff

if TYPE_CHECKING:
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")

# How far ahead a job handed back while its handler still runs is due: longer than this process
# takes from the hand-back's commit to its end (microseconds; a loaded host, milliseconds).
HANDBACK_MARGIN_SECONDS = 1.0


def shut_down(worker: WorkerState) -> None:
    """End ``worker`` (see the module's docstring); each database step is tried once."""
    watchman = worker.watchman
    watchman.ending = True  # a further stop signal is ignored: this ends the worker anyway
    watchman.announce_stop(worker)
    watchman.tell_stopping(worker)  # also when the loop ended by itself (--burst, --max-jobs)
    worker.outages.retry_now()
    executor = worker.executor
    unstarted = executor.inbox.take_waiting()  # no thread took these; none takes any now
    executor.inbox.close(len(executor.slots))
    if executor.solo is not None and not executor.solo_started:
        unstarted.append(executor.solo)  # a suspect waiting to run alone (suspects.py)
    turn.finish_outcomes(worker)
    worker.safely(turn.release_in_doubt, worker)
    unstarted = [job for job in unstarted if executor.running.pop(job.id, None) is not None]
    if unstarted:
        released = worker.safely(Job.objects.release, unstarted)
        logger.warning("worker %s: handed back %s job(s) no thread had started: the worker is "
                       "stopping; they are pending again for any worker, their attempt not "
                       "spent", worker.worker_id, released,
                       extra={"worker_id": worker.worker_id, "event": "jobs_handed_back",
                              "jobs": released, "reason": "the worker is stopping",
                              "next": "pending again for any worker, their attempt not spent"})
    if worker.listener:
        worker.listener.stop()
    worker.safely(lambda: WorkerRow.objects.filter(pk=worker.worker_id).delete())
    watchman.restore_signals()
    if executor.running:
        turn.finish_outcomes(worker)  # a handler that ended meanwhile is not still running
    worker.safely(finish_counts.flush)  # the counts of the jobs finished since the last heartbeat
    if executor.running:
        leave_running(worker, [held.job for held in executor.running.values()])
    hooks.forget()  # what is configured is read at each call again (engine/hooks.py)
    worker.tally.flush()
    worker.wake.close()  # a thread still running a job may set it: that does nothing now
    logger.info("worker %s: stopped after %d job(s)", worker.worker_id, worker.processed)


def leave_running(worker: WorkerState, jobs: list[Job]) -> None:
    """Jobs a thread started whose handler is still running: hand them back and end the
    process at once if the worker owns it; otherwise leave them to their lease (see the
    module's docstring)."""
    worker.executor.running.clear()
    if not worker.options.owns_process:
        logger.warning("worker %s: %d job(s) still running; they keep their lease, and are "
                       "rescued once it runs out", worker.worker_id, len(jobs))
        return
    worker.outages.retry_now()  # one last try, as for the outcomes
    released = worker.safely(Job.objects.release, jobs, HANDBACK_MARGIN_SECONDS)
    if released is None:  # the database is away: the lease holds them until the rescue
        logger.warning("worker %s: could not hand back %d job(s) still running; ending the "
                       "process now", worker.worker_id, len(jobs))
    else:
        logger.warning("worker %s: handed back %d job(s) still running, and ending the process "
                       "now, without its exit hooks, so that they do not run twice at once; "
                       "they are pending again for any worker in %.0f s, their attempt not spent",
                       worker.worker_id, released, HANDBACK_MARGIN_SECONDS)
    worker.tally.flush()
    failure = worker.watchman.failure
    if failure is not None:  # the process ends before the error could be reported
        logger.error("worker %s: ended by an error", worker.worker_id, exc_info=failure)
        leave_now(1)
    logger.info("worker %s: stopped after %d job(s)", worker.worker_id, worker.processed)
    leave_now(worker.watchman.exit_status)


def stray_threads() -> list[threading.Thread]:
    """Live non-daemon threads other than the main one: what would keep the process alive."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def exit_without_stray_threads(status: int = 0) -> None:
    """End the process now if stray threads would keep it alive; otherwise return."""
    stray = stray_threads()
    if not stray:
        return
    logger.warning("leaving %d thread(s) that handlers started and did not stop: %s",
                   len(stray), ", ".join(sorted(t.name for t in stray)))
    connections.close_all()
    atexit._run_exitfuncs()
    flush_output()
    os._exit(status)


def leave_now(status: int = 0) -> NoReturn:
    """End the process now: no ``atexit`` function runs and no thread is waited for; the
    log lines and output written so far are flushed."""
    flush_output()
    os._exit(status)


def flush_output() -> None:
    handoff.stop()  # the worker's log records still queued (handoff.py)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
