"""Fixture handlers for hostile outcomes, crashes, stray threads and rolling deploys."""

import ctypes
import os
import signal
import threading
import time

from django_jobs import current_job, handler
from django_jobs.signals import job_started

# A worker started with DJANGO_JOBS_TEST_CLAIM_LOG=<path> appends a line per job it starts:
# the job's id, attempt number and the lease token of the claim that took it. Jobs claimed in
# one batch share one token (docs/explanation-guarantees.md), so the log shows which jobs a
# worker claimed together.
CLAIM_LOG = os.environ.get("DJANGO_JOBS_TEST_CLAIM_LOG")


def note_claim(sender, job, attempt, **kwargs):
    with open(CLAIM_LOG, "a") as log:  # one short write per line, in append mode
        log.write(f"{job.public_id} {attempt} {job.lease_token}\n")


def read_claim_log(path):
    """{(job id, attempt): lease token} from a claim log."""
    claims = {}
    with open(path) as log:
        for line in log:
            public_id, attempt, token = line.split()
            claims[public_id, int(attempt)] = token
    return claims


if CLAIM_LOG:
    job_started.connect(note_claim, dispatch_uid="tests.edge_jobs.note_claim")

# Strings PostgreSQL cannot store: a NUL, a lone surrogate (and a pair of surrogates written as
# two code points, which is not UTF-8 either).
POISON = {"nul": "before\x00after", "surrogate": "before\ud800after", "pair": "\ud83d\ude00"}


class Hostile(Exception):
    """An exception carrying ``details``, as a handler attaches them."""

    def __init__(self, message, details=None):
        super().__init__(message)
        self.details = details


@handler("poison_result", max_attempts=2)
def poison_result(payload):
    return {"text": POISON[payload["kind"]]}


@handler("poison_message", max_attempts=2)
def poison_message(payload):
    raise Hostile(f"message {POISON[payload['kind']]}")


@handler("poison_traceback", max_attempts=2)
def poison_traceback(payload):
    """A clean message; the poison is only in the chained exception, so in the traceback."""
    try:
        raise ValueError(POISON[payload["kind"]])
    except ValueError as exc:
        raise Hostile("clean message") from exc


@handler("poison_details", max_attempts=2)
def poison_details(payload):
    text = POISON[payload["kind"]]
    details = {text: text, "nested": [text, {"deeper": (text, 1.5)}], "obj": object(),
               "nan": float("nan")}
    details["self"] = details  # holds itself
    raise Hostile("details", details=details)


@handler("refused_result", max_attempts=2)
def refused_result(payload):
    """A result the test's trigger makes the database refuse (tests/worker/test_poison.py)."""
    return {"refuse_me": True}


@handler("unprintable_error", max_attempts=2)
def unprintable_error(payload):
    class Unprintable(Exception):
        def __str__(self):
            raise Unprintable()

    raise Unprintable()


@handler("outage_record", max_attempts=1)
def outage_record(payload):
    """Notes its run (``tests.models.Execution``), waits for the ``gate`` file if it is given,
    and returns a result of ``size`` characters (tests/worker/test_outage_workers.py)."""
    from pathlib import Path

    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    if payload.get("gate"):
        deadline = time.monotonic() + 120
        while not Path(payload["gate"]).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return {"pad": "x" * payload.get("size", 0), "n": payload.get("n")}


@handler("stray_thread")
def stray_thread(payload):
    """Starts a non-daemon thread that never ends, then returns."""
    threading.Thread(target=lambda: time.sleep(10**6), name="stray", daemon=False).start()
    return {"left": "a thread"}


@handler("crash_exit", max_attempts=1, max_crashes=2)
def crash_exit(payload):
    """Kills its own worker process: ``os._exit`` (the default), ``"sigkill"`` as the OOM
    killer does, or ``"segfault"``, a real one (a read of address 0 in C code)."""
    time.sleep(payload.get("after", 0.3))
    if payload.get("how") == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if payload.get("how") == "segfault":
        ctypes.string_at(0)
    os._exit(1)


@handler("innocent", max_attempts=1)
def innocent(payload):
    """Takes a moment, so that it is still running when a neighbour kills the worker."""
    time.sleep(payload.get("seconds", 1.0))
    return {"attempt": current_job().attempt}


if not os.environ.get("DJANGO_JOBS_TEST_OLD_WORKER"):
    # A type only "new" code knows: a worker started with DJANGO_JOBS_TEST_OLD_WORKER=1 plays
    # one not yet deployed in a rolling deploy.
    @handler("newly_deployed", max_attempts=1)
    def newly_deployed(payload):
        return {"ran": True}
