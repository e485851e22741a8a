"""The structured error stored on a job and its attempts, always in a form the database stores.

PostgreSQL refuses a NUL character in text and JSON, and neither database takes a lone UTF-16
surrogate (``"\\ud800"``) in UTF-8; Python strings can hold both, and exception messages,
tracebacks and ``details`` come from handler code. Every error the queue writes is built here, so
those characters are replaced by visible escapes (``\\x00``, ``\\ud800``) before any write, each
text field is capped at ``ERROR_TEXT_LIMIT`` characters, and ``details`` becomes plain JSON.
"""

from __future__ import annotations

import json
import math
import traceback as tb
from typing import TYPE_CHECKING

from django.core.serializers.json import DjangoJSONEncoder

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue

# The longest type, message or traceback an error keeps, in characters: an exception message of
# hundreds of megabytes must not become a row the database refuses or a page the admin chokes on.
ERROR_TEXT_LIMIT = 65_536
# How deep ``details`` may nest before the rest is written as its repr (a structure that holds
# itself would otherwise never end). MariaDB's JSON check refuses a document nested 32 levels
# or more, and the error object and ``details`` itself are two levels: 30 keeps every error
# within 31.
DETAILS_DEPTH_LIMIT = 30
# The most JSON text ``details`` may take.
DETAILS_LIMIT = 4 * ERROR_TEXT_LIMIT
_ENCODER = DjangoJSONEncoder()


def storable_text(text: str, limit: int | None = None) -> str:
    """``text`` with each NUL written as ``\\x00`` and each lone surrogate as ``\\udXXX``,
    cut to ``limit`` characters (with a note saying how much was cut)."""
    if not isinstance(text, str):
        text = _safe_str(text)
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} more characters cut]"
    return text


def storable(value: object, depth: int = 0) -> JSONValue:
    """``value`` as plain JSON the database stores: storable strings (keys too), lists for
    tuples and sets, finite numbers, what Django's JSON encoder knows (dates, decimals, UUIDs)
    as its strings, and anything else as its repr."""
    if _plain(value):
        return value
    if isinstance(value, str):
        return storable_text(value, ERROR_TEXT_LIMIT)
    if depth >= DETAILS_DEPTH_LIMIT:
        return storable_text(_safe_repr(value), ERROR_TEXT_LIMIT)
    if isinstance(value, dict):
        return {storable_text(_key(k)): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [storable(item, depth + 1) for item in value]
    return _storable_other(value, depth)


def _plain(value: object) -> bool:
    """Whether ``value`` is stored as it is: None, a bool or a plain int."""
    return value is None or value is True or value is False or type(value) is int


def _storable_other(value: object, depth: int) -> JSONValue:
    """A number, or what Django's JSON encoder turns into JSON, or else its repr."""
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, int):  # bool and int subclasses: as plain int
        return int(value)
    try:
        return storable(_ENCODER.default(value), depth + 1)
    except Exception:
        return storable_text(_safe_repr(value), ERROR_TEXT_LIMIT)


def error_dict(
    exc: BaseException | None = None, *, type: str = "", message: str = "", traceback: str = "",
    details: object = None,
) -> JSONObject:
    """The structured error stored on a job and its attempts.

    ``class_path`` (the exception's dotted path) is there when the error came from an exception;
    the tasks backend turns it into ``TaskError.exception_class_path``. Every part is storable
    (see the module's docstring), whatever the exception's ``str``, traceback or ``details``
    hold, and even if they raise.
    """
    class_path = ""
    if exc is not None:
        type = type or exc.__class__.__name__
        message = message or _safe_str(exc)
        traceback = traceback or _safe_traceback(exc)
        if details is None:
            try:
                details = getattr(exc, "details", None)
            except Exception:
                details = None
        class_path = f"{exc.__class__.__module__}.{exc.__class__.__qualname__}"
    error = {
        "type": storable_text(type, 200),
        "message": storable_text(message, ERROR_TEXT_LIMIT),
        "traceback": storable_text(traceback, ERROR_TEXT_LIMIT),
        "details": _storable_details(details) if details else {},
    }
    if class_path:
        error["class_path"] = storable_text(class_path, 500)
    return error


def _storable_details(details: object) -> JSONValue:
    """``storable(details)``, at most ``DETAILS_LIMIT`` characters of JSON: larger details are
    kept as the start of their JSON text, under ``"truncated"``."""
    try:
        value = storable(details)
        text = json.dumps(value)
    except Exception:  # a mapping or sequence whose own methods raise
        return {"unreadable": storable_text(_safe_repr(details), ERROR_TEXT_LIMIT)}
    if len(text) > DETAILS_LIMIT:
        return {"truncated": storable_text(text, DETAILS_LIMIT)}
    return value


def _key(key: object) -> str:
    """A JSON object's key as json.dumps writes it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, int | float):
        return repr(key) if isinstance(key, float) else str(int(key))
    return _safe_repr(key)


def _safe_str(value: object) -> str:
    try:
        text = str(value)
        return text if isinstance(text, str) else _safe_repr(value)
    except Exception:
        return f"<{value.__class__.__name__}: its str() raised>"


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
        return text if isinstance(text, str) else object.__repr__(value)
    except Exception:
        return object.__repr__(value)


def _safe_traceback(exc: BaseException) -> str:
    try:
        return "".join(tb.format_exception(exc))
    except Exception:
        return f"{exc.__class__.__name__} (its traceback could not be formatted)"
