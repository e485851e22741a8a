"""Fixture handlers for scheduling, unique jobs, limits, timeouts, snooze and progress tests.

Imported from ``tests/jobs.py`` so the worker's autodiscovery registers them.
"""

import os
import threading
import time

from django_jobs import (
    ConcurrencyLimit,
    RateLimit,
    Snooze,
    Unique,
    current_job,
    enqueue_after_success,
    handler,
    set_progress,
)


@handler("timeout_blocking", timeout=0.3, max_attempts=1)
def timeout_blocking(payload):
    """Blocks in one C call (``time.sleep``) far past its timeout: it cannot be interrupted."""
    time.sleep(payload.get("seconds", 60))


@handler("timeout_blocking_lock", timeout=0.3, max_attempts=1)
def timeout_blocking_lock(payload):
    """Blocks in one C call (a lock's acquire) far past its timeout, as ``timeout_blocking``
    does; usable under libfaketime, where ``time.sleep`` fails with EINVAL."""
    lock = threading.Lock()
    lock.acquire()
    lock.acquire(timeout=payload.get("seconds", 60))


@handler("unique_customer", unique=Unique(fields=("customer_id",)))
def unique_customer(payload):
    """At most one unfinished job per customer, by the handler's rule."""
    return {"customer": payload["customer_id"]}


def _running(type, **payload_match):
    from django_jobs.models import Job

    return Job.objects.filter(type=type, status="processing", **payload_match).count()


def capped(payload):
    """Records the most jobs of its type it saw running at once (the cap is 2)."""
    seen = _running("capped")
    deadline = time.monotonic() + payload.get("sleep", 0.2)
    while time.monotonic() < deadline:
        time.sleep(0.02)
        seen = max(seen, _running("capped"))
    return {"running_seen": seen}


def capped_tenant(payload):
    """At most one running per tenant; records how many of its tenant it saw running."""
    seen = _running("capped_tenant", payload__tenant=payload["tenant"])
    time.sleep(payload.get("sleep", 0.05))
    return {"running_seen": max(seen, _running("capped_tenant",
                                                payload__tenant=payload["tenant"]))}


def rated(payload):
    return None


LIMITED = {
    "capped": (capped, [ConcurrencyLimit(2)]),
    "capped_tenant": (capped_tenant, [ConcurrencyLimit(1, key="tenant")]),
    "rated": (rated, [RateLimit(3, per=1)]),
}


def register_limited() -> None:
    """Register the limited handlers. Not at import for in-process tests, so every other test's
    claim runs the plain path; worker subprocesses get them with DJANGO_JOBS_TEST_LIMITS=1."""
    for type, (func, limits) in LIMITED.items():
        handler(type, limits=limits)(func)


def unregister_limited() -> None:
    from django_jobs.handlers.registry import unregister

    for type in LIMITED:
        unregister(type)


if os.environ.get("DJANGO_JOBS_TEST_LIMITS"):
    register_limited()


@handler("snoozer", max_attempts=1)
def snoozer(payload):
    """Snoozes ``times`` times (each snooze is recorded as an attempt row), then completes."""
    from django_jobs.models import JobAttempt

    job = current_job()
    snoozed = JobAttempt.objects.filter(job_id=job.pk, outcome="snoozed").count()
    if snoozed < payload.get("times", 2):
        raise Snooze(payload.get("seconds", 0))
    return {"snoozed": snoozed, "attempt": job.attempt}


@handler("with_followup", max_attempts=1)
def with_followup(payload):
    enqueue_after_success(payload.get("then", "echo"), {"after": current_job().public_id})
    if payload.get("fail"):
        raise RuntimeError("failed after asking for a follow-up")
    return None


@handler("progressing")
def progressing(payload):
    results = [set_progress(0.25, "a quarter")]
    results.append(set_progress(payload.get("fraction", 0.5), payload.get("message", "half")))
    return {"recorded": results}
