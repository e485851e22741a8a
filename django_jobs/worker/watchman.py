"""The worker's supervisor: what watches over its process, beside the producer (what it claims)
and the executor (what runs the jobs). The ``Watchman`` owns the process's side of a worker:
the stop signals and the stop they ask for (a drain, then its deadline; a second signal leaves at
once), the systemd notifications, the exit status, and when the next heartbeat is due and how
far its last rescue looked. Its start registers the worker in the workers table; its end
(``worker/shutdown.py``) restores the signals' handlers. A supervisor of several worker
processes sits above it: it starts each process, and stops it by a signal, as systemd does.

The stop handlers belong to the worker process alone. A child that a handler forks (``os.fork``,
``multiprocessing`` with the fork start method) gets back, as it starts, the dispositions the
process had before ``install_signals`` (the default ones, unless the site set its own), so a
SIGTERM ends it (``Pool.terminate()``) instead of draining a worker it is not.

A stop handler wakes the loop with its ``Wake`` (``worker/wake.py``): a Python signal handler
runs in the main thread between two bytecodes, possibly inside a wait, ``set`` or ``clear`` of
that very wake, and ``Wake.set`` takes no lock (a flag and a non-blocking write to its
socket), so it cannot wait on one the interrupted code holds, as ``threading.Event.set`` could.

The systemd notifier (``worker/systemd.py``) is made only when systemd asked for notifications
(``NOTIFY_SOCKET``); elsewhere the watchman sends none.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

from django_jobs.core import clock
from django_jobs.models import Worker as WorkerRow

if TYPE_CHECKING:
    from django_jobs.worker.systemd import Notifier, StatusSource
    from django_jobs.worker.wake import Wake

logger = logging.getLogger("django_jobs.worker")


class Abort(Exception):
    """A second stop signal: leave now."""


class Watchman:
    """One worker process's supervisor (see the module's docstring)."""

    def __init__(self, worker_id: str, wake: Wake, shutdown_timeout: float) -> None:
        self.worker_id = worker_id
        self.wake = wake
        self.shutdown_timeout = shutdown_timeout
        self.stopping = False  # a stop was asked for: claim nothing more, drain
        self.stop_deadline = 0.0  # time.monotonic() by which the drain ends
        self.stop_announced = False
        self.ending = False  # shut_down has begun: a further stop is ignored
        self.failure: BaseException | None = None  # an error that ended the loop
        # The status of a process the worker ends itself (``shutdown.leave_running``): 0, or 3
        # when it stops for ``runworker --reload`` (Django's reloader restarts it on 3).
        self.exit_status = 0
        self.previous_handlers: dict[int, Any] = {}  # of the stop signals, restored at the end
        self.systemd: Notifier | None = None  # made at start, under systemd only
        self.next_beat = 0.0  # time.monotonic() of the next heartbeat: the first pass beats
        # The database's time of its last rescue that found no lease run out (heartbeat.py),
        # and when (time.monotonic()) its next rescue looks from the lease index's front.
        self.rescued_until: datetime | None = None
        self.full_rescue_at = 0.0

    # The start and the end.

    def start(self, signals: tuple[int, ...] | None = None) -> None:
        """Route the stop signals (``signals``, by default STOP_SIGNALS) here (from the main
        thread only); under systemd, make the notifier."""
        self.previous_handlers = install_signals(self.stop, signals)
        if os.environ.get("NOTIFY_SOCKET"):
            from django_jobs.worker.systemd import Notifier

            self.systemd = Notifier()

    def ready(self, worker: StatusSource) -> None:
        """The worker is registered and its loop is about to claim: systemd's READY=1."""
        if self.systemd is not None:
            self.systemd.ready(worker)

    def restore_signals(self) -> None:
        """Give the stop signals back the handlers they had; close the notifier."""
        restore_signals(self.previous_handlers)
        self.previous_handlers = {}
        if self.systemd is not None:
            self.systemd.close()

    # Stopping.

    def stop(self, *_args: object) -> None:
        """A stop signal, or a stop asked for: drain (claim nothing more, give the running
        jobs the shutdown timeout); a second one leaves at once (``Abort``).

        It runs as a signal handler, in the main thread between any two bytecodes, so it only
        sets plain attributes and the wake, whose ``set`` takes no lock (see the module's
        docstring): no lock, no log line (the loop logs the stop in ``announce_stop``)."""
        if self.ending:  # shut_down is under way, and ends the worker whatever comes
            return
        if self.stopping:
            raise Abort
        self.stop_deadline = time.monotonic() + self.shutdown_timeout
        self.stopping = True
        self.wake.set()

    def end_drain(self) -> None:
        """End a drain under way now: the jobs still running are handed back (a second stop
        signal where ``Abort`` cannot be raised into the loop)."""
        self.stop_deadline = 0.0
        self.wake.set()

    def stop_for_reload(self, status: int) -> None:
        """Drain, and end the process with ``status`` if handlers outlive the drain."""
        self.exit_status = status
        if not self.stopping:
            self.stop()

    def announce_stop(self, worker: StatusSource) -> None:
        """Log a requested stop and tell systemd, once (from the loop, or at the shutdown if
        the signal came after the loop's last look)."""
        if self.stopping and not self.stop_announced:
            self.stop_announced = True
            logger.info("worker %s: stopping; %d job(s) running", self.worker_id,
                        len(worker.executor.running))
            self.tell_stopping(worker)

    def tell_stopping(self, worker: StatusSource) -> None:
        """systemd's STOPPING=1 (sent once)."""
        if self.systemd is not None:
            self.systemd.stopping(worker)

    # Timing.

    def tick(self, now: float, worker: StatusSource) -> bool:
        """On every turn of the loop: systemd's watchdog and status; True when a heartbeat is
        due (``beaten`` then schedules the next)."""
        if self.systemd is not None:
            self.systemd.tick(now, worker)
        return now >= self.next_beat

    def beaten(self, now: float, every: float) -> None:
        self.next_beat = now + every

    def next_ping_in(self, now: float) -> float:
        """Seconds until systemd's next WATCHDOG=1 (infinity without one)."""
        return math.inf if self.systemd is None else self.systemd.next_ping_in(now)


