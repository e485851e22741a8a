"""The worker's log lines for one job: started and finished, with structured extras."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING

from .states import Outcome

if TYPE_CHECKING:
    from .models import Job
    from .outcomes import AttemptOutcome

logger = logging.getLogger("django_jobs.worker")


def log_start(worker_id: str, job: Job) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    logger.info(
        "job started: %s %s attempt %d", job.public_id, job.type, job.attempt,
        extra={"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
               "attempt": job.attempt, "event": "job_started"},
    )


def log_end(worker_id: str, outcome: AttemptOutcome) -> None:
    job = outcome.job
    duration_ms = outcome.duration_ms
    level = logging.INFO if outcome.kind == Outcome.COMPLETED else logging.WARNING
    logger.log(
        level, "job %s: %s %s attempt %d in %.1f ms", outcome.kind, job.public_id, job.type,
        job.attempt, duration_ms,
        extra={"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
               "attempt": job.attempt, "duration_ms": round(duration_ms, 3),
               "outcome": outcome.kind, "event": "job_finished"},
    )


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
