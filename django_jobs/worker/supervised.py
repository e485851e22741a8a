"""A worker process started by ``runworker --processes`` (``worker/supervisor.py``): its side of
the pipe to the supervisor.

The supervisor alone takes stop signals. The child takes SIGTERM, SIGINT and SIGHUP (which
systemd's kill modes and a terminal's Ctrl-C send to every process of the group) and does
nothing with them (``watchman.hold_signals``); it takes its stop orders over the pipe: each
``stop`` line is a stop signal to the worker (the first drains it, a second hands its running
jobs back), delivered as SIGUSR1 to the main thread so that the worker's own signal handling
does the rest. If the pipe closes (the supervisor is gone, even killed with SIGKILL) the child
drains and exits; the jobs it cannot finish are handed back, or rescued by their lease if it
too is killed.

Over the same pipe the child reports, from the worker's loop (it stands in for the systemd
notifier, ``worker/systemd.py``): ``ready`` once it can claim, ``hb RSS`` on every turn at most
every ``HEARTBEAT_EVERY`` seconds (a loop that stops turning stops them, and the supervisor ends
the child), ``exiting`` once its loop has ended (the heartbeats end there), and ``recycle RSS``
when its memory passed ``--max-memory-per-process``: it claims no more jobs, finishes those it
runs, and exits, for the supervisor to start a fresh one.
RSS figures are in kilobytes, read from ``/proc/self/statm``.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING

from django_jobs.models import Job
from django_jobs.worker.systemd import Notifier, StatusSource
from django_jobs.worker.watchman import hold_signals

if TYPE_CHECKING:
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")

# The signal a stop order becomes, in the main thread (the worker's stop handler).
ORDER_SIGNAL = signal.SIGUSR1
# The signals the child ignores: the supervisor takes them for it.
GROUP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Seconds a second stop order waits for the first to be taken.
ORDER_TAKEN_SECONDS = 5.0
# Seconds between heartbeats over the pipe.
HEARTBEAT_EVERY = 0.5
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024 if hasattr(os, "sysconf") else 4


def rss_kb(pid: int | str = "self") -> int | None:
    """The resident set size of a process in kilobytes, or None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_KB
    except (OSError, ValueError, IndexError):
        return None


class PipeNotifier(Notifier):
    """The worker's notifier in a supervised child: its messages go to the supervisor."""

    def __init__(self, sock: socket.socket, max_memory_kb: int | None) -> None:
        super().__init__({})  # no NOTIFY_SOCKET: systemd hears the supervisor only
        self.sock = sock
        self.max_memory_kb = max_memory_kb
        self.worker: WorkerState | None = None
        self.recycling = False
        self._next_beat = math.inf  # heartbeats begin at ready

    def tell(self, line: str) -> None:
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError:
            pass  # the supervisor is gone: the reader sees the pipe close and stops the worker

    def ready(self, worker: StatusSource) -> None:
        rss = rss_kb()
        if self.max_memory_kb is not None and rss is not None and rss > self.max_memory_kb:
            logger.error("worker process %d: starts at %d MB, above --max-memory-per-process "
                         "%d MB; the cap is not enforced in this process (raise it)",
                         os.getpid(), rss // 1024, self.max_memory_kb // 1024)
            self.max_memory_kb = None
            self.tell(f"overcap {rss}")
        self.tell("ready")
        self._next_beat = 0.0

    def tick(self, now: float, worker: StatusSource) -> None:
        """On every turn of the loop, before it claims: the memory cap, and the heartbeat
        when due."""
        rss = rss_kb() if self.max_memory_kb is not None or now >= self._next_beat else None
        if (self.max_memory_kb is not None and rss is not None and rss > self.max_memory_kb
                and not self.recycling and self.worker is not None):
            self.recycle(self.worker, rss)
        if now >= self._next_beat:
            self._next_beat = now + HEARTBEAT_EVERY
            self.tell(f"hb {rss or 0}")

    def recycle(self, worker: WorkerState, rss: int) -> None:
        """Claim nothing more (as at the end of ``--max-jobs``), hand back the claimed jobs no
        thread has started, finish the running ones, and exit: the supervisor starts a fresh
        process in its place."""
        self.recycling = True
        worker.producer.max_jobs = worker.producer.claimed
        waiting = worker.executor.inbox.take_waiting()
        if waiting:
            if worker.safely(Job.objects.release, waiting) is None:
                worker.executor.keep(waiting)  # the database is away: they run here after all
            else:
                worker.executor.drop(waiting)
        cap = (self.max_memory_kb or 0) // 1024
        logger.warning("worker %s: memory %d MB is past --max-memory-per-process %d MB; "
                       "claiming no more jobs, handing back %d not started, finishing %d "
                       "running, then a fresh process takes over", worker.worker_id,
                       rss // 1024, cap, len(waiting), len(worker.executor.running),
                       extra={"worker_id": worker.worker_id, "event": "memory_recycle",
                              "rss_kb": rss})
        self.tell(f"recycle {rss}")

    def next_ping_in(self, now: float) -> float:
        return max(self._next_beat - now, 0.0)

    def stopping(self, worker: StatusSource | None = None) -> None:
        self.tell("stopping")

    def close(self) -> None:
        """The loop has ended: no more heartbeats, the process is on its way out."""
        self.tell("exiting")


def take_orders(sock: socket.socket, worker: WorkerState) -> None:
    """Ignore the group's stop signals; read stop orders from the pipe in a daemon thread."""
    hold_signals(GROUP_SIGNALS)
    threading.Thread(target=read_orders, args=(sock, worker), name="django-jobs-orders",
                     daemon=True).start()


def read_orders(sock: socket.socket, worker: WorkerState) -> None:
    """Each ``stop`` line becomes a stop signal to the main thread; the pipe's end, one too
    (unless a stop came already)."""
    buffered = b""
    orders = 0
    while True:
        try:
            data = sock.recv(256)
        except OSError:
            data = b""
        if not data:
            if not orders:
                logger.warning("worker process %d: the supervisor is gone; stopping",
                               os.getpid())
                order(worker, 1)
            return
        buffered += data
        *lines, buffered = buffered.split(b"\n")
        for line in lines:
            if line == b"stop":
                orders += 1
                order(worker, orders)


def order(worker: WorkerState, number: int) -> None:
    """Signal the main thread; a second order waits until the first was taken (two signals
    sent at once may arrive as one)."""
    if number == 2:
        deadline = time.monotonic() + ORDER_TAKEN_SECONDS
        while not worker.stopping and time.monotonic() < deadline:
            time.sleep(0.01)
    signal.pthread_kill(threading.main_thread().ident or 0, ORDER_SIGNAL)
