"""The worker's producer: what claims and how much.

It owns how many jobs a claim takes (``ClaimSize``), where the next claim starts reading the
ready index (``ClaimCursor``), the jobs claimed so far against ``--max-jobs``, the claims whose
reply was lost, whether the last claim met rows moved under it, and the paused queues a claim
skips. The turn (``worker/turn.py``) claims through it; the producer itself reads no database
and imports no step.

How many jobs a claim takes, and what becomes of claimed jobs no thread starts. A turn claims
the free slots plus a prefetch: as many more jobs as the threads are expected to start within
``PREFETCH_HORIZON_SECONDS``, from the recent jobs' durations. Quick jobs come in batches of up
to ``MAX_CLAIM`` per claim whatever ``--concurrency`` says; a worker whose jobs take longer than
the horizon claims only its free slots, one job per slot. Until its first outcome a worker knows
no duration and claims only its free slots.

The bound: a prefetched job waits for a thread about the horizon when the estimate holds. When
it does not (a job that is slow where the recent ones were quick), no claimed job waits longer
than ``HANDBACK_AFTER_SECONDS`` after its claim: then the jobs still waiting go back to the
queue unspent, for other workers to run, and the worker prefetches nothing until its next
outcome. A stopping worker hands back its waiting jobs at once rather than start them. A job's
timeout counts from when a thread starts it, not from its claim. The executor
(``worker/executor.py``) holds the waiting jobs and says when they are overdue; the loop hands
them back (``Worker.hand_back``).

Where the next claim starts reading the ready index (``ClaimRequest.after``). A claim marks the
rows it takes processing; their entries stay in the ready index until vacuum removes them, at
the index's front, where every claim from the start walks past them. Vacuum removes them soon
after the claim's transaction ends, unless a snapshot older than the claim is still open (a long
REPEATABLE READ transaction, a session idle in one, a long report): then they pile up, and each
claim walks all those of the rows claimed since that snapshot (docs/explanation-performance.md,
"A claim under a long-open snapshot").

So a worker remembers where its last claim ended, the key of the last of its jobs in claim
order, and its next claim reads the rows after that key. Nothing after the key: the engine
reads from the start at once, so an empty claim still means nothing is ready. A row placed
before the key (a higher priority enqueued later, a run_at in the past, a job handed back or
rescued) is read by the next claim from the start, which the worker sends at least once every
``heartbeat_seconds`` and after any claim that took nothing: such a row waits at most a
heartbeat, and only while rows after the key are ready. A claim from the start that met rows
moved under it (``ClaimConflict``) counts as sent, and such a row waits another heartbeat.

A worker of two or more queues claims from the start always: its claim merges one walk of the
ready index per queue, and bounded by a key PostgreSQL sorts what they read instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_jobs.core.contract import ClaimKey
from django_jobs.worker.options import PREFETCH_HORIZON_SECONDS

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job
    from django_jobs.worker.options import WorkerOptions

HANDBACK_AFTER_SECONDS = 0.5
MAX_CLAIM = 100


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


class ClaimCursor:
    """The key a worker's next claim starts after, and when it next claims from the start."""

    def __init__(self, restart_seconds: float, queues: Sequence[str] = ()) -> None:
        self.restart_seconds = restart_seconds
        self.used = len(set(queues)) < 2  # one walk of the index: all queues or one
        self.key: ClaimKey | None = None
        self.restart_at = 0.0  # time.monotonic(): the next claim at or after it is from the start

    def after(self, now: float) -> ClaimKey | None:
        """The key for a claim sent at ``now``; None (from the start) once it is time to."""
        if now >= self.restart_at or not self.used:
            return None
        return self.key

    def claimed(self, after: ClaimKey | None, jobs: list[Job], now: float) -> None:
        """A claim sent with ``after`` took ``jobs``: the next starts after the last of them,
        or from the start if it took none."""
        if after is None:
            self.restart_at = now + self.restart_seconds
        self.key = ClaimKey.furthest(jobs)

    def restart(self) -> None:
        """The next claim reads from the start (it is for rows placed before the key)."""
        self.restart_at = 0.0

    def conflicted(self, after: ClaimKey | None, now: float) -> None:
        """A claim sent with ``after`` met rows moved under it on every try and took nothing
        (``ClaimConflict``): other workers are claiming where it read. The key stays; a claim
        from the start counts as sent, so the next claims read after the key (a claim from the
        start walks furthest, and meets the most such rows, under a long-open snapshot)."""
        if after is None:
            self.restart_at = now + self.restart_seconds
