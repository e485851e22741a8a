"""``runworker --reload``: the worker under Django's autoreloader, as ``runserver`` runs.

``autoreload.run_with_reloader`` runs the same command line in a child process, and runs it again
each time the child exits with status 3. In the child the worker runs in Django's
``django-main-thread`` while the main thread watches the site's Python files. When one changes,
Django sends ``file_changed`` before it ends the child: the receiver here stops the worker as a
stop signal does (nothing more is claimed, the running jobs get the shutdown timeout, the jobs
no thread started and those whose handler outlives the timeout are handed back, their attempt
not spent) and waits for it to end; Django then exits with status 3, and the parent starts a
new child on the changed code. A worker that ends itself with handlers still running
(``worker/shutdown.py``) ends the child with status 3 too.

A worker that ends for any other reason ends the watching, and the child exits with the
command's status, which the parent passes on. A stop signal or Ctrl-C reaches the parent, which
Django's reloader ends at once, killing the child: the jobs it held are rescued once their lease
runs out. ``--reload`` is for development.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import connections
from django.utils import autoreload

from django_jobs.worker.exit import exit_without_stray_threads
from django_jobs.worker.loop import Worker

logger = logging.getLogger("django_jobs")

# The child's exit status on which Django's reloader starts it again (``trigger_reload``).
RELOAD_STATUS = 3


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
        """In the parent: restart the child until it exits with another status than 3 and
        exit with that. In the child: run the worker until it ends or a file changes."""
        autoreload.autoreload_started.connect(self._watching, weak=False)
        autoreload.file_changed.connect(self._changed, weak=False)
        connections.close_all()  # the checks' connection: the parent only waits for children
        autoreload.run_with_reloader(self._work)
        # The watching ended without a reload: the worker ended, or Ctrl-C in the child.
        if not self.done.is_set():
            if not self.worker.stopping:  # a second stop would raise Abort
                self.worker.stop()
            self.done.wait()
        if self.error is not None:
            raise self.error
        return self.processed

    def _work(self) -> None:
        """Django's main thread in the child."""
        try:
            self.processed = self.worker.run()
        except BaseException as exc:
            self.error = exc
        finally:
            with self._lock:
                self.done.set()
                reloading = self.worker.exit_status == RELOAD_STATUS
                if self.reloader is not None and not reloading:
                    self.reloader.stop()

    def _watching(self, sender: autoreload.BaseReloader, **_kwargs: Any) -> None:
        with self._lock:
            self.reloader = sender
            if self.done.is_set() and self.worker.exit_status != RELOAD_STATUS:
                sender.stop()

    def _changed(self, sender: autoreload.BaseReloader, file_path: Any, **_kwargs: Any) -> None:
        """A watched file changed (in the child's main thread): stop the worker and wait for
        it; Django's ``trigger_reload`` then ends the child with status 3."""
        logger.info("worker %s: %s changed; stopping to restart", self.worker.worker_id,
                    file_path)
        self.worker.exit_status = RELOAD_STATUS
        if not self.worker.stopping:
            self.worker.stop()
        self.done.wait()
        exit_without_stray_threads(RELOAD_STATUS)
        # Returning nothing lets Django go on to trigger_reload, which exits with status 3.
