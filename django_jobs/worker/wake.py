"""What wakes the worker's loop: ``threading.Event``'s ``set``, ``clear``, ``is_set`` and ``wait``,
over a self-pipe, so that the loop waits in one ``poll()`` on the pipe and on its listener's
socket (``engine/postgres/listener.py``).

A notification then wakes the loop itself, as its bytes arrive: no thread reads it first and
hands it on (each hand-off is one more thread the scheduler must run before the claim is sent,
milliseconds on a busy host). The slot threads, the stop signals' handler (``worker/watchman.py``)
and the loop's own steps wake it with ``set``, which takes no lock: it sets a flag and writes a
byte to the pipe without blocking, only when the flag was not set already, so the pipe holds a
byte or two at most. So a signal handler, which runs in the main thread between two bytecodes,
even inside this wake's own ``wait``, ``set`` or ``clear``, may call it.
"""

from __future__ import annotations

import select
import socket


class Wake:
    def __init__(self) -> None:
        self._flag = False
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def set(self) -> None:
        if self._flag:
            return
        self._flag = True
        try:
            self._writer.send(b"\0")
        except OSError:  # the pipe is full (a wake-up is pending already) or closed
            pass

    def is_set(self) -> bool:
        return self._flag

    def clear(self) -> None:
        """Like ``Event.clear``: a ``set`` before it is forgotten, one after it is not (the flag
        is cleared before the pipe is emptied, so a byte written meanwhile at most wakes the
        next wait early)."""
        self._flag = False
        self._drain()

    def wait(self, timeout: float | None = None) -> bool:
        """Until set, or ``timeout`` seconds; whether it is set (or the pipe was written)."""
        return self.wait_for(timeout)[0]

    def wait_for(self, timeout: float | None, fileno: int | None = None) -> tuple[bool, bool]:
        """Until set, ``fileno`` (a socket) has something to read, or ``timeout`` seconds;
        returns (woken by ``set``, ``fileno`` readable). Nothing is read from ``fileno``."""
        if self._flag:
            return True, False
        poller = select.poll()
        poller.register(self._reader, select.POLLIN)
        if fileno is not None:
            poller.register(fileno, select.POLLIN)
        ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
        try:
            events = poller.poll(ms)
        except InterruptedError:  # pragma: no cover - retried by Python since PEP 475
            events = []
        readable = any(fd == fileno for fd, _ in events)
        woken = self._flag or any(fd != fileno for fd, _ in events)
        return woken, readable

    def _drain(self) -> None:
        try:
            while self._reader.recv(4096):
                pass
        except OSError:  # empty (BlockingIOError), or closed
            pass

    def close(self) -> None:
        self._writer.close()
        self._reader.close()
