"""``async def`` twins of the fixture handlers for timeouts, cancels, stops, snooze, progress and
follow-ups (tests/worker/test_async_handlers.py and the tests parametrized over both kinds).

Imported from ``tests/jobs.py`` so the worker's autodiscovery registers them.
"""

import asyncio
import os
import time
from pathlib import Path

from django_jobs import Snooze, aset_progress, current_job, enqueue_after_success, handler


@handler("async_timeout_short", timeout=0.3, max_attempts=2)
async def async_timeout_short(payload):
    """Awaits far past its timeout: the cancel reaches it at its ``await``."""
    await asyncio.sleep(10)


@handler("async_timeout_blocking", timeout=0.3, max_attempts=1)
async def async_timeout_blocking(payload):
    """Blocks its own event loop in synchronous code: no cancel reaches it."""
    time.sleep(payload.get("seconds", 60))  # the point of this handler


@handler("async_slow", max_attempts=3)
async def async_slow(payload):
    """``slow``, awaiting: marks a file when it starts (and ``<marker>.finally`` when it
    unwinds, however it ends), then sleeps ``seconds``."""
    job = current_job()
    marker = payload.get("marker")
    if marker:
        Path(marker).write_text(f"{os.getpid()} {job.attempt}")
    try:
        await asyncio.sleep(payload.get("seconds", 5))
    finally:
        if marker:
            Path(f"{marker}.finally").write_text(str(job.attempt))
    return {"slept": payload.get("seconds", 5), "attempt": job.attempt}


@handler("async_snoozer", max_attempts=1)
async def async_snoozer(payload):
    """``snoozer`` through the async ORM."""
    from django_jobs.models import JobAttempt

    job = current_job()
    snoozed = await JobAttempt.objects.filter(job_id=job.pk, outcome="snoozed").acount()
    if snoozed < payload.get("times", 2):
        raise Snooze(payload.get("seconds", 0))
    return {"snoozed": snoozed, "attempt": job.attempt}


@handler("async_with_followup", max_attempts=1)
async def async_with_followup(payload):
    enqueue_after_success(payload.get("then", "echo"), {"after": current_job().public_id})
    await asyncio.sleep(0)
    if payload.get("fail"):
        raise RuntimeError("failed after asking for a follow-up")
    return None


@handler("async_progressing")
async def async_progressing(payload):
    results = [await aset_progress(0.25, "a quarter")]
    results.append(await aset_progress(payload.get("fraction", 0.5),
                                       payload.get("message", "half")))
    return {"recorded": results}


@handler("async_sync_progress")
async def async_sync_progress(payload):
    """Calls the sync ``set_progress`` on its loop: refused, the attempt fails."""
    from django_jobs import set_progress

    set_progress(0.5)
