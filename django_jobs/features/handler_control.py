"""What a running handler can ask of its job: follow-ups, progress (and ``raise Snooze``).

    from django_jobs import Snooze, enqueue_after_success, set_progress

    @handler("import_file")
    def run(payload):
        set_progress(0.5, "halfway")
        if not ready():
            raise Snooze(60)              # run again in a minute; the attempt does not count
        enqueue_after_success("notify", {"file": payload["file"]})  # only if this completes

An ``async def`` handler awaits ``aset_progress`` (a database write); the others are the same.
"""

from __future__ import annotations

import asyncio
import math
from datetime import datetime
from typing import TYPE_CHECKING, Unpack

from django.core.exceptions import SynchronousOnlyOperation

from django_jobs.core import tracing
from django_jobs.core.contract import EnqueueKeywords, EnqueueOptions
from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.states import Outcome
from django_jobs.engine.feature_writes import guarded
from django_jobs.engine.hooks import Feature, enqueue_insert
from django_jobs.exceptions import InvalidJob

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager


MESSAGE_LENGTH = 200


def _running_job() -> Job:
    from django_jobs.core.current import current_job

    job = current_job.get()
    if job is None:
        raise RuntimeError("only a handler run by a worker can do this")
    return job


def enqueue_after_success(type: str, payload: JSONValue = None,
                          **options: Unpack[EnqueueKeywords]) -> None:
    """Enqueue a job when, and only if, the running handler completes.

    The arguments are those of ``Job.enqueue`` and are checked now (InvalidJob at once); the
    job is inserted in the transaction that records the completion, so a handler that fails,
    times out or is canceled leaves no follow-up behind.
    """
    from django_jobs.core.validation import check_payload, enqueue_fields, typed_arguments
    from django_jobs.handlers.registry import get_handler

    job = _running_job()
    check_payload(payload, typed_arguments(type))
    # the features' options (unique keys, dependencies), then the job's own
    enqueue_insert(type, EnqueueOptions(**options), get_handler(type))
    enqueue_fields(type, **options)
    # with the active span (the attempt's), whose trace the follow-up continues
    job.__dict__.setdefault("_after_success", []).append(
        (type, payload, options, tracing.current()))


def set_progress(fraction: float, message: str = "") -> bool:
    """Record the running job's progress (0 to 1) and a short message; shown by admin and API.

    Written at once, in its own statement, fenced on the job's lease: returns False if the job
    is no longer this worker's. Call it at most every second or so: each call is a write.
    """
    if not isinstance(fraction, int | float) or isinstance(fraction, bool) or \
            not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise InvalidJob({"progress": f"must be a number from 0 to 1, not {fraction!r}"})
    if not isinstance(message, str):
        raise InvalidJob({"progress_message": "must be a string"})
    message = message[:MESSAGE_LENGTH]
    try:
        storable_json(message)
    except NotStorable as exc:
        raise InvalidJob({"progress_message": str(exc)}) from None
    from django_jobs.models import Job

    job = _running_job()
    if _on_event_loop():
        raise SynchronousOnlyOperation(
            "set_progress writes to the database: in an async handler, await aset_progress()")
    return Job.objects.record_progress(job, float(fraction), message)


async def aset_progress(fraction: float, message: str = "") -> bool:
    """``set_progress`` for ``async def`` handlers: the same checks and write, run where the
    handler's async ORM queries run (a thread of the worker's slot)."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(set_progress)(fraction, message)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class FollowUps(Feature):
    """The finish hook of ``enqueue_after_success``: a completed job's follow-ups are inserted
    in the transaction that records the completion, each in a savepoint (``guarded``): one
    that is refused is logged and counted, and neither the completion nor the others undone."""

    name = "follow-ups"
    marks = ("_after_success",)  # the follow-ups ``enqueue_after_success`` put on the job

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        for outcome in written:
            if outcome.kind != Outcome.COMPLETED:
                continue
            for type, payload, options, trace in outcome.job.__dict__.pop("_after_success", []):
                # Checked when asked; still refused if a dependency it names was deleted
                # since, or the database refuses it: the completion stands without it.
                with guarded(manager.db, "follow-ups", f"the follow-up {type}", outcome.job), \
                        tracing.attached(trace):
                    manager.enqueue(type, payload, **options)
