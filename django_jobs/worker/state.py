"""A worker as its steps see it: ``WorkerState``.

The loop (``worker/loop.py``) hands itself to each step (``turn``, ``suspects``, ``heartbeat``,
``shutdown``); the steps are typed against this protocol, not the loop's class, so
none of them imports the loop, and what they may touch of a worker is written down here.
``loop.Worker`` is one: mypy checks it wherever the loop passes ``self`` to a step.

What claims is the worker's producer (``worker/producer.py``), what runs and times out the jobs
its executor (``worker/executor.py``), what supervises its process its watchman
(``worker/watchman.py``): parts of their own. This module imports the parts' types;
no part imports this module or a step, so the imports of ``worker/`` form no cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from django_jobs.core.database_parts import WakeUps
    from django_jobs.worker.executor import Executor
    from django_jobs.worker.log_lines import Tally
    from django_jobs.worker.options import WorkerOptions
    from django_jobs.worker.outage import Outages
    from django_jobs.worker.producer import Producer
    from django_jobs.worker.wake import Wake
    from django_jobs.worker.watchman import Watchman

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
    # The process's supervisor: signals, stop, exit status, systemd, the heartbeat's timing
    # and how far its last rescue looked.
    watchman: Watchman
    listener: WakeUps | None  # what wakes it on an enqueue, once the loop has started it

    @property
    def periodic(self) -> Callable[[str], None]:
        """The heartbeat's steps (``heartbeat.Periodic``), run with the worker's id."""
        ...

    # Where it stands.
    processed: int  # outcomes written so far

    @property
    def stopping(self) -> bool:
        """A stop was asked for: claim nothing more, let the running jobs end."""
        ...

    def announce_stop(self) -> None:
        """Log a requested stop and tell systemd, once."""
        ...

    def safely(self, func: Callable[..., T], *args: Any) -> T | None:
        """Run a database step; None if it failed or waits out a backoff (outage.py)."""
        ...
