"""What watches the jobs can never change them: tracing, the signals' receivers and logging are
called so that what they raise is caught, the job's run and outcome going on as without them,
and reported once per kind of failure per process (not once per job, which would flood).

A failure is reported on standard error, where a broken logging setup cannot lose it, and as
an ERROR record of the ``django_jobs.observers`` logger (with its traceback), where an error
tracker sees it; a failure of that record is left on standard error.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Any

from django.dispatch import Signal

from django_jobs.exceptions import JobCanceled, JobTimeout

logger = logging.getLogger("django_jobs.observers")

_reported: set[tuple[str, str]] = set()
_lock = threading.Lock()


def report(what: str, exc: BaseException, then: str = "the job goes on as without it") -> None:
    """Report that ``what`` (a tracer's call, a receiver, a log handler) raised ``exc``: once
    per ``what`` and kind of exception in this process."""
    key = (what, type(exc).__qualname__)
    with _lock:
        if key in _reported:
            return
        _reported.add(key)
    text = (f"django-jobs: {what} raised {type(exc).__name__}: {exc}; {then} "
            "(reported once per process)")
    write_stderr(text + "\n" + "".join(traceback.format_exception(exc)))
    try:
        logger.error(text, exc_info=exc, extra={"event": "observer_failed", "reason": what,
                                                "next": then})
    except Exception:  # noqa: S110  the failure is on standard error already
        pass


def write_stderr(text: str) -> None:
    """Write to standard error, whatever becomes of it (closed, or gone)."""
    try:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: S110  nowhere left to say it
        pass


def send(signal: Signal, name: str, **named: Any) -> None:
    """Send ``signal`` (named ``name``) with ``sender`` and ``named`` to every receiver: one
    that raises is reported and the others still run. A handler's timeout or cancel, which
    the worker raises into the thread wherever it is, is raised on once the others have run."""
    interrupt: BaseException | None = None
    for receiver, response in signal.send_robust(**named):
        if not isinstance(response, BaseException):
            continue
        if isinstance(response, (JobTimeout, JobCanceled)):
            interrupt = response
            continue
        report(f"a {name} receiver ({receiver_name(receiver)})", response,
               "the signal's other receivers and the job go on as without it")
    if interrupt is not None:
        raise interrupt


def receiver_name(receiver: Any) -> str:
    module = getattr(receiver, "__module__", None) or ""
    name = getattr(receiver, "__qualname__", None) or type(receiver).__qualname__
    return f"{module}.{name}" if module else name
