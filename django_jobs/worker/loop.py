"""The worker: a loop that claims jobs for its slot threads and writes what they return.

Each turn of the loop (``Worker.run``) beats the heart when it is due (``worker/heartbeat.py``),
has its executor (``worker/executor.py``) enforce the running jobs' timeouts and tend the claimed
jobs no thread has started (``worker/producer.py``), tends a suspect job that must run alone
(``worker/suspects.py``), then writes the outcomes that came in and claims more
(``worker/turn.py``), and waits to be woken: by an outcome (the executor's outbox), an enqueue for
it (``engine/postgres/listener.py``), or the next poll, timeout or heartbeat. The executor's slot
threads run the jobs (``worker/slots.py``). Database
errors are waited out (``worker/outage.py``); a stop signal drains the worker (its watchman,
``worker/watchman.py``, owns the process's signals, stop, exit and systemd), and
``worker/shutdown.py`` ends it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django_jobs.core.database_parts import WakeUps, parts
from django_jobs.models import Job
from django_jobs.models.schema import jobs_database
from django_jobs.worker import execution, turn
from django_jobs.worker.executor import Executor
from django_jobs.worker.handoff import PairedThread, handoff
from django_jobs.worker.heartbeat import Periodic, heartbeat
from django_jobs.worker.log_lines import Tally, default_worker_id
from django_jobs.worker.options import WorkerOptions
from django_jobs.worker.outage import Outages
from django_jobs.worker.producer import HANDBACK_AFTER_SECONDS, Producer
from django_jobs.worker.shutdown import shut_down
from django_jobs.worker.wake import Wake
from django_jobs.worker.watchman import Abort, Watchman, register

logger = logging.getLogger("django_jobs.worker")

T = TypeVar("T")


class Worker:
    """One worker: its options, its parts (the producer: what it claims; the executor: what
    runs the jobs; the watchman: what supervises the process), the state its steps share, and
    the loop that runs them.

    The steps see it as a ``WorkerState`` (``worker/state.py``); the loop passes ``self`` to
    them, so mypy holds this class to that protocol."""

    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.worker_id = options.worker_id or default_worker_id()
        self.wake = Wake()  # and the listener's socket: the loop waits on both (wake.py)
        self.producer = Producer(options)  # what it claims, and how much
        self.tally = Tally(self.worker_id)  # the INFO summary of finished jobs
        self.executor = Executor(self.worker_id, self.wake)  # the slot threads and their jobs
        # signals, stop, exit, systemd, the heartbeat's timing
        self.watchman = Watchman(self.worker_id, self.wake, options.shutdown_timeout)
        self.processed = 0
        self.listener: WakeUps | None = None
        self.periodic = Periodic()  # the heartbeat's steps: the features', then the release
        # Database errors: back off, log once; after an outage the job threads reconnect.
        self.outages = Outages(self.worker_id, connections_lost=execution.connections_lost)

    # The loop.

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until nothing is ready); returns jobs run."""
        # Log records leave the loop and the slots at once, and span ends too (handoff.py).
        handoff.start(companion=_span_ends())
        try:
            return self._run()
        finally:
            handoff.stop()

    def _run(self) -> int:
        self._start()
        try:
            while self._pass():
                pass
        except Abort:
            logger.warning("worker %s: second signal, leaving at once", self.worker_id)
        except BaseException as exc:
            self.watchman.failure = exc  # raised on after shut_down, unless it ends the process
            raise
        finally:
            shut_down(self)
            parts(jobs_database()).session.keep_generic_plans(keep=False)
        return self.processed

    def _start(self) -> None:
        """Signals, slot threads, the workers table's row (waiting out an outage), the
        listener, systemd's READY."""
        self.watchman.start(self.options.stop_signals)
        session = parts(jobs_database()).session
        session.keep_generic_plans()  # the loop's: the engine's statements
        self.executor.start_slots(self.options.concurrency)
        while not self.safely(self._register) and not self.stopping:
            self.wake.wait(self._wait_time())
        if not self.options.burst:  # a burst drains what is ready: it waits for no enqueue
            self.listener = session.start_wakeups(self.wake, self.options.poll_interval,
                                                  self.options.queues)
        self.watchman.ready(self)

    def _pass(self) -> bool:
        """One pass of the loop: tend, then write and claim (a stopping worker or one past its
        ``max_jobs`` only writes), then wait; False when the worker is done."""
        if self.stopping or self._out_of_budget():
            self.announce_stop()
            turn.finish_outcomes(self)  # otherwise turn.claim writes them
        now = time.monotonic()
        self._tend(now)
        if self.stopping:
            if not self.executor.running or now >= self.watchman.stop_deadline:
                return False
        elif self._out_of_budget():
            if not self.executor.running:
                return False
        else:
            go_on = self._claim_turn()
            if go_on is not None:
                return go_on
        self._wait()
        return True

    def _tend(self, now: float) -> None:
        """systemd's watchdog, the heartbeat when due, the timeouts, the claimed jobs no thread
        has started, a suspect job that must run alone."""
        if self.watchman.tick(now, self):
            self.safely(heartbeat, self)
            self.watchman.beaten(now, self.options.heartbeat_seconds)
        self.executor.enforce_deadlines(now)
        # Claimed jobs waiting for a thread: to idle threads, or handed back (producer.py).
        self.hand_back(self.executor.overdue(now, self.stopping))
        if self.executor.solo is not None:  # a suspect that must run alone (suspects.py)
            from django_jobs.worker import suspects

            suspects.tend(self)

    def _claim_turn(self) -> bool | None:
        """Write the outcomes and claim (``turn.claim``). True: pass again at once (room left
        after a claim, or a burst's wait done); False: a burst worker's work is done; None:
        wait."""
        processed = self.processed
        sent = self.safely(turn.burst_now) if self.options.burst else None
        claimed = self.safely(turn.claim, self) or 0
        if sent is not None and self._idle(claimed):
            return self._burst_end(processed, sent)
        if ((claimed or self.producer.conflicted)
                and len(self.executor.running) < self.options.concurrency):
            return True
        return None

    def _idle(self, claimed: int) -> bool:
        """Nothing claimed by the turn, nothing running, no outage, no claim to try again."""
        return not (claimed or self.executor.running or self.outages.active
                    or self.producer.conflicted)

    def _burst_end(self, processed: int, sent: datetime) -> bool:
        """A burst worker that claimed nothing and holds nothing: False if nothing it could
        run is ready or due within ``--burst-wait``; otherwise True, after waiting for what
        is due (``turn.py``)."""
        if self.processed > processed and (
                self.safely(turn.burst_released, self, sent) or self.outages.active):
            return True  # what its finishes released is claimed by the next turn
        due = self.safely(turn.burst_due_in, self)
        if due is None and not self.outages.active:
            return False
        self._wait(due)
        return True

    def hand_back(self, jobs: list[Job]) -> None:
        """Return claimed jobs that never started to the queue, their attempt unspent; while
        the database is away, keep them and try again a bound later (producer.py)."""
        if not jobs:
            return
        self.producer.sizer.forget()
        released = self.safely(Job.objects.release, jobs)
        if released is None:  # logged by the outage
            self.executor.keep(jobs)
            return
        self.executor.drop(jobs)
        if not self.stopping:
            after = HANDBACK_AFTER_SECONDS
            logger.info("worker %s: handed back %d claimed job(s) that waited %.1f s for a "
                        "thread; they are pending again for any worker, their attempt not spent",
                        self.worker_id, released, after,
                        extra={"worker_id": self.worker_id, "event": "jobs_handed_back",
                               "jobs": released,
                               "reason": f"waited {after:.1f} s for a thread",
                               "next": "pending again for any worker, their attempt not spent"})

    # Stopping: the watchman's (watchman.py).

    def stop(self, *_args: object) -> None:
        """Drain (claim nothing more, give the running jobs the shutdown timeout); a second
        stop leaves at once (``Abort``): ``Watchman.stop``."""
        self.watchman.stop()

    @property
    def stopping(self) -> bool:
        return self.watchman.stopping

    def announce_stop(self) -> None:
        """Log a requested stop and tell systemd, once."""
        self.watchman.announce_stop(self)

    def _register(self) -> bool:
        register(self.worker_id, list(self.options.queues), self.options.concurrency)
        return True

    def _wait(self, at_most: float | None = None) -> None:
        """Wait to be woken (``wait_time``, or ``at_most`` seconds if sooner): by ``wake``, by
        a notification on the listener's connection, which it reads at once
        (``Listener.hear``), or, while it waits for jobs, by overlooked jobs its looks find
        (``Listener.look``)."""
        listener = self.listener
        looker = None if self.stopping else listener
        wait = self._wait_time()
        end = time.monotonic() + (wait if at_most is None else min(wait, at_most))
        while not self._wait_or_look(listener, looker, end):
            pass
        self.wake.clear()
        if listener is not None:
            listener.hear()

    def _wait_or_look(self, listener: WakeUps | None, looker: WakeUps | None,
                      end: float) -> bool:
        """Wait until ``end``, or until the looker's next look and look; True when the wait is
        over (its end, a wake, a notification, or jobs the look found)."""
        fileno = listener.fileno() if listener is not None else None
        now = time.monotonic()
        look = self._next_look(looker, now)
        if looker is None or look is None or look >= end - now:
            self.wake.wait_for(end - now, fileno)
            return True
        woken, readable = self.wake.wait_for(look, fileno)
        if woken or readable:
            return True
        # A waiting worker looks for jobs another was told of and did not take: a frozen
        # or dead worker's (engine/postgres/waiters.py); its next claim takes them.
        return bool(self.safely(looker.look, sorted(self.producer.paused)) or self.outages.active)

    def _next_look(self, looker: WakeUps | None, now: float) -> float | None:
        """Seconds to the looker's next look, not before a backoff's end (outage.py)."""
        look = looker.look_in(now) if looker is not None else None
        return None if look is None else max(look, self.outages.wait(now, default=0.0))

    def _out_of_budget(self) -> bool:
        return self.producer.out_of_budget()

    def _wait_time(self) -> float:
        """How long the loop may sleep: until the next poll, heartbeat, timeout, retry after
        an outage, dispatch of a waiting job, systemd watchdog ping, or the end of the
        shutdown timeout."""
        now = time.monotonic()
        wait = self.options.poll_interval
        if self.stopping:
            wait = min(wait, max(self.watchman.stop_deadline - now, 0.0))
        deadline = self.executor.next_deadline_in(now)
        if deadline is not None:
            wait = min(wait, deadline + 0.05)
        wait = min(wait, self.outages.wait(now, default=wait), self.watchman.next_ping_in(now))
        return min(wait, self.executor.next_tend(), self.options.heartbeat_seconds)

    def safely(self, func: Callable[..., T], *args: Any) -> T | None:
        """Run a database step; None if it failed or waits out a backoff (outage.py)."""
        return self.outages.attempt(getattr(func, "__name__", "step").lstrip("_"), func, *args)


def _span_ends() -> PairedThread | None:
    """The span ends' thread (``worker/span_ends.py``), when spans can be made: OpenTelemetry
    is loaded (a site that traces sets its SDK up before the worker starts)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from django_jobs.worker.span_ends import span_ends

    return span_ends
