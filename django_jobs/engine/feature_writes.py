"""A feature's write that follows a job's end, made so that it cannot undo that end.

A finish (or a cancel, or a rescue) ends a job and, in the same transaction, lets the features
write what follows: a group's callback job, a completion callback's delivery, a follow-up. Those
writes carry values the site gave (payloads, job types, options) that the database or a check
may refuse. ``guarded`` makes such a write in a savepoint: if it raises anything but an outage
(``core/db_errors.py``: the database away, a timeout, a lock conflict), the savepoint is rolled
back, the job's end stands, and the failure is

- logged once at WARNING (``django_jobs.worker``, ``event=feature_write_failed``),
- counted once, under the type of the job it follows, with the finished jobs (``JobStat``
  rows of the outcome ``feature_failed``, read by the metrics as ``feature_write_failures``)
  when ``STATS`` is on,
- handed back (``Failure``) for the feature to store on its own row (a group's ``error``).

An outage is raised on: it rolls the whole finish back, and the worker writes the outcome again
when the database is back (the at-least-once window of ``docs/explanation-guarantees.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction

from django_jobs.core import clock
from django_jobs.core.db_errors import REFUSAL, classify
from django_jobs.core.stored_errors import error_dict

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.models import Job

logger = logging.getLogger("django_jobs.worker")


@dataclass
class Failure:
    """What ``guarded`` yields: ``error`` is set (a stored error) if the write failed."""

    error: JSONObject | None = None

    def __bool__(self) -> bool:
        return self.error is not None


@contextmanager
def guarded(using: str, feature: str, what: str, job: Job | None) -> Iterator[Failure]:
    """Run the block (``feature``'s write of ``what``, following the end of ``job``; None when
    no job's end led to it) in a savepoint of the caller's transaction; see the module's
    docstring."""
    failure = Failure()
    try:
        with transaction.atomic(using=using):
            yield failure
    except Exception as exc:
        if classify(exc) is not REFUSAL:
            raise
        failure.error = error_dict(exc, message=f"{what} not written: {exc}")
        failure.error["traceback"] = ""  # the log line has it
        logger.warning(
            "%s: %s not written after job %s ended (%s: %s); the job's end stands",
            feature, what, job.public_id if job else "-", exc.__class__.__name__, exc,
            exc_info=(type(exc), exc, exc.__traceback__),
            extra={"event": "feature_write_failed", "feature": feature,
                   "job_id": job.public_id if job else None,
                   "job_type": job.type if job else None})
        from django_jobs.engine import finish_counts  # the models: not when the package is imported

        if finish_counts.enabled() and job is not None:
            finish_counts.record_failures(using, [job], clock.now(using))
