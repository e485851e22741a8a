"""What a job's payload and result may hold: one rule, checked before anything is written.

A value is storable if ``json.dumps`` accepts it with ``allow_nan=False`` (no NaN or infinity,
no datetimes, sets or other objects), no string or key in it holds what PostgreSQL cannot
store: a NUL character (``\\u0000``) or a lone surrogate (``\\ud800``-``\\udfff``, half of a
UTF-16 pair), and its arrays and objects nest at most MAX_NESTING levels (MariaDB's JSON check
refuses deeper ones). SQLite would keep all of these, PostgreSQL the deep ones, but the rule is
the same on every database, so a job means the same wherever it is written. See
docs/explanation-guarantees.md, "What a payload can hold".

The check is one ``json.dumps`` in C and a few scans of its text; the value is walked in
Python only to say where a NUL or a surrogate is, once one was found, or to measure its
nesting when the text holds more brackets than MAX_NESTING.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeAlias

from django_jobs.core.settings import jobs_settings
from django_jobs.exceptions import InvalidResult

# A JSON document as a job holds it (payload, result, error): a dict, list, str, number, bool or
# None, checked when written (``storable_json``). Not a recursive union: dict and list are
# invariant, so a union would refuse a caller's ``dict[str, int]``.
JSONValue: TypeAlias = Any
# A JSON object: a job's error, an API body, a result that is an object.
JSONObject: TypeAlias = dict[str, JSONValue]
# How deep arrays and objects may nest: MariaDB's JSON check takes 31 levels and refuses 32.
MAX_NESTING = 31
# How much of a key or of a path an error message quotes.
QUOTED_KEY = 40
QUOTED_PATH = 200


# json.dumps(value, allow_nan=False, ensure_ascii=False) without building an encoder per call
# (that was a third of the check's time on a small payload). Its state is per call: thread-safe.
_encode = json.JSONEncoder(allow_nan=False, ensure_ascii=False).encode


class NotStorable(ValueError):
    """A value a job cannot hold as JSON; the message says what and where (no field name)."""


def storable_json(value: object, max_bytes: int | None = None, limit_name: str = "") -> str:
    """``value``'s JSON text if a job may hold it; NotStorable saying why otherwise.

    ``max_bytes`` bounds the size of that text in UTF-8 (None: no bound); ``limit_name`` is
    the setting that sets it, for the message."""
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotStorable(f"is not JSON: {exc}") from None
    size = _utf8_size(text, value)
    _refuse_nul(text, value)
    _refuse_deep(text, value)
    if max_bytes is not None and size > max_bytes:
        raise NotStorable(f"is {size} bytes of JSON, more than {limit_name or 'the limit'} "
                          f"({max_bytes} bytes)")
    return text


def _utf8_size(text: str, value: object) -> int:
    """The size of ``value``'s JSON ``text`` in UTF-8; NotStorable if it holds a lone
    surrogate, which UTF-8 cannot encode."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise NotStorable(
            "holds a lone surrogate (\\ud800-\\udfff, half of a UTF-16 pair)"
            f"{_locate(value, _has_surrogate) or ''}: the database cannot store it"
        ) from None


def _refuse_nul(text: str, value: object) -> None:
    # A NUL is written as \u0000 (so is a backslash followed by "u0000", hence the walk).
    if "\\u0000" in text:
        where = _locate(value, _has_nul)
        if where is not None:
            raise NotStorable(f"holds a NUL character (\\u0000){where}: "
                              "the database cannot store it")


def _refuse_deep(text: str, value: object) -> None:
    if text.count("[") + text.count("{") > MAX_NESTING:  # each level opens one at least
        depth = nesting(value)
        if depth > MAX_NESTING:
            raise NotStorable(f"nests arrays and objects {depth} levels deep, more than "
                              f"{MAX_NESTING}: the database cannot store it")


def nesting(value: object) -> int:
    """How many levels of arrays and objects ``value`` nests (0 for a scalar)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((part, depth + 1) for part in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((part, depth + 1) for part in item)
        else:
            continue
        deepest = max(deepest, depth + 1)
    return deepest


def _has_nul(text: str) -> bool:
    return "\x00" in text


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _locate(value: object, bad: Callable[[str], bool]) -> str | None:
    """Where in ``value`` a string or key that is ``bad`` is, as words for a message ("" if
    ``value`` is that string), or None if there is none."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if bad(item):
                return _at(path)
        elif isinstance(item, dict):
            in_key = _bad_key(item, path, bad)
            if in_key is not None:
                return in_key
            stack.extend((part, f"{path}[{_key(key)}]") for key, part in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((part, f"{path}[{index}]") for index, part in enumerate(item))
    return None


def _bad_key(item: dict[object, object], path: str, bad: Callable[[str], bool]) -> str | None:
    """Words for the first key of ``item`` that is ``bad``, or None."""
    for key in item:
        if isinstance(key, str) and bad(key):
            quoted = repr(key[:QUOTED_KEY]) + ("..." if len(key) > QUOTED_KEY else "")
            return f" in the key {quoted}" + _at(path)
    return None


def _at(path: str) -> str:
    return f" at {_shown(path)}" if path else ""


def _key(key: object) -> str:
    if isinstance(key, str) and len(key) > QUOTED_KEY:
        return repr(key[:QUOTED_KEY]) + "..."
    return repr(key)


def _shown(path: str) -> str:
    return path if len(path) <= QUOTED_PATH else "..." + path[-QUOTED_PATH:]


def stored_result(result: Any) -> Any:
    """The result as it will read back from the database: plain JSON types.

    A result follows the payload's rule (``jsonvalues``) within MAX_RESULT_BYTES; anything else
    raises InvalidResult, which fails the attempt for good (the job goes dead)."""
    if result is None or result is True or result is False:
        return result
    try:
        text = storable_json(result, jobs_settings.MAX_RESULT_BYTES, "MAX_RESULT_BYTES")
    except NotStorable as exc:
        raise InvalidResult(f"the handler's result {exc}") from None
    if result.__class__ is str or result.__class__ is int:
        return result
    return json.loads(text)
