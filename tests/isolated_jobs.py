"""Fixture handlers of the hard-stop tests (tests/worker/test_hard_stop.py): each job runs in a
child process of its own (``isolation="process"``)."""

import asyncio
import os
import re
import socket

from django_jobs import PermanentError, Snooze, current_job, handler, set_progress
from django_jobs.exceptions import JobCanceled, JobTimeout


def _mark(payload):
    """Append this run's pid to the file the test names: one line per run of the handler."""
    with open(payload["marks"], "a") as marks:
        marks.write(f"{os.getpid()}\n")


@handler("isolated_socket_read", timeout=0.5, max_attempts=1, isolation="process")
def isolated_socket_read(payload):
    """Blocks in a socket read without a timeout (the GIL released), and goes back to it when
    asked to stop, as a driver that retries its read would."""
    _mark(payload)
    ours, _theirs = socket.socketpair()  # nothing is ever sent
    while True:
        try:
            ours.recv(1)
        except (JobTimeout, JobCanceled):
            continue


@handler("isolated_regex", timeout=0.5, max_attempts=1, isolation="process")
def isolated_regex(payload):
    """A catastrophic regular expression: C code holding the GIL for longer than the test.
    ``re`` checks for signals as it backtracks, so the JobTimeout raised at the timeout reaches
    it; it starts again, as a handler that catches every error and retries would."""
    _mark(payload)
    while True:
        try:
            return bool(re.match(r"(a+)+$", "a" * 40 + "b"))
        except (JobTimeout, JobCanceled):
            continue


@handler("isolated_cancelable", timeout=60, isolation="process")
def isolated_cancelable(payload):
    """Blocks in a socket read, ignoring stops, until its job is canceled and its process ended."""
    return isolated_socket_read(payload)


@handler("isolated_result", isolation="process")
def isolated_result(payload):
    """Returns where it ran, the job it saw, and what it read through the ORM."""
    from django_jobs.models import Job

    job = current_job()
    set_progress(0.5, "half way")
    return {"pid": os.getpid(), "payload": payload, "job": job.public_id,
            "status": Job.objects.get(pk=job.pk).status}


@handler("isolated_async", isolation="process")
async def isolated_async(payload):
    await asyncio.sleep(0)
    return {"async": payload["n"]}


@handler("isolated_raises", isolation="process", max_attempts=3)
def isolated_raises(payload):
    if payload.get("exit"):
        os._exit(3)
    if payload.get("snooze"):
        raise Snooze(3600)
    if payload.get("permanent"):
        raise PermanentError(f"bad input {payload['n']}")
    raise ValueError(f"went wrong in {os.getpid()}")


@handler("isolated_polite", timeout=0.5, max_attempts=1, isolation="process")
def isolated_polite(payload):
    """Blocked in a socket read; lets the JobTimeout raised at its timeout end it."""
    ours, _theirs = socket.socketpair()  # nothing is ever sent
    ours.recv(1)
