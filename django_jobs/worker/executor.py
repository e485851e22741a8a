"""The worker's executor: what runs the claimed jobs and times them out.

It owns the slot threads, the inbox of claimed jobs waiting for a thread, the jobs held (claimed
and not yet written, each with its timeout), the outbox the threads deliver outcomes to, and a
suspect job that must run alone (``worker/suspects.py``). The loop (``worker/loop.py``) and the
steps reach these through ``worker.executor``; the executor knows nothing of the database, the
claim or the process, so the steps that need those (the hand-back, the turn) stay outside it.

The outbox: the outcomes the slot threads hand back to the worker's loop, and when they wake it.

Slot threads finish jobs one at a time; the loop writes their outcomes in batches, one commit
per turn (``worker/turn.py``), and commits are what bound a queue's throughput. So a delivered
outcome waits here, and wakes the loop only when waking it is worth a turn: when every running job
has its outcome, or for the first outcome once no claimed job waits for a thread. The loop then
gives the other running jobs a moment (``BATCH_WINDOW_SECONDS``) to join the batch.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_jobs.core.outcomes import AttemptOutcome, now_us
from django_jobs.core.states import Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.exceptions import JobTimeout
from django_jobs.handlers.registry import get_handler
from django_jobs.worker.log_lines import log_start
from django_jobs.worker.producer import HANDBACK_AFTER_SECONDS
from django_jobs.worker.slots import DISPATCH_DELAY_SECONDS, Inbox, Slot

if TYPE_CHECKING:
    from django_jobs.models import Job
    from django_jobs.worker.wake import Wake

logger = logging.getLogger("django_jobs.worker")

# How long a handler interrupted at its timeout gets to stop before its thread is abandoned.
TIMEOUT_GRACE_SECONDS = 5.0


@dataclass(slots=True)
class Running:
    """What the worker holds for a job it claimed: the job, when a thread started it, its
    deadline, and whether its timeout has interrupted or abandoned it."""

    job: Job
    started: float
    deadline: float | None
    interrupted: bool = False
    abandoned: bool = False  # its timeout outcome is queued; never abandon it twice


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


class Executor:
    """The slot threads and the jobs they run, for one worker."""

    def __init__(self, worker_id: str, wake: Wake) -> None:
        self.worker_id = worker_id
        self.inbox = Inbox()  # claimed jobs waiting for a slot thread
        self.running: dict[int, Running] = {}  # the jobs claimed and not yet written, by id
        self.outbox = Outbox(wake, self.inbox, self.running)  # outcomes from the threads
        self.slots: list[Slot] = []
        self.solo: Job | None = None  # a job that was in a crash, to run alone (suspects.py)
        self.solo_started = False  # ``solo`` has been handed to a thread
        # Its last claim held a suspect: claim one job until one holds none (suspects.py).
        self.one_at_a_time = False

    def start_slots(self, count: int) -> None:
        """Start ``count`` more slot threads (one replaces a thread abandoned at a timeout)."""
        for _ in range(count):
            slot = Slot(self.inbox, self.on_start, self.outbox.deliver,
                        name=f"django-jobs-{len(self.slots)}")
            slot.start()
            self.slots.append(slot)

    def hand_out(self, jobs: list[Job]) -> None:
        """Hold ``jobs`` as running, each with its deadline, and hand them to the threads."""
        now = time.monotonic()
        deadlines: dict[str, float | None] = {}  # by type: a batch is mostly of one type
        for job in jobs:
            if job.type not in deadlines:
                found = get_handler(job.type)
                # A child process keeps its own deadline (worker/process_isolation.py).
                timeout = found.timeout if found and found.isolation is None else None
                deadlines[job.type] = now + timeout if timeout else None
            self.running[job.id] = Running(job, now, deadlines[job.type])
        self.inbox.put(jobs)

    def interrupt(self, pk: int, exc_class: type[BaseException]) -> None:
        """Raise ``exc_class`` in the thread running job ``pk`` (a cancel, a timeout)."""
        for slot in self.slots:
            if slot.interrupt(pk, exc_class):
                logger.warning("worker %s: stopping job %s: %s", self.worker_id, pk,
                               exc_class.__name__)
                return

    # Timeouts: interrupt, then abandon.

    def enforce_deadlines(self, now: float) -> None:
        """Interrupt each job past its timeout; abandon one that ignored it for the grace."""
        for pk, held in list(self.running.items()):
            if held.deadline is None or now < held.deadline:
                continue
            if not held.interrupted:
                held.interrupted = True
                self.interrupt(pk, JobTimeout)
            elif not held.abandoned and now >= held.deadline + TIMEOUT_GRACE_SECONDS:
                held.abandoned = True
                self.abandon(held)

    def abandon(self, held: Running) -> None:
        """A handler ignored its timeout: record the failure, replace its thread, move on."""
        for slot in self.slots:
            if slot.current == held.job.id:
                slot.abandoned = True
                self.slots.remove(slot)
                self.start_slots(1)
                break
        # The attempt's times are on this host's clock, as every attempt's are: its end now,
        # its start the time the handler has run before it (the job's started_at is the
        # database's).
        finished = now_us()
        started = finished - int((time.monotonic() - held.started) * 1_000_000)
        error = error_dict(
            type="JobTimeout",
            message="the handler ran past its timeout and did not stop; its thread was "
                    "abandoned",
        )
        self.outbox.deliver(AttemptOutcome(
            job=held.job, kind=Outcome.FAILED, error=error, started_at=started,
            finished_at=finished,
        ))

    def next_deadline_in(self, now: float) -> float | None:
        """Seconds until the nearest timeout (None: no running job has one)."""
        deadlines = [r.deadline for r in self.running.values() if r.deadline is not None]
        return max(min(deadlines) - now, 0.0) if deadlines else None

    # Claimed jobs no thread has started (``worker/producer.py`` says why they wait).

    def on_start(self, job: Job) -> None:
        """In a slot thread, as it starts ``job`` (one it holds): its timeout counts from now,
        not its claim."""
        held = self.running.get(job.id)
        if held is not None and held.deadline is not None:
            self.restart_clock(job, time.monotonic())
        log_start(self.worker_id, job)

    def restart_clock(self, job: Job, now: float) -> None:
        """Count a held job's wait (and its timeout, if it has one) from ``now``."""
        held = self.running.get(job.id)
        if held is None:
            return
        if held.deadline is not None:
            held.deadline += now - held.started
            held.interrupted = False
        held.started = now

    def overdue(self, now: float, stopping: bool) -> list[Job]:
        """The claimed jobs no thread has taken, taken out of the inbox to be handed back, once
        the oldest has waited ``HANDBACK_AFTER_SECONDS`` since its claim, or at once if the
        worker is ``stopping``; before that, give them to idle threads after a millisecond."""
        first = self.inbox.first()
        if first is None:
            return []
        held = self.running.get(first.id)
        if stopping or (held is not None and now - held.started >= HANDBACK_AFTER_SECONDS):
            return self.inbox.take_waiting()
        stalled = self.inbox.stalled_for(now)
        if stalled is not None and stalled >= DISPATCH_DELAY_SECONDS:
            self.inbox.spread()
        return []

    def next_tend(self) -> float:
        """Seconds until ``overdue`` has something to do (infinity: no job waits)."""
        stalled = self.inbox.stalled_for(time.monotonic())
        return math.inf if stalled is None else max(DISPATCH_DELAY_SECONDS - stalled, 0.0)

    def keep(self, jobs: list[Job]) -> None:
        """Jobs taken to be handed back that the database did not take: wait again, their
        clocks from now."""
        now = time.monotonic()
        for job in jobs:
            self.restart_clock(job, now)
        self.inbox.put(jobs)

    def drop(self, jobs: list[Job]) -> None:
        """Jobs handed back: no longer held."""
        for job in jobs:
            self.running.pop(job.id, None)
