"""The worker loop: claim up to free slots, run in threads, finish in batches, heartbeat,
rescue lost jobs, honour timeouts, cancel requests and pauses, and shut down gracefully."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from django.db import connection
from django.utils import timezone

from . import claimsize, solo
from .conf import jobs_settings
from .deadlines import Running, enforce_deadlines
from .exceptions import JobCanceled
from .isolation import finish_isolating, finish_one_by_one, refused
from .lifecycle import install_signals, register, restore_signals
from .listener import Listener
from .models import Job, QueueState
from .models import Worker as WorkerRow
from .outage import Outages
from .outcomes import AttemptOutcome
from .periodic import Periodic
from .registry import get_handler
from .sdnotify import Notifier
from .signals import job_finished
from .states import Outcome
from .threads import Inbox, Slot
from .worklog import Tally, default_worker_id, log_end

logger = logging.getLogger("django_jobs.worker")

# How long finished outcomes wait for the other running jobs of their batch (see _gather).
BATCH_WINDOW_SECONDS = 0.002


@dataclass
class WorkerOptions:
    queues: Sequence[str] = ()
    concurrency: int = 1
    burst: bool = False
    max_jobs: int | None = None
    poll_interval: float = field(default_factory=lambda: float(jobs_settings.POLL_INTERVAL))
    shutdown_timeout: float = field(default_factory=lambda: float(jobs_settings.SHUTDOWN_TIMEOUT))
    lease_seconds: float = field(default_factory=lambda: float(jobs_settings.LEASE_SECONDS))
    heartbeat_seconds: float = field(
        default_factory=lambda: float(jobs_settings.HEARTBEAT_SECONDS)
    )
    worker_id: str = ""
    prefetch: float = claimsize.PREFETCH_HORIZON_SECONDS  # seconds of work claimed ahead


class Abort(Exception):
    """A second stop signal: leave now."""


class Worker:
    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.worker_id = options.worker_id or default_worker_id()
        self.wake = threading.Event()
        self.inbox = Inbox()
        self.sizer = claimsize.ClaimSize(options.concurrency, options.prefetch)  # jobs per claim
        self.tally = Tally(self.worker_id)  # the INFO summary of finished jobs
        self.outbox: list[AttemptOutcome] = []  # from the slot threads; under _outbox_lock
        self._outbox_lock = threading.Lock()
        self._told = False  # the loop was woken for the outcomes waiting in the outbox
        self.running: dict[int, Running] = {}
        self.slots: list[Slot] = []
        self.stopping = False
        self.stop_deadline = 0.0
        self.claimed = 0
        self.processed = 0
        self.paused: set[str] = set()
        self.listener: Listener | None = None
        self._previous_handlers: dict[int, object] = {}
        self.periodic = Periodic()  # recurring jobs and automatic pruning
        self.solo: Job | None = None  # a job that was in a crash, to run alone (solo.py)
        self.solo_started = False
        self.systemd = Notifier()  # sd_notify under systemd; does nothing elsewhere
        self.outages = Outages(self.worker_id)  # database errors: back off, log once

    # The loop.

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until nothing is ready); returns jobs run."""
        self._previous_handlers = install_signals(self.stop)
        self._start_slots(self.options.concurrency)
        while not self._safely(self._register) and not self.stopping:
            self.wake.wait(self._wait_time())
        self.listener = Listener.start_for(connection, self.wake, self.options.poll_interval)
        self.systemd.ready(self)
        next_beat = 0.0
        try:
            while True:
                if self.stopping or self._out_of_budget():
                    self._finish_outcomes()  # otherwise _claim writes them with its claim
                now = time.monotonic()
                self.systemd.tick(now, self)
                if now >= next_beat:
                    self._safely(self._heartbeat)
                    next_beat = now + self.options.heartbeat_seconds
                enforce_deadlines(self, now)
                claimsize.tend(self, now)  # waiting jobs: to idle threads, or handed back
                solo.turn(self)
                if self.stopping:
                    if not self.running or now >= self.stop_deadline:
                        break
                elif self._out_of_budget():
                    if not self.running:
                        break
                else:
                    claimed = self._safely(self._claim) or 0
                    if self.options.burst and not (claimed or self.running or self.outages.active):
                        break
                    if claimed and len(self.running) < self.options.concurrency:
                        continue
                self.wake.wait(self._wait_time())
                self.wake.clear()
        except Abort:
            logger.warning("worker %s: second signal, leaving at once", self.worker_id)
        finally:
            self._shutdown()
        return self.processed

    def _claim(self) -> int:
        """Write the outcomes that came in and claim what claimsize.py says, in one transaction
        (on PostgreSQL usually one statement: ``JobManager.finish_and_claim``).

        One commit per turn of the loop instead of two: commits per second are what bound a
        queue's throughput (docs/explanation-performance.md). On a database error the outcomes
        go back to the outbox and are written on a later turn.
        """
        self._gather()
        outcomes = self._take_outcomes()
        self.sizer.observe(outcomes)
        free = self.sizer.limit(len(self.running) - len(outcomes))
        if self.solo is not None and all(o.job.id != self.solo.id for o in outcomes):
            free = 0  # a suspect runs alone (solo.py): claim nothing until it has ended
        if self.options.max_jobs is not None:
            free = min(free, self.options.max_jobs - self.claimed)
        if free <= 0 and not outcomes:
            return 0
        try:
            written, jobs = Job.objects.finish_and_claim(
                outcomes,
                worker_id=self.worker_id,
                limit=max(free, 0),
                lease_seconds=self.options.lease_seconds,
                queues=list(self.options.queues) or None,
                exclude_queues=sorted(self.paused),
            )
        except BaseException as exc:
            if outcomes and refused(exc):  # one outcome the database will not take: isolate it
                self._isolated(outcomes, exc)
                return self._claim()
            self._put_back(outcomes)
            raise
        self._record(outcomes, written)
        self.claimed += len(jobs)
        self._start(solo.admit(self, jobs, lambda job: Running(job, time.monotonic(), None)))
        return len(jobs)

    def _start(self, jobs: list[Job]) -> None:
        """Hold ``jobs`` as running, each with its deadline, and hand them to the threads."""
        now = time.monotonic()
        deadlines: dict[str, float | None] = {}  # by type: a batch is mostly of one type
        for job in jobs:
            if job.type not in deadlines:
                found = get_handler(job.type)
                timeout = found.timeout if found else None
                deadlines[job.type] = now + timeout if timeout else None
            self.running[job.id] = Running(job, now, deadlines[job.type])
        self.inbox.put(jobs)

    def _gather(self) -> None:
        """When some running jobs have finished and others have not, give those a moment
        (at most BATCH_WINDOW_SECONDS) to finish too, so that one commit finishes and refills
        many slots rather than a trickle of small batches each paying a commit."""
        if not 0 < len(self.outbox) < len(self.running):
            return
        deadline = time.monotonic() + BATCH_WINDOW_SECONDS
        while True:
            self.wake.clear()
            if len(self.outbox) >= len(self.running):
                return
            left = deadline - time.monotonic()
            if left <= 0 or not self.wake.wait(left):
                return

    def _deliver(self, outcome: AttemptOutcome) -> None:
        """A slot's outcome: queue it, and wake the loop when every running job has one, or
        for the first outcome once no claimed job waits in the inbox (then the loop gives
        the others up to BATCH_WINDOW_SECONDS, see _gather). While jobs still wait there, a
        thread will take them and deliver their outcomes too, and the loop is woken anyway
        if none takes them (Inbox); waking it before would only make it wait again: a
        thread switch, which costs more than a no-op job."""
        with self._outbox_lock:
            self.outbox.append(outcome)
            waiting = len(self.outbox)
            first = not self._told and not self.inbox.waiting()
            if first:  # once per turn: _take_outcomes resets it
                self._told = True
        if first or waiting >= len(self.running):
            self.wake.set()

    def _take_outcomes(self) -> list[AttemptOutcome]:
        with self._outbox_lock:
            taken, self.outbox = self.outbox, []
            self._told = False
        outcomes: list[AttemptOutcome] = []
        for outcome in taken:
            held = self.running.get(outcome.job.id)
            if held is not None and (  # the same attempt: the same instance, or its token
                held.job is outcome.job or held.job.lease_token == outcome.job.lease_token
            ):
                outcomes.append(outcome)
        return outcomes

    def _put_back(self, outcomes: list[AttemptOutcome]) -> None:
        """Outcomes a write could not make: written on a later turn."""
        with self._outbox_lock:
            self.outbox[:0] = outcomes

    def _finish_outcomes(self) -> None:
        outcomes = self._take_outcomes()
        if outcomes:
            self._write(outcomes)

    def _write(self, outcomes: list[AttemptOutcome]) -> None:
        done = self._safely(finish_isolating, outcomes)
        if done is None:  # the database is away: keep them and try again (outage.py)
            self._put_back(outcomes)
            return
        self._settle(outcomes, *done)

    def _isolated(self, outcomes: list[AttemptOutcome], exc: BaseException) -> None:
        """The database refused the batch: write its outcomes one by one (isolation.py)."""
        self._settle(outcomes, *finish_one_by_one(outcomes, exc))

    def _settle(self, outcomes: list, written: list, unwritten: list) -> None:
        self._put_back(unwritten)
        self._record([o for o in outcomes if o not in unwritten], written)

    def _record(self, outcomes: list[AttemptOutcome], written: list[AttemptOutcome]) -> None:
        """After the write: free the slots, count, log and signal what was written."""
        for outcome in outcomes:
            self.running.pop(outcome.job.id, None)
        lost = len(outcomes) - len(written)
        if lost:
            logger.warning(
                "worker %s: %d outcome(s) dropped: lease taken over", self.worker_id, lost
            )
        self.processed += len(written)
        send = job_finished.has_listeners(Job)
        log = logger.isEnabledFor(logging.DEBUG)
        for outcome in written:
            if log or outcome.kind != Outcome.COMPLETED:
                log_end(self.worker_id, outcome)
            if send:
                job_finished.send(sender=Job, job=outcome.job, outcome=outcome.kind)
        self.tally.add(written)

    # Heartbeat, rescue, pauses, deadlines.

    def _heartbeat(self) -> None:
        held = {pk: r.job.lease_token for pk, r in self.running.items()}
        still, cancel = Job.objects.heartbeat(held=held, lease_seconds=self.options.lease_seconds)
        for pk in set(held) - still:
            logger.warning("worker %s: lost the lease of job %s", self.worker_id, pk)
        for pk in cancel:
            self._interrupt(pk, JobCanceled)
        for job in Job.objects.rescue():
            logger.warning(
                "worker %s: rescued job %s of lost worker %s: %s",
                self.worker_id, job.public_id, job.worker_id, job.status,
            )
        self.paused = set(QueueState.objects.filter(paused=True).values_list("name", flat=True))
        WorkerRow.objects.filter(pk=self.worker_id).update(
            last_heartbeat=timezone.now(), running=len(self.running)
        )
        stale = timezone.now() - timedelta(seconds=self.options.lease_seconds * 4)
        WorkerRow.objects.filter(last_heartbeat__lt=stale).delete()
        self.periodic(self.worker_id)  # recurring jobs and automatic pruning

    def _interrupt(self, pk: int, exc_class: type[BaseException]) -> None:
        for slot in self.slots:
            if slot.interrupt(pk, exc_class):
                logger.warning("worker %s: stopping job %s: %s", self.worker_id, pk,
                               exc_class.__name__)
                return

    # Start, stop, signals.

    def stop(self, *_args: object) -> None:
        if self.stopping:
            raise Abort
        logger.info("worker %s: stopping; %d job(s) running", self.worker_id, len(self.running))
        self.stopping = True
        self.stop_deadline = time.monotonic() + self.options.shutdown_timeout
        self.systemd.stopping(self)
        self.wake.set()

    def _start_slots(self, count: int) -> None:
        for _ in range(count):
            slot = Slot(self.inbox, partial(claimsize.on_start, self), self._deliver,
                        name=f"django-jobs-{len(self.slots)}")
            slot.start()
            self.slots.append(slot)

    def _register(self) -> bool:
        register(self.worker_id, list(self.options.queues), self.options.concurrency)
        return True

    def _shutdown(self) -> None:
        self.systemd.stopping(self)
        self.outages.retry_now()
        self._finish_outcomes()
        if self.running:
            released = self._safely(Job.objects.release, [r.job for r in self.running.values()])
            logger.warning("worker %s: handed back %s unfinished job(s)", self.worker_id, released)
            self.running.clear()
        self.inbox.close(len(self.slots))
        if self.listener:
            self.listener.stop()
        self._safely(lambda: WorkerRow.objects.filter(pk=self.worker_id).delete())
        restore_signals(self._previous_handlers)
        self.systemd.close()
        self.tally.flush()
        logger.info("worker %s: stopped after %d job(s)", self.worker_id, self.processed)

    def _out_of_budget(self) -> bool:
        return self.options.max_jobs is not None and self.claimed >= self.options.max_jobs

    def _wait_time(self) -> float:
        wait = self.options.poll_interval
        if self.stopping:
            wait = min(wait, max(self.stop_deadline - time.monotonic(), 0.0))
        deadlines = [r.deadline for r in self.running.values() if r.deadline is not None]
        if deadlines:
            wait = min(wait, max(min(deadlines) - time.monotonic(), 0.0) + 0.05)
        wait = min(wait, self.outages.wait(time.monotonic(), default=wait))
        return min(wait, claimsize.next_tend(self.inbox), self.options.heartbeat_seconds)

    def _safely(self, func, *args):  # type: ignore[no-untyped-def]
        """Run a database step; None if it failed or waits out a backoff (outage.py)."""
        return self.outages.attempt(getattr(func, "__name__", "step").lstrip("_"), func, *args)
