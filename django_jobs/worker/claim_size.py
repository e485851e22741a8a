"""How many jobs a worker claims per turn, and what becomes of claimed jobs no thread starts.

A turn claims the free slots plus a prefetch: as many more jobs as the threads are expected to
start within ``PREFETCH_HORIZON_SECONDS``, from the recent jobs' durations. Quick jobs come in
batches of up to ``MAX_CLAIM`` per claim whatever ``--concurrency`` says; a worker whose jobs
take longer than the horizon claims only its free slots, one job per slot. Until its first
outcome a worker knows no duration and claims only its free slots.

The bound: a prefetched job waits for a thread about the horizon when the estimate holds. When
it does not (a job that is slow where the recent ones were quick), no claimed job waits longer
than ``HANDBACK_AFTER_SECONDS`` after its claim: then the jobs still waiting go back to the
queue unspent, for other workers to run, and the worker prefetches nothing until its next
outcome. A stopping worker hands back its waiting jobs at once rather than start them. A job's
timeout counts from when a thread starts it, not from its claim.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from django_jobs.models import Job
from django_jobs.worker.log_lines import log_start
from django_jobs.worker.slots import DISPATCH_DELAY_SECONDS, Inbox

if TYPE_CHECKING:
    from collections.abc import Mapping

    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.worker.deadlines import Running
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")

PREFETCH_HORIZON_SECONDS = 0.05
HANDBACK_AFTER_SECONDS = 0.5
MAX_CLAIM = 100


class ClaimSize:
    """The number of jobs to hold (running or waiting for a thread) for ``concurrency``
    threads, from a moving average of the jobs' durations."""

    def __init__(self, concurrency: int, horizon: float = PREFETCH_HORIZON_SECONDS,
                 most: int = MAX_CLAIM) -> None:
        self.concurrency, self.horizon, self.most = concurrency, horizon, max(most, concurrency)
        self.average_us: float | None = None  # None: no duration known yet

    def observe(self, outcomes: list[AttemptOutcome]) -> None:
        """Fold a batch's durations into the average (half the weight to the new batch)."""
        if not outcomes:
            return
        spent = 0
        for outcome in outcomes:
            spent += outcome.finished - outcome.started
        mean = max(spent / len(outcomes), 1.0)
        self.average_us = mean if self.average_us is None else (self.average_us + mean) / 2

    def forget(self) -> None:
        """The average no longer holds (a job ran far past it): prefetch nothing for now."""
        self.average_us = None

    def prefetch(self) -> int:
        if self.average_us is None:
            return 0
        ahead = int(self.concurrency * self.horizon * 1_000_000 / self.average_us)
        return min(ahead, self.most - self.concurrency)

    def limit(self, held: int) -> int:
        """How many jobs to claim now, holding ``held`` jobs whose outcome is not in."""
        return self.concurrency + self.prefetch() - held


def tend(worker: WorkerState, now: float) -> None:
    """Claimed jobs no thread has taken: give them to idle threads after a millisecond; hand
    them back once the oldest has waited ``HANDBACK_AFTER_SECONDS`` since its claim, or at once
    if the worker is stopping."""
    inbox = worker.inbox
    first = inbox.first()
    if first is None:
        return
    held = worker.running.get(first.id)
    if worker.stopping or (held is not None and now - held.started >= HANDBACK_AFTER_SECONDS):
        hand_back(worker, inbox.take_waiting())
        return
    stalled = inbox.stalled_for(now)
    if stalled is not None and stalled >= DISPATCH_DELAY_SECONDS:
        inbox.spread()


def next_tend(inbox: Inbox) -> float:
    """Seconds until ``tend`` has something to do (infinity: no job waits)."""
    stalled = inbox.stalled_for(time.monotonic())
    return math.inf if stalled is None else max(DISPATCH_DELAY_SECONDS - stalled, 0.0)


def hand_back(worker: WorkerState, jobs: list[Job]) -> None:
    """Return claimed jobs that never started to the queue, their attempt unspent."""
    if not jobs:
        return
    worker.sizer.forget()
    released = worker.safely(Job.objects.release, jobs)
    if released is None:  # the database is away (logged): keep them, try again a bound later
        now = time.monotonic()
        for job in jobs:
            restart_clock(worker.running, job, now)
        worker.inbox.put(jobs)
        return
    for job in jobs:
        worker.running.pop(job.id, None)
    if not worker.stopping:
        logger.info("worker %s: handed back %d claimed job(s) that waited %.1f s for a thread; "
                    "they are pending again for any worker, their attempt not spent",
                    worker.worker_id, released, HANDBACK_AFTER_SECONDS,
                    extra={"worker_id": worker.worker_id, "event": "jobs_handed_back",
                           "jobs": released,
                           "reason": f"waited {HANDBACK_AFTER_SECONDS:.1f} s for a thread",
                           "next": "pending again for any worker, their attempt not spent"})


def on_start(running: Mapping[int, Running], worker_id: str, job: Job) -> None:
    """In a slot thread, as it starts ``job`` (one of the worker's ``running``): its timeout
    counts from now, not its claim."""
    held = running.get(job.id)
    if held is not None and held.deadline is not None:
        restart_clock(running, job, time.monotonic())
    log_start(worker_id, job)


def restart_clock(running: Mapping[int, Running], job: Job, now: float) -> None:
    """Count a held job's wait (and its timeout, if it has one) from ``now``."""
    held = running.get(job.id)
    if held is None:
        return
    if held.deadline is not None:
        held.deadline += now - held.started
        held.interrupted = False
    held.started = now
