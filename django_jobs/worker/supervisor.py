"""``runworker --processes N``: a supervisor that runs N worker processes and keeps them running.

Each child is a fresh interpreter running ``runworker`` with the same options (its own
``--concurrency`` threads), started as a subprocess with one end of a socket pair
(``--supervised-fd``, ``worker/supervised.py``). The supervisor opens no database connection
and starts no thread, and its children are new interpreters, not forks: a child holds nothing of
the supervisor's but its pipe, as a ``runworker`` started by hand would.

- Stops. The supervisor takes SIGTERM, SIGINT and SIGHUP for the group; the children ignore
  them. The first signal sends every child a stop order (each drains within the shutdown
  timeout), the second another (each hands its running jobs back at once). A child still there
  ``KILL_AFTER_SECONDS`` past the shutdown timeout is killed; its jobs go to the lease's rescue.
- Restarts. A child that exits while the supervisor is not stopping is started again at once
  if it meant to (``--max-jobs``, the memory cap) and otherwise after a back-off that doubles
  with each crash of that slot within ``CRASH_WINDOW_SECONDS``; at ``CRASH_LIMIT`` crashes the
  supervisor stops the others and exits with status 1. A child that fails before it was ever
  ready, while none has been, is a mistake in the command or the settings: the supervisor stops
  the others and exits with its status.
- Health. A ready child heartbeats over its pipe on every turn of its loop; one silent for
  ``wedged_after`` (half the lease: before its jobs can be rescued elsewhere) is killed and
  replaced, as is one whose memory passes 1.5 times ``--max-memory-per-process``; one whose
  loop has ended gets ``KILL_AFTER_SECONDS`` to exit.
- systemd. Under ``Type=notify`` the supervisor says READY=1 once every child is ready (each has
  checked the database, registered and is about to claim: while the database is down at start
  none is, and READY waits, as for a single worker), feeds the watchdog while at least one child
  heartbeats, and says STOPPING=1 at the first stop signal. The children run without
  ``NOTIFY_SOCKET``.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django_jobs.worker.supervised import rss_kb
from django_jobs.worker.systemd import Notifier

logger = logging.getLogger("django_jobs.worker")

CRASH_LIMIT = 5  # crashes of one slot within the window that end the supervisor
CRASH_WINDOW_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 16.0
KILL_AFTER_SECONDS = 10.0  # past the shutdown timeout, for a child that did not stop
HARD_CAP_FACTOR = 1.5  # of --max-memory-per-process: the supervisor kills the child
HEALTHY_WITHIN_SECONDS = 5.0  # a heartbeat this recent keeps the watchdog fed
TURN_SECONDS = 0.25  # the supervisor's loop looks at its children at least this often
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CHILD_ENVIRON_DROPPED = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                         "LISTEN_PID")


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, bounded by the cgroup v2 ``cpu.max``."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        count = min(count, max(1, int(quota + 0.5)))
    return max(count, 1)


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs allowed by the process's cgroup v2 ``cpu.max`` (``quota period``), or None."""
    try:
        with open("/proc/self/cgroup") as cgroups:
            path = next((line.split("::", 1)[1].strip() for line in cgroups
                         if line.startswith("0::")), "/")
        with open(os.path.join(root, path.lstrip("/"), "cpu.max")) as limit:
            quota, period = limit.read().split()[:2]
    except (OSError, ValueError, IndexError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def manage_command() -> list[str]:
    """How this process was started, to start a child the same way: ``manage.py`` (or
    ``django-admin``) as a script, or ``python -m django``."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if script and os.path.isfile(script) and os.path.basename(script) != "__main__.py":
        return [sys.executable, script]
    return [sys.executable, "-m", "django"]


def ignore_group_signals() -> None:
    """In a child, between fork and exec: ignore the group's stop signals from the start (an
    ignored signal stays ignored across exec, and Python keeps it so), so that one sent while
    the child's interpreter starts does not kill it. The supervisor starts no thread, which a
    fork could not carry."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


@dataclass
class Child:
    """One slot's current process and what the supervisor knows of it."""

    slot: int
    proc: subprocess.Popen
    sock: socket.socket
    started: float
    ready: bool = False
    last_heartbeat: float = 0.0
    recycling: bool = False  # it said it exits to be replaced (the memory cap)
    overcap: bool = False  # it started above the cap: the supervisor does not kill it for that
    killed: str = ""  # why the supervisor killed it
    buffered: bytes = b""
    closed: bool = False  # its end of the pipe closed
    exiting: float | None = None  # time.monotonic() when it said its loop ended


@dataclass
class Slot:
    crashes: list[float] = field(default_factory=list)
    start_at: float = 0.0  # time.monotonic() at which to start its next process
    ever_ready: bool = False
    done: bool = False  # a --burst child that finished: not started again


