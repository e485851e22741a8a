"""How a worker ends, whatever ended its loop (a stop signal, ``--burst``, ``--max-jobs``, an
error): nothing it holds is lost, and nothing of it is left behind.

The outcomes that came in are written (one last try, even during an outage); the jobs still
running or waiting for a thread, and those of a claim whose reply was lost (``turn.py``), are
handed back to the queue, their attempt unspent, for another worker to run; the slot threads
and the listener are stopped; the worker's row is removed; the process's signal handlers are
restored; the summary of finished jobs is logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import turn
from .lifecycle import restore_signals
from .models import Job
from .models import Worker as WorkerRow

if TYPE_CHECKING:
    from .worker import Worker

logger = logging.getLogger("django_jobs.worker")


def shut_down(worker: Worker) -> None:
    """End ``worker`` (see the module's docstring); each database step is tried once."""
    worker.announce_stop()
    worker.systemd.stopping(worker)  # also when the loop ended by itself (--burst, --max-jobs)
    worker.outages.retry_now()
    turn.finish_outcomes(worker)
    worker.safely(turn.release_in_doubt, worker)
    if worker.running:
        released = worker.safely(Job.objects.release, [r.job for r in worker.running.values()])
        logger.warning("worker %s: handed back %s unfinished job(s)", worker.worker_id, released)
        worker.running.clear()
    worker.inbox.close(len(worker.slots))
    if worker.listener:
        worker.listener.stop()
    worker.safely(lambda: WorkerRow.objects.filter(pk=worker.worker_id).delete())
    restore_signals(worker.previous_handlers)
    if worker.signal_wake is not None:
        worker.signal_wake.close()
    worker.systemd.close()
    worker.tally.flush()
    logger.info("worker %s: stopped after %d job(s)", worker.worker_id, worker.processed)
