"""Reading a ``POST /jobs`` body into ``Job.enqueue``'s arguments (``Submission``), refusing
anything odd."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, NamedTuple, NoReturn, cast

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from django_jobs.api.constraints import (
    CALLBACK_URL_MAX_LENGTH,
    MAX_DELAY_MS,
    QUEUE,
    callback_url_pattern,
    matches,
)
from django_jobs.api.errors import ApiError
from django_jobs.core.contract import EnqueueKeywords
from django_jobs.core.settings import jobs_settings
from django_jobs.core.validation import callback_url_problem

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue

RESERVED_PREFIX = "django_jobs."  # the app's own job types (callbacks) are not for clients
MAX_DEPTH = 64
INTEGER_FIELDS = ("priority", "delay", "max_attempts")
FIELDS = ("type", "payload", "priority", "delay", "queue", "max_attempts", "callback_url")


def read_body(request: HttpRequest) -> JSONObject:
    """The request's JSON object; ApiError 400/415 for anything else."""
    raw = _raw_body(request, int(jobs_settings.API_MAX_PAYLOAD_BYTES))
    if not raw:
        raise ApiError.bad_request("body", "is empty; send a JSON object")
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise ApiError(415, f"send the body as application/json, not {content_type!r}",
                       {"body": "must be application/json"})
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}",
                       {"body": "malformed JSON"}) from None
    if not isinstance(data, dict):
        raise ApiError(400, f"the body must be a JSON object, not {_json_kind(data)}",
                       {"body": "must be a JSON object"})
    return data


def _raw_body(request: HttpRequest, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes (as declared and as read); ApiError 400."""
    too_big = ApiError(400, f"the request body is larger than {limit} bytes",
                       {"payload": f"must be at most {limit} bytes of JSON"})
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:  # Django's request.body would raise it again, as a 500
        raise ApiError.bad_request("Content-Length", "is not a number") from None
    if declared > limit:
        raise too_big
    try:
        raw = request.body
    except RequestDataTooBig:
        raise too_big from None
    if len(raw) > limit:
        raise too_big
    return raw


class Submission(NamedTuple):
    """A submitted job: ``Job.enqueue``'s type, payload and keyword options."""

    type: str
    payload: JSONValue
    options: EnqueueKeywords


def enqueue_arguments(data: JSONObject) -> Submission:
    """``Job.enqueue``'s arguments from a submitted object (delay in milliseconds)."""
    _check_names(data)
    for name, value in data.items():  # each field named by itself: payload, type, ...
        problem = _walk_problem(value, depth=2)
        if problem:
            raise ApiError.bad_request(name, problem)
    data = {name: _whole(value) if name in INTEGER_FIELDS else value
            for name, value in data.items()}
    _check_queue(data.get("queue"))
    _check_callback_url(data.get("callback_url"))
    options: dict[str, object] = {  # their types checked by the engine
        name: data[name] for name in ("priority", "queue", "max_attempts", "callback_url")
        if data.get(name) is not None}
    if data.get("delay") is not None:
        options["delay"] = _delay(data["delay"])
    return Submission(data["type"], data.get("payload"),
                      cast("EnqueueKeywords", options))


def _check_names(data: JSONObject) -> None:
    """ApiError for an unknown field, a missing type or an internal one."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ApiError(400, f"unknown field(s): {', '.join(unknown)}; allowed: {', '.join(FIELDS)}",
                       {name: "unknown field" for name in unknown})
    if "type" not in data:
        raise ApiError.bad_request("type", "is required")
    if isinstance(data["type"], str) and data["type"].startswith(RESERVED_PREFIX):
        raise ApiError.bad_request("type", f"types starting {RESERVED_PREFIX!r} are internal")


def _whole(value: JSONValue) -> JSONValue:
    """``5.0`` as ``5``: JSON Schema, and so the OpenAPI document, counts it an integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _delay(value: object) -> timedelta:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError.bad_request("delay", f"must be an integer of milliseconds, not {value!r}")
    if not 0 <= value <= MAX_DELAY_MS:
        raise ApiError.bad_request(
            "delay", f"must be from 0 to {MAX_DELAY_MS} milliseconds (ten years), not {value}"
        )
    return timedelta(milliseconds=value)


def _check_queue(value: object) -> None:
    """The engine's queue rule, matched whole (a trailing newline is not a queue name)."""
    if value is not None and not (isinstance(value, str) and matches(QUEUE, value)):
        raise ApiError.bad_request("queue", f"must match ^{QUEUE}$, not {str(value)[:120]!r}")


def _check_callback_url(value: object) -> None:
    """Null, or a URL the document's pattern for this server's callback hosts allows."""
    if value is None:
        return
    pattern = callback_url_pattern()
    if pattern is None:
        raise ApiError.bad_request("callback_url", "callbacks are off on this server "
                                   "(CALLBACK_SECRET or CALLBACK_ALLOWED_HOSTS is not set)")
    if not isinstance(value, str):
        raise ApiError.bad_request("callback_url", f"must be a string, not {_json_kind(value)}")
    if len(value) > CALLBACK_URL_MAX_LENGTH:
        raise ApiError.bad_request("callback_url",
                                   f"must be at most {CALLBACK_URL_MAX_LENGTH} characters")
    if not matches(pattern, value):
        # The engine's reason where it has one (e.g. the host), else what the pattern asks.
        why = callback_url_problem(value) or ("must be a lower-case http(s) URL of printable "
                                              "ASCII on a host in CALLBACK_ALLOWED_HOSTS")
        raise ApiError.bad_request("callback_url", why)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null"}
    return kinds.get(type(value), "a number")


def _walk_problem(value: object, depth: int = 1) -> str | None:
    """What in a value of the body (at ``depth``) cannot be stored: a NUL or a lone surrogate
    (PostgreSQL refuses both), or deep nesting."""
    stack = [(value, depth)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"is nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return problem
        elif isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)
    return None


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL (\\u0000) character"
    if not _is_utf8(text):
        return "contains a lone surrogate (\\ud800-\\udfff) that is not text"
    return None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
