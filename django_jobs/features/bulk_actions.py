"""Actions over a filter: retry, cancel or delete every job matching a filter, however many, as
a job of its own.

The admin's list (and ``manage.py jobs bulk``) turns its filter into a **spec**: a small dict of
the filters this module knows (``SPEC_KEYS``). A filter it does not know is refused, never
dropped, so an action cannot reach more jobs than the list showed. ``start`` counts the set,
records a ``BulkAction`` with the newest job's primary key as its **bound**, and enqueues the
job that runs it, in one transaction. The set is frozen there: the job walks the jobs matching
the spec up to the bound in primary-key order, ``BATCH`` at a time, each batch and the
action's place (``cursor``) written in one short transaction, so no lock is held long, a job
enqueued later is never reached, a job retried and dead again is behind the cursor ("retry
every dead job" ends), and a job restarted (a worker lost, a deploy) goes on where it stopped.

The action's own job is never part of its set, nor any other action's job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_jobs.core.states import CANCELED, DEAD, FAILED, PENDING, PROCESSING, JobStatus
from django_jobs.core.validation import PRIORITY_NAMES
from django_jobs.exceptions import JobConflict
from django_jobs.features.dependencies import held_by_dependents
from django_jobs.handlers.registry import get_handler, handler
from django_jobs.models import BulkAction, Job
from django_jobs.models.schema import jobs_database

logger = logging.getLogger("django_jobs.admin")

TYPE = "django_jobs.bulk_action"
BATCH = 500  # jobs changed per transaction
COUNT_CAP = 100_000  # a set larger than this is counted as "more than"
CONFLICT_TRIES = 3
SPEC_KEYS = ("status", "type", "queue", "priority", "has_error", "created_from",
             "created_before", "public_id", "error_contains", "search")
PRIORITIES = ("above", *PRIORITY_NAMES, "below")  # as the admin's priority filter has them
# The statuses each verb changes; the others in the set are skipped.
APPLIES = {
    BulkAction.Verb.RETRY: (DEAD, FAILED, CANCELED),
    BulkAction.Verb.CANCEL: (PENDING, FAILED, JobStatus.WAITING, PROCESSING),
    BulkAction.Verb.DELETE: tuple(s for s in JobStatus.values if s != PROCESSING),
}


class BadSpec(ValueError):
    """A filter that cannot be turned into a frozen set: unknown, or a value of the wrong
    kind. The message names it."""


def clean_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec, checked: known keys, values of their kind; BadSpec otherwise."""
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise BadSpec(f"cannot act over a filter on {', '.join(unknown)}: only "
                      f"{', '.join(SPEC_KEYS)} are supported")
    cleaned: dict[str, Any] = {}
    for key, value in spec.items():
        if value in (None, "", []):
            continue
        if key == "status":
            values = value if isinstance(value, list) else str(value).split(",")
            bad = [v for v in values if v not in JobStatus.values]
            if bad:
                raise BadSpec(f"unknown status {bad[0]!r}")
            cleaned[key] = sorted(values)
        elif key == "priority":
            if value not in PRIORITIES:
                raise BadSpec(f"priority must be one of {', '.join(PRIORITIES)}")
            cleaned[key] = value
        elif key == "has_error":
            if str(value) not in ("yes", "no"):
                raise BadSpec("has_error must be yes or no")
            cleaned[key] = str(value)
        elif key in ("created_from", "created_before"):
            moment = value if isinstance(value, datetime) else parse_datetime(str(value))
            if moment is None:
                raise BadSpec(f"{key} must be a date and time, not {value!r}")
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment)
            cleaned[key] = moment.isoformat()
        else:
            cleaned[key] = str(value)
    return cleaned


def matching(spec: Mapping[str, Any], *, using: str | None = None) -> QuerySet[Job]:
    """The jobs a clean spec names (never an action's own job)."""
    jobs = Job.objects.using(using).exclude(type=TYPE)
    if "status" in spec:
        jobs = jobs.filter(status__in=spec["status"])
    for key in ("type", "queue", "public_id"):
        if key in spec:
            jobs = jobs.filter(**{key: spec[key]})
    priority = spec.get("priority")
    if priority in PRIORITY_NAMES:
        jobs = jobs.filter(priority=PRIORITY_NAMES[priority])
    elif priority == "above":
        jobs = jobs.filter(priority__gt=max(PRIORITY_NAMES.values()))
    elif priority == "below":
        jobs = jobs.filter(priority__lt=min(PRIORITY_NAMES.values()))
    if "has_error" in spec:
        jobs = jobs.filter(error__isnull=spec["has_error"] == "no")
    if "created_from" in spec:
        jobs = jobs.filter(created_at__gte=parse_datetime(spec["created_from"]))
    if "created_before" in spec:
        jobs = jobs.filter(created_at__lt=parse_datetime(spec["created_before"]))
    if "error_contains" in spec:
        jobs = jobs.filter(error__message__icontains=spec["error_contains"])
    if "search" in spec:  # as the admin's search: the type, the error's message, the payload
        term = spec["search"]
        jobs = jobs.filter(Q(type__icontains=term) | Q(error__message__icontains=term)
                           | Q(payload__icontains=term))
    return jobs


