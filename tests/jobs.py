"""Fixture handlers, discovered like any app's ``jobs.py``."""

import os
import time
from pathlib import Path

from django_jobs import PermanentError, current_job, handler


class Fragile(Exception):
    pass


class Broken(Exception):
    pass


@handler("noop")
def noop(payload):
    return None


@handler("echo")
def echo(payload):
    return {"echo": payload}


@handler("always_fails", max_attempts=3)
def always_fails(payload):
    raise RuntimeError(f"boom {payload.get('n', '')}".strip())


@handler("flaky", max_attempts=5)
def flaky(payload):
    job = current_job()
    if job.attempt <= payload.get("fail_times", 2):
        raise Fragile(f"attempt {job.attempt} failed")
    return {"succeeded_on": job.attempt}


@handler("permanent")
def permanent(payload):
    raise PermanentError("cannot ever work")


@handler("listed_permanent", permanent=[Broken])
def listed_permanent(payload):
    raise Broken("listed as permanent")


@handler("retry_only_fragile", retry_on=[Fragile])
def retry_only_fragile(payload):
    raise KeyError("not in retry_on")


@handler("system_exit")
def system_exit(payload):
    raise SystemExit(3)


@handler("keyboard_interrupt")
def keyboard_interrupt(payload):
    raise KeyboardInterrupt


@handler("bad_result")
def bad_result(payload):
    return object()


@handler("record")
def record(payload):
    """Write one row per run, so tests can count how often each job ran."""
    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    if payload.get("sleep"):
        time.sleep(payload["sleep"])
    return {"pid": os.getpid()}


@handler("slow", max_attempts=3)
def slow(payload):
    """Marks a file when it starts, then sleeps in small steps (interruptible)."""
    job = current_job()
    if payload.get("marker"):
        Path(payload["marker"]).write_text(f"{os.getpid()} {job.attempt}")
    deadline = time.monotonic() + payload.get("seconds", 5)
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return {"slept": payload.get("seconds", 5), "attempt": job.attempt}


@handler("timeout_short", timeout=0.3, max_attempts=2)
def timeout_short(payload):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.01)


@handler("async_echo")
async def async_echo(payload):
    return {"async": payload}


@handler("async_record", max_attempts=5)
async def async_record(payload):
    """``record`` through the async ORM: its queries run in a thread of their own."""
    import asyncio

    from django_jobs.models import Job
    from tests.models import Execution

    job = current_job()
    await Execution.objects.acreate(job_public_id=job.public_id, pid=os.getpid(),
                                    attempt=job.attempt)
    if payload.get("sleep"):
        await asyncio.sleep(payload["sleep"])
    return {"left": await Job.objects.filter(status=Job.Status.PENDING).acount()}


@handler("chaos_record", max_attempts=1000, max_crashes=1000)
def chaos_record(payload):
    """The chaos suite's handler: notes each run in the run log (tests/chaos/ledger.py), then
    sleeps, or waits for its process's gate file (``<gate>.<pid>``) and notes that it returned.
    Attempts and crashes are plentiful: the storms kill workers at random, so a job they hit
    again and again is innocent, and quarantine is not what these tests are about."""
    from tests.chaos.ledger import RAN, RETURNED, note

    job = current_job()
    note(payload["log"], RAN, job.public_id, job.attempt)
    time.sleep(payload.get("sleep", 0))
    if payload.get("gate"):
        gate = Path(f"{payload['gate']}.{os.getpid()}")
        deadline = time.monotonic() + 120
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        note(payload["log"], RETURNED, job.public_id, job.attempt)
    return {"pid": os.getpid(), "attempt": job.attempt}


@handler("bad_query", max_attempts=1)
def bad_query(payload):
    """Records its run, then sends a query the database rejects (on PostgreSQL that aborts
    the transaction it ran in)."""
    from django.db import connection

    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM django_jobs_no_such_table")


# Fidelity tests (tests/fidelity/test_fidelity.py): what a handler was given, by job id, and what
# to return.
RECEIVED: dict[str, object] = {}
RESULTS: dict[str, object] = {}


@handler("fidelity_echo", max_attempts=1)
def fidelity_echo(payload):
    """Returns the payload it was given (noted in RECEIVED when run in the test's process)."""
    RECEIVED[current_job().public_id] = payload
    return payload


@handler("fidelity_result", max_attempts=2)
def fidelity_result(payload):
    """Returns RESULTS[payload["key"]], a value no payload could carry (tuples, int keys...)."""
    return RESULTS[payload["key"]]


@handler("fidelity_progress", max_attempts=1)
def fidelity_progress(payload):
    """Reports a progress message with what a payload cannot carry: "NUL" and "SUR" markers
    become a NUL character and a lone surrogate."""
    from django_jobs import set_progress

    set_progress(0.5, payload["message"].replace("NUL", "\x00").replace("SUR", "\ud800"))


from tests import edge_jobs  # noqa: E402, F401, I001  (hostile outcomes, crashes, threads)
from tests import sched_jobs  # noqa: E402, F401  (fixture handlers of the scheduling issue)
from tests import stop_jobs  # noqa: E402, F401  (handlers still running at a stop; forks)
from tests import clock_jobs  # noqa: E402, F401  (handlers of the clock tests)
from tests import trace_jobs  # noqa: E402, F401  (handlers of the tracing tests)
from tests import async_handlers  # noqa: E402, F401  (async twins of the handlers above)
from tests import typed_jobs  # noqa: E402, F401  (handlers typed by their own arguments)
from tests import isolated_jobs  # noqa: E402, F401  (each job in a child process)


@handler("read_dependencies")
def read_dependencies(payload):
    """What ``dependency_results()`` gives the running job: each key's result, or the
    DependencyUnavailable message and the status."""
    from django_jobs import DependencyUnavailable, dependency_results

    results = dependency_results()
    seen = {}
    for key in results:
        try:
            seen[key] = {"result": results[key]}
        except DependencyUnavailable as exc:
            seen[key] = {"unavailable": str(exc), "status": results.status(key)}
    return seen


@handler("follow_ups_one_refused", max_attempts=3)
def follow_ups_one_refused(payload):
    """Asks for two follow-ups, the first depending on ``payload["dep"]``, then deletes that job
    (as an operator might meanwhile): the first follow-up is refused at the finish."""
    from django_jobs import enqueue_after_success
    from django_jobs.models import Job
    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    enqueue_after_success("echo", {"refused": True}, depends_on=[payload["dep"]])
    enqueue_after_success("echo", {"kept": True})
    Job.objects.filter(pk=payload["dep"]).delete()
    return None


@handler("leaky", max_attempts=2)
def leaky(payload):
    """Fails until dead, holding a payload value and a secret of its own in its locals."""
    card = payload["card"]
    secret = "-".join(["handler", "local", "secret"])  # in no line of source an event quotes
    raise RuntimeError(f"declined ({len(card) + len(secret)} characters checked)")


@handler("where_current")
def where_current(payload):
    """Where ``current_job()`` is this job: here, in a thread it starts, under ``sync_to_async``."""
    import threading

    from asgiref.sync import async_to_sync, sync_to_async

    here = current_job()
    seen = {}
    thread = threading.Thread(target=lambda: seen.setdefault("thread", current_job()))
    thread.start()
    thread.join()

    async def in_async():
        return await sync_to_async(current_job)()

    return {"handler": here.public_id if here else None,
            "thread": seen["thread"].public_id if seen["thread"] else None,
            "async_to_sync": getattr(async_to_sync(in_async)(), "public_id", None)}
