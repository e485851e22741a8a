"""``runworker --reload``: the worker under Django's autoreloader, as ``runserver`` runs.

A parent process runs the same command line in a child process, and runs it again each time the
child exits with status 3 (Django's ``trigger_reload``). In the child the worker runs in Django's
``django-main-thread`` while the main thread watches the site's Python files. When one changes,
Django sends ``file_changed`` before it ends the child: the receiver here stops the worker as a
stop signal does (nothing more is claimed, the running jobs get the shutdown timeout, the jobs
no thread started and those whose handler outlives the timeout are handed back, their attempt
not spent) and waits for it to end; Django then exits with status 3, and the parent starts a
new child on the changed code. A worker that ends itself with handlers still running
(``worker/shutdown.py``) ends the child with status 3 too.

A worker that ends for any other reason ends the watching, and the child exits with the
command's status, which the parent passes on.

Stop signals (SIGTERM, SIGINT, SIGHUP) drain the worker as they drain a plain ``runworker``.
The child runs in a process group of its own, so the parent is the one process that receives
them, Ctrl-C in a terminal included: the parent sends each to the child and waits for it,
restarting it no more, and exits with its status (0 after a drain). In the child the first
stop signal drains the worker and a second one ends the drain at once (the running jobs are
handed back), as for a plain worker; the parent sends on every stop signal it receives. On
Linux the child also gets SIGTERM if the parent dies (``PR_SET_PDEATHSIG``), so a parent killed
by SIGKILL leaves no worker behind: the child drains and exits. ``--reload`` is for development.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from django.db import connections
from django.utils import autoreload

from django_jobs.worker.loop import Worker
from django_jobs.worker.shutdown import exit_without_stray_threads
from django_jobs.worker.watchman import STOP_SIGNALS, Abort

logger = logging.getLogger("django_jobs")

# The child's exit status on which the parent starts it again (Django's ``trigger_reload``).
RELOAD_STATUS = 3
# The parent's pid, in the child's environment: the child ends if its parent is gone.
PARENT_ENV = "DJANGO_JOBS_RELOAD_PARENT"
_PR_SET_PDEATHSIG = 1


class ReloadingWorker:
    """One worker run under the autoreloader (see the module's docstring)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.done = threading.Event()  # the worker's run has returned or raised
        self.processed = 0
        self.error: BaseException | None = None
        self.reloader: autoreload.BaseReloader | None = None
        self._lock = threading.Lock()

    def run(self) -> int:
        """In the parent: restart the child until it exits with another status than 3, or a
        stop signal came, and exit with its status. In the child: run the worker until it
        ends or a file changes; returns the jobs it ran."""
        connections.close_all()  # the checks' connection: the parent only waits for children
        if os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) != "true":
            sys.exit(run_parent())
        return self._run_child()

    def _run_child(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._stop_signal)
        _end_with_parent()
        autoreload.autoreload_started.connect(self._watching, weak=False)
        autoreload.file_changed.connect(self._changed, weak=False)
        reloader = autoreload.get_reloader()
        logger.info("Watching for file changes with %s", reloader.__class__.__name__)
        autoreload.start_django(reloader, self._work)
        # The watching ended without a reload: the worker ended (a stop signal drained it).
        if not self.done.is_set():
            if not self.worker.stopping:
                self.worker.watchman.stop()
            self.done.wait()
        if self.error is not None:
            raise self.error
        return self.processed

    def _stop_signal(self, *_args: object) -> None:
        """A stop signal in the child (the main thread, which watches the files): the first
        drains the worker, a second ends the drain now, as for a plain worker. Like the
        worker's own handler it sets attributes and the loop's wake only."""
        try:
            self.worker.watchman.stop()
        except Abort:
            self.worker.watchman.end_drain()

    def _work(self) -> None:
        """Django's main thread in the child."""
        try:
            self.processed = self.worker.run()
        except BaseException as exc:
            self.error = exc
        finally:
            with self._lock:
                self.done.set()
                reloading = self.worker.watchman.exit_status == RELOAD_STATUS
                if self.reloader is not None and not reloading:
                    self.reloader.stop()

    def _watching(self, sender: autoreload.BaseReloader, **_kwargs: Any) -> None:
        with self._lock:
            self.reloader = sender
            if self.done.is_set() and self.worker.watchman.exit_status != RELOAD_STATUS:
                sender.stop()

    def _changed(self, sender: autoreload.BaseReloader, file_path: Any, **_kwargs: Any) -> None:
        """A watched file changed (in the child's main thread): stop the worker and wait for
        it; Django's ``trigger_reload`` then ends the child with status 3."""
        logger.info("worker %s: %s changed; stopping to restart", self.worker.worker_id,
                    file_path)
        self.worker.watchman.stop_for_reload(RELOAD_STATUS)
        self.done.wait()
        exit_without_stray_threads(RELOAD_STATUS)
        # Returning nothing lets Django go on to trigger_reload, which exits with status 3.


def run_parent() -> int:
    """The parent: run the child, again after each reload, until it exits otherwise or a stop
    signal came (sent on to the child); returns the status to exit with."""
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true", PARENT_ENV: str(os.getpid())}
    args = autoreload.get_child_arguments()
    stopped: list[int] = []
    child: subprocess.Popen | None = None
    told: set[int] = set()  # the children a stop signal was sent to

    def forward(sig: int, _frame: object) -> None:
        stopped.append(sig)
        send(sig)

    def send(sig: int) -> None:
        if child is not None and child.returncode is None:
            told.add(child.pid)
            try:
                os.kill(child.pid, sig)
            except ProcessLookupError:  # it has just ended; the wait below reaps it
                pass

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        while not stopped:
            # A process group of its own: a terminal's Ctrl-C reaches the parent alone, which
            # sends it on once (the child would otherwise see it twice: a drain, then its end).
            child = subprocess.Popen(  # noqa: S603 (this process's own command line)
                args, env=env, close_fds=False, process_group=0)
            if stopped and child.pid not in told:  # it came while the child was starting
                send(stopped[0])
            status = child.wait()
            if status != RELOAD_STATUS:
                return 128 - status if status < 0 else status
        return 0  # stopped, and no child running: none, or one that a reload's drain ended
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end_with_parent() -> None:
    """In the child, on Linux: receive SIGTERM (a drain) when the parent dies; and drain now
    if it died already."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):
        os.kill(os.getpid(), signal.SIGTERM)
