"""A worker's start and end as the process sees them: its row in the workers table, and the
signals that stop it.

The stop handlers belong to the worker process alone. A child that a handler forks (``os.fork``,
``multiprocessing`` with the fork start method) gets back, as it starts, the dispositions the
process had before ``install_signals`` (the default ones, unless the site set its own), so a
SIGTERM ends it (``Pool.terminate()``) instead of draining a worker it is not.

A stop handler wakes the loop with its ``Wake`` (``worker/wake.py``): a Python signal handler
runs in the main thread between two bytecodes, possibly inside a wait, ``set`` or ``clear`` of
that very wake, and ``Wake.set`` takes no lock (a flag and a non-blocking write to its
socket), so it cannot wait on one the interrupted code holds, as ``threading.Event.set`` could.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from django_jobs.core import clock
from django_jobs.models import Worker as WorkerRow

logger = logging.getLogger("django_jobs.worker")

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
