"""What a worker is asked to do: its queues, threads, budget, and timings (``runworker``'s
options; a program that embeds a ``Worker`` builds them itself)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django_jobs.core.settings import jobs_settings

# Seconds of work a claim takes ahead of the free slots (the producer, ``worker/producer.py``).
PREFETCH_HORIZON_SECONDS = 0.05


@dataclass
class WorkerOptions:
    queues: Sequence[str] = ()
    concurrency: int = 1
    burst: bool = False
    burst_wait: float = 0.0  # a burst worker waits for jobs due within this many seconds
    max_jobs: int | None = None
    poll_interval: float = field(default_factory=lambda: float(jobs_settings.POLL_INTERVAL))
    shutdown_timeout: float = field(default_factory=lambda: float(jobs_settings.SHUTDOWN_TIMEOUT))
    lease_seconds: float = field(default_factory=lambda: float(jobs_settings.LEASE_SECONDS))
    heartbeat_seconds: float = field(
        default_factory=lambda: float(jobs_settings.HEARTBEAT_SECONDS)
    )
    worker_id: str = ""
    prefetch: float = PREFETCH_HORIZON_SECONDS  # seconds of work claimed ahead
    # The worker may end its process at shutdown, when a handler outlives the shutdown timeout
    # (runworker from the command line; shutdown.py).
    owns_process: bool = False
    # The signals that stop it (worker/watchman.py); a child of ``runworker --processes`` takes
    # its stop orders from the supervisor instead (worker/supervised.py).
    stop_signals: tuple[int, ...] | None = None  # None: STOP_SIGNALS