# Each drains the worker: no new claims, running jobs get the shutdown timeout. SIGHUP too: a
# closed terminal or a supervisor's reload must not kill jobs mid-run.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# libpq's TCP bounds for a worker's PostgreSQL connections, where the site's OPTIONS set none:
# a connection that goes silent (a network partition, a host gone without a reset) fails within
# about half a minute, and the worker's outage handling waits the database out, instead of
# sitting in a query for as long as the kernel keeps resending it (many minutes, or for ever).
NETWORK_BOUNDS = {
    "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
    "tcp_user_timeout": 30_000,  # milliseconds that sent data may stay unacknowledged
}


def bound_network_waits() -> None:
    """Give every PostgreSQL database's OPTIONS the NETWORK_BOUNDS it does not set itself
    (in this process only: the web side keeps the site's settings as they are)."""
    for alias in connections:
        settings_dict = connections.settings[alias]
        if settings_dict["ENGINE"].endswith("postgresql"):
            options = settings_dict.setdefault("OPTIONS", {})
            for key, value in NETWORK_BOUNDS.items():
                options.setdefault(key, value)


def register(worker_id: str, queues: list[str], concurrency: int) -> None:
    """Record the worker as live (the admin's workers list, the heartbeat's sweep)."""
    now = clock.now(WorkerRow.objects.db)
    WorkerRow.objects.update_or_create(
        worker_id=worker_id,
        defaults={
            "hostname": socket.gethostname()[:255], "pid": os.getpid(), "queues": queues,
            "concurrency": concurrency, "started_at": now, "last_heartbeat": now, "running": 0,
        },
    )
    logger.info("worker %s: started; queues=%s concurrency=%d", worker_id,
                ",".join(queues) or "*", concurrency)


# What a forked child must undo: the stop handlers installed and the handlers they replaced.
_installed: dict[int, Any] = {}


def _in_forked_child() -> None:
    """In a child just forked from this process: the worker's stop handlers are the parent's,
    not its own (see the module's docstring)."""
    previous = dict(_installed)
    _installed.clear()
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError, TypeError):  # not the main thread, or a handler set in C
            pass


os.register_at_fork(after_in_child=_in_forked_child)


def install_signals(stop: Callable[..., Any],
                    signals: tuple[int, ...] | None = None) -> dict[int, Any]:
    """Route the stop signals (``signals``, by default STOP_SIGNALS) to ``stop`` (from the
    main thread only); returns the handlers they had, for ``restore_signals``."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {
        sig: signal.signal(sig, stop) for sig in (STOP_SIGNALS if signals is None else signals)}
    for sig, handler in previous.items():
        _installed.setdefault(sig, handler)  # a second install keeps the first one's
    return previous


def _held(*_args: object) -> None:
    """A stop signal a supervised worker process takes and does nothing with."""


def hold_signals(signals: tuple[int, ...]) -> None:
    """Take ``signals`` and do nothing with them: a child of ``runworker --processes``, whose
    supervisor takes them for it (``worker/supervised.py``). A handler rather than SIG_IGN, so
    that a subprocess a job starts gets their default disposition at its exec, and a child a job
    forks gets it back at once."""
    for sig in signals:
        signal.signal(sig, _held)
        _installed[sig] = signal.SIG_DFL


def restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
        _installed.pop(sig, None)