def describe(spec: Mapping[str, Any]) -> str:
    """``dead jobs of type email.send in queue default`` for the action's name."""
    words = [" or ".join(spec.get("status", [])) or "all", "jobs"]
    for key, text in (("type", "of type"), ("queue", "in queue"), ("priority", "of priority"),
                      ("public_id", "with id"), ("has_error", "with an error:"),
                      ("error_contains", "whose error contains"), ("search", "matching"),
                      ("created_from", "created from"), ("created_before", "created before")):
        if key in spec:
            words += [text, str(spec[key])]
    return " ".join(words)[:500]


def count(spec: Mapping[str, Any], *, using: str | None = None) -> tuple[int, bool]:
    """How many jobs match, and whether that is a lower bound (more than ``COUNT_CAP``)."""
    found = matching(spec, using=using).order_by().values("pk")[: COUNT_CAP + 1].count()
    return min(found, COUNT_CAP), found > COUNT_CAP


def start(verb: str, spec: Mapping[str, Any], *, user: str = "",
          using: str | None = None) -> BulkAction:
    """Freeze the set and enqueue the job that acts on it, in one transaction (the caller's,
    if it has one). BadSpec for a filter this module does not know, ValueError for a verb."""
    if verb not in BulkAction.Verb.values:
        raise ValueError(f"unknown verb {verb!r}: one of {', '.join(BulkAction.Verb.values)}")
    spec = clean_spec(spec)
    alias = using or jobs_database()
    with transaction.atomic(using=alias):
        bound = Job.objects.using(alias).order_by("-pk").values_list("pk", flat=True).first()
        matched, capped = count(spec, using=alias)
        action = BulkAction.objects.using(alias).create(
            verb=verb, spec=spec, description=describe(spec), bound=bound or 0,
            matched=matched, matched_capped=capped, created_by=user[:150])
        job = Job.enqueue(TYPE, {"action": action.pk})
        BulkAction.objects.using(alias).filter(pk=action.pk).update(job_id=job.pk)
        action.job_id = job.pk
    return action


def step(action: BulkAction, *, using: str | None = None, batch: int = BATCH) -> bool:
    """Act on the next batch of the set and move the cursor past it, in one transaction;
    False once the set is done (and the action marked finished)."""
    alias = using or action._state.db or jobs_database()
    with transaction.atomic(using=alias):
        locked = BulkAction.objects.using(alias).select_for_update().get(pk=action.pk)
        ids = list(matching(locked.spec, using=alias)
                   .filter(pk__gt=locked.cursor, pk__lte=locked.bound)
                   .order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            locked.finished_at = locked.finished_at or timezone.now()
            locked.save(update_fields=["finished_at"])
            action.__dict__.update(locked.__dict__)
            return False
        chosen = Job.objects.using(alias).filter(pk__in=ids)
        changed = act(locked.verb, chosen)
        locked.cursor = ids[-1]
        locked.changed += changed
        locked.skipped += len(ids) - changed
        locked.save(update_fields=["cursor", "changed", "skipped"])
    action.__dict__.update(locked.__dict__)
    return True


def act(verb: str, jobs: QuerySet[Job]) -> int:
    """The verb on a batch: the queryset verbs the admin's actions call; the jobs they do not
    apply to are left alone (and counted as skipped)."""
    if verb == BulkAction.Verb.RETRY:
        return jobs.retry()  # type: ignore[attr-defined]
    if verb == BulkAction.Verb.CANCEL:
        return jobs.cancel()  # type: ignore[attr-defined]
    kept = jobs.exclude(status=PROCESSING)
    return kept.exclude(held_by_dependents(kept)).discard()  # type: ignore[attr-defined]


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """The action's job: every batch up to the end of the set, then a summary as its result.
    A conflict with another action on the same jobs is tried again; past a few tries the job
    fails and is retried later, from its cursor."""
    from django_jobs.features.handler_control import set_progress

    action = BulkAction.objects.get(pk=payload["action"])
    conflicts = 0
    while True:
        try:
            more = step(action)
        except JobConflict:
            conflicts += 1
            if conflicts >= CONFLICT_TRIES:
                raise
            time.sleep(0.2 * conflicts)
            continue
        if not more:
            break
        span = max(1, action.bound)
        set_progress(min(1.0, action.cursor / span),
                     f"{action.changed} changed, {action.skipped} skipped")
    logger.info("action over a filter done: %s %s: %d changed, %d skipped",
                action.verb, action.description, action.changed, action.skipped)
    return {"changed": action.changed, "skipped": action.skipped}


handler(TYPE, max_attempts=25)(run)
HANDLER = get_handler(TYPE)
