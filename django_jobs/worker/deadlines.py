"""What a worker holds for each running job, and its timeouts: interrupt, then abandon."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_jobs.core.outcomes import AttemptOutcome, now_us
from django_jobs.core.states import Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.exceptions import JobTimeout
from django_jobs.models import Job

if TYPE_CHECKING:
    from django_jobs.worker.state import WorkerState

# How long a handler interrupted at its timeout gets to stop before its thread is abandoned.
TIMEOUT_GRACE_SECONDS = 5.0


@dataclass(slots=True)
class Running:
    job: Job
    started: float
    deadline: float | None
    interrupted: bool = False
    abandoned: bool = False  # its timeout outcome is queued; never abandon it twice


def enforce_deadlines(worker: WorkerState, now: float) -> None:
    """Interrupt each job past its timeout; abandon one that ignored it for the grace."""
    for pk, held in list(worker.running.items()):
        if held.deadline is None or now < held.deadline:
            continue
        if not held.interrupted:
            held.interrupted = True
            worker.interrupt(pk, JobTimeout)
        elif not held.abandoned and now >= held.deadline + TIMEOUT_GRACE_SECONDS:
            held.abandoned = True
            abandon(worker, held)


def abandon(worker: WorkerState, held: Running) -> None:
    """A handler ignored its timeout: record the failure, replace its thread, move on."""
    for slot in worker.slots:
        if slot.current == held.job.id:
            slot.abandoned = True
            worker.slots.remove(slot)
            worker.start_slots(1)
            break
    # The attempt's times are on this host's clock, as every attempt's are: its end now, its
    # start the time the handler has run before it (the job's started_at is the database's).
    finished = now_us()
    started = finished - int((time.monotonic() - held.started) * 1_000_000)
    error = error_dict(
        type="JobTimeout",
        message="the handler ran past its timeout and did not stop; its thread was abandoned",
    )
    worker.outbox.deliver(AttemptOutcome(
        job=held.job, kind=Outcome.FAILED, error=error, started_at=started, finished_at=finished,
    ))
