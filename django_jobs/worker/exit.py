"""How a worker process ends when a handler left a non-daemon thread running.

Python waits for every non-daemon thread before a process exits, so one such thread, started by
a handler and never stopped, would keep ``runworker`` (``--burst`` included) alive for ever after
its work is done. Once the worker has stopped cleanly (outcomes written, unfinished jobs handed
back, its row removed), the process leaves without those threads: it logs their names, closes
its database connections, runs the ``atexit`` functions, flushes its output and ends with
``os._exit``. The threads are abandoned where they stand; nothing they were doing is part of
any job's outcome. With no such thread the process exits normally.

``leave_now`` ends the process at once, without its ``atexit`` functions: the end of a worker
that handed back jobs whose handlers still run (``worker/shutdown.py``), which must not go on
running while the exit hooks do.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import NoReturn

from django.db import connections

from django_jobs.worker.handoff import handoff

logger = logging.getLogger("django_jobs.worker")


def stray_threads() -> list[threading.Thread]:
    """Live non-daemon threads other than the main one: what would keep the process alive."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def exit_without_stray_threads(status: int = 0) -> None:
    """End the process now if stray threads would keep it alive; otherwise return."""
    stray = stray_threads()
    if not stray:
        return
    logger.warning("leaving %d thread(s) that handlers started and did not stop: %s",
                   len(stray), ", ".join(sorted(t.name for t in stray)))
    connections.close_all()
    atexit._run_exitfuncs()
    flush_output()
    os._exit(status)


def leave_now(status: int = 0) -> NoReturn:
    """End the process now: no ``atexit`` function runs and no thread is waited for; the
    log lines and output written so far are flushed."""
    flush_output()
    os._exit(status)


def flush_output() -> None:
    handoff.stop()  # the worker's log records still queued (handoff.py)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
