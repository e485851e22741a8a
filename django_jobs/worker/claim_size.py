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
timeout counts from when a thread starts it, not from its claim. The executor
(``worker/executor.py``) holds the waiting jobs and says when they are overdue; the loop hands
them back (``Worker.hand_back``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome

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