class Supervisor:
    def __init__(self, processes: int, child_args: Sequence[str], *, shutdown_timeout: float,
                 lease_seconds: float, burst: bool = False,
                 max_memory_kb: int | None = None, worker_id: str = "") -> None:
        self.processes = processes
        self.child_args = list(child_args)
        self.shutdown_timeout = shutdown_timeout
        self.wedged_after = max(lease_seconds / 2, 2.0)
        self.burst = burst
        self.max_memory_kb = max_memory_kb
        self.worker_id = worker_id  # each child's is this and its slot's number
        self.slots = [Slot() for _ in range(processes)]
        self.children: dict[int, Child] = {}
        self.signals = 0  # stop signals received
        self.orders = 0  # stop orders sent to the children
        self.kill_at = float("inf")
        self.status = 0
        self.ready_sent = False
        self.systemd = Notifier()
        self.selector = selectors.DefaultSelector()
        self._next_ping = 0.0

    # Signals.

    def _on_signal(self, *_args: object) -> None:
        self.signals += 1

    def run(self) -> int:
        """Run the children until stopped; the exit status."""
        wake_r, wake_w = socket.socketpair()
        wake_w.setblocking(False)
        previous_fd = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        self.selector.register(wake_r, selectors.EVENT_READ, None)
        logger.info("supervisor %d: starting %d worker process(es)", os.getpid(), self.processes)
        try:
            while self._turn():
                self._wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous_fd)
            for child in list(self.children.values()):  # only after an error of its own
                child.proc.kill()
            wake_r.close()
            wake_w.close()
        logger.info("supervisor %d: stopped (status %d)", os.getpid(), self.status)
        return self.status

    def _turn(self) -> bool:
        now = time.monotonic()
        self._orders(now)
        self._reap(now)
        if self.orders:
            if not self.children:
                return False
            if now >= self.kill_at:
                for child in self.children.values():
                    if not child.killed:
                        self._kill(child, "it did not stop within the shutdown timeout")
        else:
            self._tend(now)
            if not self.signals:  # stop_all may have asked for the stop on this turn
                self._start_due(now)
            if self.burst and all(slot.done for slot in self.slots):
                return False
        self._notify(now)
        return True

    def _orders(self, now: float) -> None:
        """Pass each new stop signal on to the children, once per signal (two at most)."""
        while self.orders < min(self.signals, 2):
            self.orders += 1
            if self.orders == 1:
                logger.info("supervisor %d: stopping %d worker process(es)", os.getpid(),
                            len(self.children))
                self.systemd.stopping()
                self.kill_at = now + self.shutdown_timeout + KILL_AFTER_SECONDS
            else:
                logger.warning("supervisor %d: second signal; the worker processes hand their "
                               "running jobs back", os.getpid())
                self.kill_at = min(self.kill_at, now + KILL_AFTER_SECONDS)
            for child in self.children.values():
                self._order(child)

    def _order(self, child: Child) -> None:
        try:
            child.sock.sendall(b"stop\n")
        except OSError:
            pass  # gone: reaped on this turn

    def stop_all(self, status: int) -> None:
        """Stop the children (a drain) and end with ``status``."""
        self.status = status
        self.signals = max(self.signals, 1)

    # Children.

    def _start_due(self, now: float) -> None:
        for index, slot in enumerate(self.slots):
            if index not in self.children and not slot.done and now >= slot.start_at:
                self._start(index, now)

    def _start(self, index: int, now: float) -> None:
        ours, theirs = socket.socketpair()
        env = {key: value for key, value in os.environ.items()
               if key not in CHILD_ENVIRON_DROPPED}
        argv = [*manage_command(), "runworker", *self.child_args,
                "--supervised-fd", str(theirs.fileno())]
        if self.worker_id:
            argv += ["--worker-id", f"{self.worker_id}-{index}"]
        try:
            proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=env,  # noqa: S603
                                    preexec_fn=ignore_group_signals)
        except OSError as exc:
            ours.close()
            theirs.close()
            logger.error("supervisor %d: cannot start a worker process: %s", os.getpid(), exc)
            self._crashed(index, now)
            return
        theirs.close()
        ours.setblocking(False)
        child = Child(slot=index, proc=proc, sock=ours, started=now, last_heartbeat=now)
        self.children[index] = child
        self.selector.register(ours, selectors.EVENT_READ, child)
        logger.info("supervisor %d: started worker process %d (slot %d)", os.getpid(),
                    proc.pid, index)

    def _reap(self, now: float) -> None:
        for index, child in list(self.children.items()):
            code = child.proc.poll()
            if code is None:
                continue
            self._read(child)  # its last words (recycle, overcap)
            if not child.closed:
                self.selector.unregister(child.sock)
            child.sock.close()
            del self.children[index]
            self._ended(child, code, now)

    def _ended(self, child: Child, code: int, now: float) -> None:
        slot = self.slots[child.slot]
        how = f"exited with status {code}" if code >= 0 else f"was ended by signal {-code}"
        if self.orders:
            logger.info("supervisor %d: worker process %d %s", os.getpid(), child.proc.pid, how)
            return
        if code == 0 and not child.killed:
            if self.burst:
                slot.done = True
            else:
                logger.info("supervisor %d: worker process %d %s%s; starting a fresh one",
                            os.getpid(), child.proc.pid, how,
                            " (memory cap)" if child.recycling else "")
            return
        reason = f" ({child.killed})" if child.killed else ""
        logger.error("supervisor %d: worker process %d %s%s", os.getpid(), child.proc.pid,
                     how, reason)
        if not slot.ever_ready and not any(s.ever_ready for s in self.slots) and not child.killed:
            logger.error("supervisor %d: a worker process failed before it could start; "
                         "stopping", os.getpid())
            self.stop_all(code if code > 0 else 1)
            return
        self._crashed(child.slot, now)

    def _crashed(self, index: int, now: float) -> None:
        slot = self.slots[index]
        slot.crashes = [t for t in slot.crashes if now - t < CRASH_WINDOW_SECONDS] + [now]
        if len(slot.crashes) >= CRASH_LIMIT:
            logger.error("supervisor %d: a worker process crashed %d times within %.0f s; "
                         "stopping", os.getpid(), len(slot.crashes), CRASH_WINDOW_SECONDS)
            self.stop_all(1)
            return
        delay = 0.0 if len(slot.crashes) == 1 else min(
            2.0 ** (len(slot.crashes) - 2), MAX_BACKOFF_SECONDS)
        slot.start_at = now + delay
        if delay:
            logger.warning("supervisor %d: starting it again in %.0f s", os.getpid(), delay)

    def _kill(self, child: Child, why: str) -> None:
        child.killed = why
        logger.error("supervisor %d: killing worker process %d: %s", os.getpid(),
                     child.proc.pid, why)
        child.proc.kill()

    def _tend(self, now: float) -> None:
        """Kill a wedged child, or one past the hard memory cap."""
        for child in self.children.values():
            if child.killed:
                continue
            if child.exiting is not None:
                if now - child.exiting > max(KILL_AFTER_SECONDS, self.wedged_after):
                    self._kill(child, f"it did not exit {now - child.exiting:.0f} s after its "
                               f"loop ended")
            elif child.ready and now - child.last_heartbeat > self.wedged_after:
                self._kill(child, f"no heartbeat for {now - child.last_heartbeat:.1f} s")
            elif self.max_memory_kb is not None and child.ready and not child.overcap:
                rss = rss_kb(child.proc.pid)
                hard = self.max_memory_kb * HARD_CAP_FACTOR
                if rss is not None and rss > hard:
                    self._kill(child, f"memory {rss // 1024} MB is past {HARD_CAP_FACTOR} x "
                               f"--max-memory-per-process ({hard // 1024:.0f} MB)")

    # The pipes.

    def _wait(self) -> None:
        for key, _events in self.selector.select(TURN_SECONDS):
            if key.data is None:  # the signal wake-up
                try:
                    key.fileobj.recv(512)  # type: ignore[union-attr]
                except OSError:
                    pass
            else:
                self._read(key.data)

    def _read(self, child: Child) -> None:
        while True:
            try:
                data = child.sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:  # its end closed: it is exiting (the next turn reaps it)
                if not child.closed:
                    child.closed = True
                    self.selector.unregister(child.sock)
                return
            child.buffered += data
            *lines, child.buffered = child.buffered.split(b"\n")
            for line in lines:
                self._heard(child, line.decode(errors="replace").split())

    def _heard(self, child: Child, words: list[str]) -> None:
        if not words:
            return
        now = time.monotonic()
        child.last_heartbeat = now
        if words[0] == "ready":
            child.ready = True
            self.slots[child.slot].ever_ready = True
        elif words[0] == "recycle":
            child.recycling = True
            logger.warning("supervisor %d: worker process %d is at %s MB, past "
                           "--max-memory-per-process; it finishes its jobs and is replaced",
                           os.getpid(), child.proc.pid, int(words[1]) // 1024)
        elif words[0] == "exiting":
            child.exiting = now
        elif words[0] == "overcap":
            child.overcap = True

    # systemd.

    def _notify(self, now: float) -> None:
        if not self.systemd.enabled:
            return
        ready = [c for c in self.children.values() if c.ready]
        if not self.ready_sent and not self.orders and len(ready) == self.processes:
            self.ready_sent = True
            self.systemd.send("READY=1", f"STATUS={self._status_line(ready)}")
        every = self.systemd.watchdog_every
        healthy = any(now - c.last_heartbeat < HEALTHY_WITHIN_SECONDS for c in ready)
        if self.ready_sent and every is not None and healthy and now >= self._next_ping:
            self.systemd.send("WATCHDOG=1", f"STATUS={self._status_line(ready)}")
            self._next_ping = now + min(every, TURN_SECONDS * 4)

    def _status_line(self, ready: list[Child]) -> str:
        state = "stopping" if self.orders else "working"
        return f"{state}: {len(ready)} of {self.processes} worker process(es) ready"
