"""Checks and normalises the arguments of ``Job.enqueue``; raises InvalidJob naming each field."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Unpack
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http.request import validate_host
from django.utils import timezone

from django_jobs.core.contract import EnqueueKeywords, EnqueueOptions
from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.outcomes import stored
from django_jobs.core.settings import jobs_settings
from django_jobs.exceptions import InvalidJob, UnknownJobType
from django_jobs.handlers.registry import get_handler, registered

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.handlers.handler_arguments import ArgumentSpec
    from django_jobs.handlers.registry import Handler

PRIORITY_NAMES = {"low": -10, "normal": 0, "high": 10}
PRIORITY_MIN, PRIORITY_MAX = -100, 100
QUEUE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")
MAX_ATTEMPTS_LIMIT = 1000


def priority_value(priority: object) -> int:
    """``low``/``normal``/``high`` or an integer from -100 (last) to 100 (first)."""
    if isinstance(priority, str) and priority in PRIORITY_NAMES:
        return PRIORITY_NAMES[priority]
    if isinstance(priority, int) and not isinstance(priority, bool):
        if PRIORITY_MIN <= priority <= PRIORITY_MAX:
            return priority
    raise InvalidJob(
        {"priority": f"must be low, normal, high or an integer from {PRIORITY_MIN} to "
         f"{PRIORITY_MAX}, not {priority!r}"}
    )


def priority_label(value: int) -> str:
    """The name of a priority value if it has one, else the number as text."""
    for name, number in PRIORITY_NAMES.items():
        if number == value:
            return name
    return str(value)


def check_payload(payload: object, arguments: ArgumentSpec | None = None) -> JSONValue:
    """The payload to store: ``None`` (the default, no payload) is ``{}``; anything else must be
    storable JSON (``jsonvalues``) within MAX_PAYLOAD_BYTES, else InvalidJob naming payload.

    With ``arguments`` (a handler's, ``Handler.arguments``), the payload must also fit a typed
    handler's arguments (``handlers/handler_arguments.py``), unless any JSON does."""
    if payload is None:
        payload = {}
    else:
        try:
            storable_json(payload, jobs_settings.MAX_PAYLOAD_BYTES, "MAX_PAYLOAD_BYTES")
        except NotStorable as exc:
            raise InvalidJob({"payload": str(exc)}) from None
    if arguments is not None and not arguments.plain_whole:
        arguments.check_stored(payload)
    return payload


def typed_arguments(type: str) -> ArgumentSpec | None:
    """The arguments a payload of ``type`` must fit, or None when any JSON does (a
    ``def f(payload)`` handler, the Tasks backend's, or no handler): asked once per enqueue."""
    found = get_handler(type)
    if found is None or found.arguments is None or found.arguments.plain_whole:
        return None
    return found.arguments


def resolve_run_at(delay: object, run_at: object, now: datetime) -> datetime:
    """When the job is due: ``run_at`` (an aware datetime), ``delay`` (a timedelta or
    seconds) from ``now``, or ``now``; InvalidJob naming the field."""
    if delay is not None and run_at is not None:
        raise InvalidJob({"delay": "give either delay or run_at, not both"})
    if run_at is not None:
        return _due_at(run_at)
    if delay is None:
        return now
    seconds = _delay_seconds(delay)
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidJob({"delay": f"{seconds} seconds is too far in the future"}) from None


def _due_at(run_at: object) -> datetime:
    if not isinstance(run_at, datetime):
        raise InvalidJob({"run_at": f"must be a datetime, not {type(run_at).__name__}"})
    if settings.USE_TZ and timezone.is_naive(run_at):
        raise InvalidJob({"run_at": "must be timezone-aware (USE_TZ is on)"})
    return stored(run_at)  # aware under USE_TZ = False: naive in the default time zone


def _delay_seconds(delay: object) -> float:
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise InvalidJob({"delay": f"must be a timedelta or seconds, not {type(delay).__name__}"})
    if not seconds >= 0:  # also refuses NaN
        raise InvalidJob({"delay": f"must not be negative, got {seconds} seconds"})
    return seconds


def job_fields(type: object, options: EnqueueOptions, now: datetime
               ) -> tuple[dict[str, object], Handler]:
    """Model field values shared by every job of one enqueue call (all but the payload), from
    the call's options and its handler's defaults, and the handler; InvalidJob naming the
    field, UnknownJobType for a type no handler is registered for."""
    if not isinstance(type, str) or not type:
        raise InvalidJob({"type": "must be a non-empty string"})
    found = registered.get(type) or get_handler(type)  # a resolver's (the Tasks backend's)
    if found is None:
        raise UnknownJobType({"type": f"no handler is registered for job type {type!r}"})
    fields: dict[str, object] = {
        "type": type,
        "priority": priority_value(options.priority),
        "queue": _queue(options.queue, found),
        "run_at": resolve_run_at(options.delay, options.run_at, now),
        "max_attempts": _max_attempts(options.max_attempts, found),
        "callback_url": check_callback_url(options.callback_url),
        "created_at": now,
        "updated_at": now,
    }
    if options.group_id is not None:
        fields["group_id"] = _group_id(options.group_id)
    return fields, found


def _queue(queue: object, found: Handler) -> str:
    if queue is None:
        queue = found.queue or jobs_settings.DEFAULT_QUEUE
    if not isinstance(queue, str) or not QUEUE_RE.fullmatch(queue):
        raise InvalidJob({"queue": f"must match {QUEUE_RE.pattern}, not {queue!r}"})
    return queue


def _max_attempts(max_attempts: object, found: Handler) -> int:
    if max_attempts is None:
        max_attempts = found.max_attempts or jobs_settings.MAX_ATTEMPTS
    if isinstance(max_attempts, int) and not isinstance(max_attempts, bool) and \
            1 <= max_attempts <= MAX_ATTEMPTS_LIMIT:
        return max_attempts
    raise InvalidJob(
        {"max_attempts": f"must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, "
         f"not {max_attempts!r}"}
    )


def _group_id(group_id: object) -> int:
    if not isinstance(group_id, int) or isinstance(group_id, bool):
        raise InvalidJob({"group_id": f"must be a group's id, not {group_id!r}"})
    return group_id


def enqueue_fields(type: object, now: datetime | None = None,
                   **options: Unpack[EnqueueKeywords]) -> dict[str, object]:
    """``job_fields``' values for ``Job.enqueue``'s keyword options (a check of them before
    the enqueue: a schedule's, a group's callback's)."""
    return job_fields(type, EnqueueOptions(**options), now or timezone.now())[0]


# --- callback_url: where a job's completion callback may be sent ---

CALLBACK_URL_MAX_LENGTH = 2000


def check_callback_url(url: object) -> str:
    """``url`` if a callback may be sent there, "" for none; else InvalidJob naming the field."""
    if url is None or url == "":
        return ""
    if not isinstance(url, str):
        raise InvalidJob({"callback_url": f"must be a string, not {type(url).__name__}"})
    problem = callback_url_problem(url)
    if problem:
        raise InvalidJob({"callback_url": problem})
    return url


def callback_url_problem(url: str) -> str | None:
    """Why a callback may not go to ``url`` (checked at enqueue and again at delivery)."""
    if len(url) > CALLBACK_URL_MAX_LENGTH:
        return f"must be at most {CALLBACK_URL_MAX_LENGTH} characters"
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        return "must be an absolute http or https URL"
    parts = urlsplit(url)
    if parts.username or parts.password:
        return "must not carry a user name or password"
    if not jobs_settings.CALLBACK_SECRET:
        return "callbacks are off on this server (DJANGO_JOBS['CALLBACK_SECRET'] is not set)"
    host = parts.hostname or ""
    if not validate_host(host, list(jobs_settings.CALLBACK_ALLOWED_HOSTS)):
        return f"host {host!r} is not allowed (DJANGO_JOBS['CALLBACK_ALLOWED_HOSTS'])"
    return None
