"""A worker as its steps see it: ``WorkerState``.

The loop (``worker/loop.py``) hands itself to each step (``turn``, ``suspects``, ``heartbeat``,
``shutdown``, ``burst``); the steps are typed against this protocol, not the loop's class, so
none of them imports the loop, and what they may touch of a worker is written down here.
``loop.Worker`` is one: mypy checks it wherever the loop passes ``self`` to a step.

What claims is the worker's producer (``worker/producer.py``), what runs and times out the jobs
its executor (``worker/executor.py``): parts of their own. This module imports the parts' types;
no part imports this module or a step, so the imports of ``worker/`` form no cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from django_jobs.core.database_parts import WakeUps
    from django_jobs.worker.executor import Executor
    from django_jobs.worker.log_lines import Tally
    from django_jobs.worker.options import WorkerOptions
    from django_jobs.worker.outage import Outages
    from django_jobs.worker.periodic import Periodic
    from django_jobs.worker.producer import Producer
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
    executor: Executor  # the slot threads, the jobs they hold and run, their outcomes
    producer: Producer  # what it claims and how much: size, cursor, budget, paused queues
    tally: Tally  # the INFO summary of finished jobs
    outages: Outages  # database errors: the backoff, and one log line per outage
    periodic: Periodic  # the heartbeat's steps: the features', then the release
    systemd: Notifier  # sd_notify under systemd; does nothing elsewhere
    listener: WakeUps | None  # what wakes it on an enqueue, once the loop has started it
    previous_handlers: dict[int, object]  # the stop signals' handlers, restored at the end

    # What it holds.
    # The database's time of its last rescue that found no lease run out (heartbeat.py), and
    # when (time.monotonic()) its next rescue looks from the lease index's front.
    rescued_until: datetime | None
    full_rescue_at: float

    # Where it stands.
    processed: int  # outcomes written so far
    stopping: bool  # a stop signal came: claim nothing more, let the running jobs end
    ending: bool  # shut_down has begun: a further stop signal is ignored
    failure: BaseException | None  # an error that ended the loop
    # The status of a process the worker ends itself (``shutdown.leave_running``): 0, or 3 when
    # it stops for ``runworker --reload`` (the status on which Django's reloader restarts it).
    exit_status: int

    def announce_stop(self) -> None:
        """Log a requested stop and tell systemd, once."""
        ...

    def safely(self, func: Callable[..., T], *args: Any) -> T | None:
        """Run a database step; None if it failed or waits out a backoff (outage.py)."""
        ...
