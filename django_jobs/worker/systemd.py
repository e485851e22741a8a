"""The systemd notification protocol (sd_notify), for ``runworker`` under ``Type=notify``.

systemd passes a datagram socket in ``NOTIFY_SOCKET`` (a path, or an abstract name written with a
leading ``@``) and, when the unit sets ``WatchdogSec=``, the interval in ``WATCHDOG_USEC``. The
worker says ``READY=1`` once it can claim jobs, ``STATUS=...`` with its counts, ``WATCHDOG=1``
from its loop at half the interval (the loop wakes for each ping, however long its poll interval
and heartbeat; a loop that stops turning stops the pings, and systemd restarts the worker), and
``STOPPING=1`` when it begins to shut down.

The protocol is one ``sendto`` per message, so it is spoken here rather than through a library.
Without ``NOTIFY_SOCKET`` every method does nothing; a failed send is logged at debug level and
never stops the worker.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Mapping
from typing import Protocol

logger = logging.getLogger("django_jobs.worker")

# STATUS= is refreshed at most this often (seconds): systemctl status shows the latest.
STATUS_EVERY_SECONDS = 1.0


class Holder(Protocol):
    """A worker's executor, as the STATUS= line reads it (any mapping of running jobs)."""

    @property
    def running(self) -> Mapping[int, object]: ...


class StatusSource(Protocol):
    """What the notifier reads of a worker for its STATUS= line (read only)."""

    @property
    def executor(self) -> Holder: ...
    @property
    def processed(self) -> int: ...
    @property
    def stopping(self) -> bool: ...


def socket_address(value: str) -> str | bytes:
    """``NOTIFY_SOCKET`` as ``sendto`` takes it: ``@name`` is the abstract ``\\0name``."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


def watchdog_interval(environ: Mapping[str, str]) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of ``WATCHDOG_USEC``), or None if not asked."""
    usec = environ.get("WATCHDOG_USEC", "")
    if not (usec.isascii() and usec.isdigit()) or int(usec) == 0:
        return None
    pid = environ.get("WATCHDOG_PID", "")
    if pid and pid != str(os.getpid()):  # the watchdog watches another process
        return None
    return int(usec) / 1_000_000 / 2


class Notifier:
    """Sends sd_notify messages; a no-op when systemd did not ask for them."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        value = environ.get("NOTIFY_SOCKET", "")
        self.address = socket_address(value) if value else None
        self.watchdog_every = watchdog_interval(environ) if self.address else None
        self._sock: socket.socket | None = None
        self._next_ping = math.inf  # pings begin at READY=1
        self._next_status = 0.0
        self._status = ""
        self._stopping_sent = False

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> bool:
        """One datagram of ``KEY=value`` lines; True if it went out."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(lines).encode(), self.address)
        except OSError as exc:
            logger.debug("sd_notify to %r failed: %s", self.address, exc)
            return False
        return True

    def ready(self, worker: StatusSource) -> None:
        """The worker is registered and its loop is about to claim."""
        self._status = status_line(worker)
        self.send("READY=1", f"STATUS={self._status}")
        self._next_ping = self._next_status = time.monotonic()

    def tick(self, now: float, worker: StatusSource) -> None:
        """Called on every turn of the worker's loop (``now`` from ``time.monotonic``)."""
        if self.address is None:
            return
        if self.watchdog_every is not None and now >= self._next_ping:
            self.send("WATCHDOG=1")
            self._next_ping = now + self.watchdog_every
        if now >= self._next_status:
            text = status_line(worker)
            if text != self._status:
                self._status = text
                self.send(f"STATUS={text}")
            self._next_status = now + STATUS_EVERY_SECONDS

    def next_ping_in(self, now: float) -> float:
        """Seconds until the next WATCHDOG=1 is due (infinity without a watchdog, or before
        READY=1): the loop sleeps no longer, so a poll interval or heartbeat longer than the
        watchdog's never lets it fire on an idle worker."""
        if self.address is None or self.watchdog_every is None:
            return math.inf
        return max(self._next_ping - now, 0.0)

    def stopping(self, worker: StatusSource | None = None) -> None:
        """The worker has begun to shut down (sent once)."""
        if self._stopping_sent or self.address is None:
            return
        self._stopping_sent = True
        lines = ["STOPPING=1"]
        if worker is not None:
            lines.append(f"STATUS={status_line(worker)}")
        self.send(*lines)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def status_line(worker: StatusSource) -> str:
    state = "stopping" if worker.stopping else "working"
    return f"{state}: {len(worker.executor.running)} job(s) running, {worker.processed} done"
