"""The worker's log lines: for each job (started and finished, with structured extras), and a
summary of the jobs finished every ``SUMMARY_SECONDS``.

Levels: a job that completed logs its two lines at DEBUG, one that did not complete (failed,
canceled, snoozed) its end at WARNING, and the summary is INFO. A line per completed job at
INFO cost a quarter of a drain of quick jobs (formatting, the handler's lock, a write per
line); the summary costs a counter per job.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING

from .states import Outcome

if TYPE_CHECKING:
    from .models import Job
    from .outcomes import AttemptOutcome

logger = logging.getLogger("django_jobs.worker")


SUMMARY_SECONDS = 10.0


def log_start(worker_id: str, job: Job) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    logger.debug(
        "job started: %s %s attempt %d", job.public_id, job.type, job.attempt,
        extra={"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
               "attempt": job.attempt, "event": "job_started"},
    )


def log_end(worker_id: str, outcome: AttemptOutcome) -> None:
    job = outcome.job
    duration_ms = outcome.duration_ms
    level = logging.DEBUG if outcome.kind == Outcome.COMPLETED else logging.WARNING
    logger.log(
        level, "job %s: %s %s attempt %d in %.1f ms", outcome.kind, job.public_id, job.type,
        job.attempt, duration_ms,
        extra={"worker_id": worker_id, "job_id": job.public_id, "job_type": job.type,
               "attempt": job.attempt, "duration_ms": round(duration_ms, 3),
               "outcome": outcome.kind, "event": "job_finished"},
    )


class Tally:
    """Counts finished jobs by outcome and logs them at INFO every ``SUMMARY_SECONDS``."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.counts: dict[str, int] = {}
        self.since = time.monotonic()

    def add(self, written: list[AttemptOutcome]) -> None:
        counts = self.counts
        for outcome in written:
            kind = outcome.kind
            counts[kind] = counts.get(kind, 0) + 1
        if time.monotonic() - self.since >= SUMMARY_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Log what finished since the last summary, if anything did."""
        now = time.monotonic()
        counts, self.counts = self.counts, {}
        spent, self.since = now - self.since, now
        if not counts or not logger.isEnabledFor(logging.INFO):
            return
        total = sum(counts.values())
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        logger.info(
            "worker %s: %d job(s) finished in %.1f s: %s", self.worker_id, total, spent, kinds,
            extra={"worker_id": self.worker_id, "event": "jobs_summary", "jobs": total,
                   "seconds": round(spent, 3), "outcomes": counts},
        )


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
