"""Suspects run alone: a job that has been in a worker crash runs with nothing beside it.

Only one of the jobs a dead worker held may have killed it, and the rescue cannot tell which
(``features/crashes.py``). So a job with ``crashes > 0`` is run alone: the worker that claims it
hands the rest of its batch back unspent, claims nothing more, lets its running jobs finish, and
only then starts the suspect. If the worker dies now, the suspect was alone, and the crash is its
own; an innocent job that only shared a crash completes on its solo run.

The jobs a dead worker held come back as suspects together, and a batch of them would be handed
back but one, then claimed again and handed back but one, as many times as there are suspects.
So a worker whose claim held a suspect claims one job at a time until a claim holds none.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from django_jobs.models import Job

if TYPE_CHECKING:
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")


def admit(worker: WorkerState, jobs: list[Job], held: Any) -> list[Job]:
    """The claimed jobs to start now. A batch holding a suspect: the first suspect waits to
    run alone (held in ``worker.executor.running`` as ``held(job)``, so its lease is renewed)
    and the other jobs go back to the queue unspent."""
    if worker.executor.solo is not None:  # start it, or forget it if it has ended
        tend(worker)
        if worker.executor.solo is not None:
            return jobs
    for suspect in jobs:
        if suspect.crashes:
            break
    else:  # no suspect: every batch but a few after a crash
        if jobs:
            worker.executor.one_at_a_time = False
        return jobs
    worker.executor.one_at_a_time = True
    if not hand_back(worker, [job for job in jobs if job is not suspect], suspect):
        return jobs  # not handed back: run them all as claimed, the suspect too
    logger.info("worker %s: job %s was in %d crash(es): it runs alone once the running jobs "
                "end", worker.worker_id, suspect.public_id, suspect.crashes)
    worker.executor.solo, worker.executor.solo_started = suspect, False
    worker.executor.running[suspect.id] = held(suspect)
    tend(worker)  # at once if nothing else runs
    return []


def hand_back(worker: WorkerState, others: list[Job], suspect: Job) -> bool:
    """Put the jobs claimed beside ``suspect`` back in the queue, unspent; False if the
    database did not take them back."""
    if not others:
        return True
    try:
        Job.objects.release(others)
    except DatabaseError:
        logger.warning("worker %s: could not hand back jobs to run suspect job %s alone",
                       worker.worker_id, suspect.public_id)
        return False
    return True


def tend(worker: WorkerState) -> None:
    """Start the waiting suspect once it is the only job held; forget it once it has ended;
    hand it back if the worker is stopping before it started."""
    job = worker.executor.solo
    if job is None or (worker.executor.solo_started and job.id in worker.executor.running):
        return
    if job.id not in worker.executor.running:  # its outcome is written
        worker.executor.solo = None
    elif worker.stopping:
        worker.executor.running.pop(job.id, None)
        worker.executor.solo = None
        worker.safely(Job.objects.release, [job])
    elif len(worker.executor.running) == 1:
        worker.executor.solo_started = True
        worker.executor.hand_out([job])
