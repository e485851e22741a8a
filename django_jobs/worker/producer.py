"""The worker's producer: what claims and how much.

It owns how many jobs a claim takes (``worker/claim_size.py``), where the next claim starts
reading the ready index (``worker/claim_cursor.py``), the jobs claimed so far against
``--max-jobs``, the claims whose reply was lost, whether the last claim met rows moved under it,
and the paused queues a claim skips. The turn (``worker/turn.py``) claims through it; the
producer itself reads no database and imports no step.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django_jobs.worker.claim_cursor import ClaimCursor
from django_jobs.worker.claim_size import ClaimSize

if TYPE_CHECKING:
    from django_jobs.worker.options import WorkerOptions


class Producer:
    """What a worker's claims are made of, for one worker."""

    def __init__(self, options: WorkerOptions) -> None:
        self.max_jobs = options.max_jobs
        self.sizer = ClaimSize(options.concurrency, options.prefetch)  # jobs per claim
        self.cursor = ClaimCursor(options.heartbeat_seconds, options.queues)  # claims start
        self.claimed = 0  # jobs claimed so far (``max_jobs`` bounds it)
        self.in_doubt: list[uuid.UUID] = []  # lease tokens of claims whose reply was lost
        self.conflicted = False  # the last claim met rows moved under it: claim again soon
        self.paused: set[str] = set()  # the paused queues, read at each heartbeat

    def out_of_budget(self) -> bool:
        """It has claimed its ``max_jobs``."""
        return self.max_jobs is not None and self.claimed >= self.max_jobs

    def budget_left(self, free: int) -> int:
        """``free``, within what ``max_jobs`` leaves."""
        return free if self.max_jobs is None else min(free, self.max_jobs - self.claimed)
