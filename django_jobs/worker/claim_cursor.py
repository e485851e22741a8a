"""Where a worker's next claim starts reading the ready index (``ClaimRequest.after``).

A claim marks the rows it takes processing; their entries stay in the ready index until vacuum
removes them, at the index's front, where every claim from the start walks past them. Vacuum
removes them soon after the claim's transaction ends, unless a snapshot older than the claim
is still open (a long REPEATABLE READ transaction, a session idle in one, a long report):
then they pile up, and each claim walks all those of the rows claimed since that snapshot
(docs/explanation-performance.md, "A claim under a long-open snapshot").

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

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_jobs.core.contract import ClaimKey

if TYPE_CHECKING:
    from django_jobs.models import Job


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
