"""The outcomes the slot threads hand back to the worker's loop, and when they wake it.

Slot threads finish jobs one at a time; the loop writes their outcomes in batches, one commit
per turn (``worker/turn.py``), and commits are what bound a queue's throughput. So a delivered
outcome waits here, and wakes the loop only when waking it is worth a turn: when every running job
has its outcome, or for the first outcome once no claimed job waits for a thread. The loop then
gives the other running jobs a moment (``BATCH_WINDOW_SECONDS``) to join the batch.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.worker.deadlines import Running
    from django_jobs.worker.slots import Inbox
    from django_jobs.worker.wake import Wake

# How long finished outcomes wait for the other running jobs of their batch (see gather).
BATCH_WINDOW_SECONDS = 0.002


class Outbox:
    """Outcomes delivered by the slot threads (any thread), taken by the loop (its thread).

    ``running`` is the worker's own map of the jobs it holds, read here, never changed.
    """

    def __init__(self, wake: Wake, inbox: Inbox,
                 running: Mapping[int, Running]) -> None:
        self.wake, self.inbox, self.running = wake, inbox, running
        self.outcomes: list[AttemptOutcome] = []  # under _lock
        self._lock = threading.Lock()
        self._told = False  # the loop was woken for the outcomes waiting here
        # After writes that timed out (turn.py): the most outcomes one write takes (None: all
        # that are here), and by job id how many writes of its outcome alone timed out.
        self.limit: int | None = None
        self.timeouts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.outcomes)

    def deliver(self, outcome: AttemptOutcome) -> None:
        """A slot's outcome: keep it, and wake the loop when every running job has one, or for
        the first outcome once no claimed job waits in the inbox (then the loop gives the
        others up to BATCH_WINDOW_SECONDS, see gather). While jobs still wait there, a thread
        will take them and deliver their outcomes too, and the loop is woken anyway if none
        takes them (Inbox); waking it before would only make it wait again: a thread switch,
        which costs more than a no-op job."""
        with self._lock:
            self.outcomes.append(outcome)
            waiting = len(self.outcomes)
            first = not self._told and not self.inbox.waiting()
            if first:  # once per turn: take resets it
                self._told = True
        if first or waiting >= len(self.running):
            self.wake.set()

    def gather(self) -> None:
        """When some running jobs have finished and others have not, give those a moment
        (at most BATCH_WINDOW_SECONDS) to finish too, so that one commit finishes and refills
        many slots rather than a trickle of small batches each paying a commit."""
        if not 0 < len(self.outcomes) < len(self.running):
            return
        deadline = time.monotonic() + BATCH_WINDOW_SECONDS
        while True:
            self.wake.clear()
            if len(self.outcomes) >= len(self.running):
                return
            left = deadline - time.monotonic()
            if left <= 0 or not self.wake.wait(left):
                return

    def take(self) -> list[AttemptOutcome]:
        """The outcomes delivered since the last take, each of an attempt the worker still
        holds (the same job instance, or its lease token); the others are dropped. At most
        ``limit`` of them: the rest stay here, first in line for the next take."""
        with self._lock:
            taken, self.outcomes = self.outcomes, []
            self._told = False
        outcomes: list[AttemptOutcome] = []
        for outcome in taken:
            held = self.running.get(outcome.job.id)
            if held is not None and (
                held.job is outcome.job or held.job.lease_token == outcome.job.lease_token
            ):
                outcomes.append(outcome)
            else:
                self.timeouts.pop(outcome.job.id, None)
        if self.limit is not None and len(outcomes) > self.limit:
            self.put_back(outcomes[self.limit:])
            del outcomes[self.limit:]
        return outcomes

    def put_back(self, outcomes: list[AttemptOutcome]) -> None:
        """Outcomes a write could not make: taken again, first, on a later turn.

        They may wait here through an outage of hours, so their exceptions keep the traceback
        (files, lines, functions: the log line's and an error tracker's stack) but let go of
        the frames' local variables, which can hold whatever a handler had loaded.
        """
        for outcome in outcomes:
            if outcome.exception is not None:
                traceback.clear_frames(outcome.exception.__traceback__)
        with self._lock:
            self.outcomes[:0] = outcomes
