"""A worker as its steps see it: ``WorkerState``.

The loop (``worker/loop.py``) hands itself to each step (``turn``, ``claim_size``, ``suspects``,
``deadlines``, ``heartbeat``, ``shutdown``); the steps are typed against this protocol, not the
loop's class, so none of them imports the loop, and what they may touch of a worker is written
down here. ``loop.Worker`` is one: mypy checks it wherever the loop passes ``self`` to a step.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import uuid

    from django_jobs.core.database_parts import WakeUps
    from django_jobs.models import Job
    from django_jobs.worker.claim_cursor import ClaimCursor
    from django_jobs.worker.claim_size import ClaimSize
    from django_jobs.worker.deadlines import Running
    from django_jobs.worker.log_lines import Tally
    from django_jobs.worker.options import WorkerOptions
    from django_jobs.worker.outage import Outages
    from django_jobs.worker.outbox import Outbox
    from django_jobs.worker.periodic import Periodic
    from django_jobs.worker.slots import Inbox, Slot
    from django_jobs.worker.systemd import Notifier
    from django_jobs.worker.wake import Wake

T = TypeVar("T")


class WorkerState(Protocol):
    """What the worker's steps read, change and call of a worker."""

    # What it is.
    options: WorkerOptions  # what it was asked to do: queues, threads, budget, timings
    worker_id: str  # its name in the workers table and in every log line

    # Its parts.
    wake: Wake  # set to end the loop's wait at once
    inbox: Inbox  # claimed jobs waiting for a slot thread
    outbox: Outbox  # outcomes from the slot threads, waiting to be written
    slots: list[Slot]  # the slot threads that run the jobs
    sizer: ClaimSize  # how many jobs a turn claims
    cursor: ClaimCursor  # where its next claim starts reading the ready index
    tally: Tally  # the INFO summary of finished jobs
    outages: Outages  # database errors: the backoff, and one log line per outage
    periodic: Periodic  # the heartbeat's steps: the features', then the release
    systemd: Notifier  # sd_notify under systemd; does nothing elsewhere
    listener: WakeUps | None  # what wakes it on an enqueue, once the loop has started it
    previous_handlers: dict[int, object]  # the stop signals' handlers, restored at the end

    # What it holds.
    running: dict[int, Running]  # the jobs claimed and not yet written, by id
    in_doubt: list[uuid.UUID]  # lease tokens of claims whose reply was lost (turn.py)
    solo: Job | None  # a job that was in a crash, to run alone (suspects.py)
    solo_started: bool  # ``solo`` has been handed to a thread
    one_at_a_time: bool  # its last claim held a suspect: claim one job until one holds none
    claim_conflicted: bool  # its last claim met rows moved under it: claim again soon
    paused: set[str]  # the paused queues, read at each heartbeat; a claim skips them
    # The database's time of its last rescue that found no lease run out (heartbeat.py), and
    # when (time.monotonic()) its next rescue looks from the lease index's front.
    rescued_until: datetime | None
    full_rescue_at: float

    # Where it stands.
    claimed: int  # jobs claimed so far (``options.max_jobs`` bounds it)
    processed: int  # outcomes written so far
    stopping: bool  # a stop signal came: claim nothing more, let the running jobs end
    ending: bool  # shut_down has begun: a further stop signal is ignored
    failure: BaseException | None  # an error that ended the loop
    # The status of a process the worker ends itself (``shutdown.leave_running``): 0, or 3 when
    # it stops for ``runworker --reload`` (the status on which Django's reloader restarts it).
    exit_status: int

    def hand_out(self, jobs: list[Job]) -> None:
        """Hold ``jobs`` as running, each with its deadline, and hand them to the threads."""
        ...

    def interrupt(self, pk: int, exc_class: type[BaseException]) -> None:
        """Raise ``exc_class`` in the thread running job ``pk`` (a cancel, a timeout)."""
        ...

    def start_slots(self, count: int) -> None:
        """Start ``count`` more slot threads (one replaces a thread abandoned at a timeout)."""
        ...

    def announce_stop(self) -> None:
        """Log a requested stop and tell systemd, once."""
        ...

    def safely(self, func: Callable[..., T], *args: Any) -> T | None:
        """Run a database step; None if it failed or waits out a backoff (outage.py)."""
        ...
