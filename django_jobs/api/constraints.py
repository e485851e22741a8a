"""What the API accepts in paths, query strings and bodies, in one place.

The views check input against these and the OpenAPI document publishes the same patterns and
bounds, so a request the document calls valid is accepted and one it calls invalid is a 400 (or a
404 for a path id). Patterns are written in the subset that Python's ``re`` and ECMA-262 (JSON
Schema) read alike: ASCII classes only, no ``\\d`` or ``\\s`` (they match other digits and spaces
in Python), and checked with ``fullmatch`` (``$`` lets a trailing newline through in Python).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from django_jobs.core.settings import jobs_settings
from django_jobs.core.validation import QUEUE_RE
from django_jobs.models import Job

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue

JOB_ID = r"j-[0-9a-f]{20}"
STATUS_NAME = "(" + "|".join(Job.Status.values) + ")"
STATUS_LIST = f"{STATUS_NAME}(,{STATUS_NAME})*"
QUEUE = QUEUE_RE.pattern.removeprefix("^").removesuffix("$")
LIMIT_DIGITS = 9  # more digits than any page size; longer strings are refused before int()
# A window: a positive whole number of seconds, or of s/m/h/d; longer ones count as MAX_WINDOW.
WINDOW = r"0*[1-9][0-9]*[smhd]?"
WINDOW_MAX_LENGTH = 20
MAX_WINDOW = timedelta(days=3650)
# A cursor: direction (o: older, n: newer), created_at in microseconds since the Unix epoch, a
# dot and the job's primary key. Any such position is a valid place to page from.
CURSOR = r"[on]-?[0-9]{1,19}\.[0-9]{1,19}"
IDEMPOTENCY_KEY = r"[!-~]{1,255}"  # printable ASCII, no spaces
# delay: at most ten years in milliseconds, so that now + delay is always a date Python can hold.
MAX_DELAY_MS = 3650 * 86400 * 1000
CALLBACK_URL_MAX_LENGTH = 2000
EARLIEST, LATEST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)

_LABEL = r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?"  # short enough for 253-character names
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_ANY_HOST = rf"(({_LABEL}\.){{1,4}}[a-z]{{2,63}}|localhost|{_OCTET}(\.{_OCTET}){{3}})"


def matches(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text, re.ASCII) is not None


def anchored(pattern: str) -> str:
    """The pattern as the OpenAPI document states it (JSON Schema patterns are unanchored)."""
    return f"^{pattern}$"


def callback_url_pattern() -> str | None:
    """URLs a ``callback_url`` may name under the current settings; None when callbacks are off.

    Built from ``CALLBACK_ALLOWED_HOSTS``: an http(s) URL in lower case on an allowed host, an
    optional port, then a path, query or fragment of printable ASCII.
    """
    if not jobs_settings.CALLBACK_SECRET:
        return None
    hosts = [pattern for host in jobs_settings.CALLBACK_ALLOWED_HOSTS
             if (pattern := _host_pattern(str(host).lower()))]
    if not hosts:
        return None
    return rf"https?://({'|'.join(hosts)})(:[0-9]{{1,5}})?([/?#][!-~]*)?"


def _host_pattern(allowed: str) -> str | None:
    if allowed == "*":
        return _ANY_HOST
    if allowed.startswith("."):
        return rf"({_LABEL}\.){{0,3}}{_literal(allowed[1:])}"
    try:  # a host Django's URL validator would refuse can never be called
        URLValidator(schemes=["http"])(f"http://{allowed}/")
    except ValidationError:
        return None
    return _literal(allowed)


def _literal(host: str) -> str:
    """``host`` as a pattern; escapes written alike in Python and ECMA-262."""
    return re.sub(r"([.\[\]])", r"\\\1", host)


def window_seconds(text: str) -> int | None:
    """Seconds of a ``window`` value (capped at MAX_WINDOW), or None if it is not one."""
    if len(text) > WINDOW_MAX_LENGTH or not matches(WINDOW, text):
        return None
    unit = text[-1] if text[-1] in "smhd" else "s"
    number = int(text.rstrip("smhd"))
    seconds = number * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return min(seconds, int(MAX_WINDOW.total_seconds()))


def page_size(text: str, most: int) -> int | None:
    """The ``limit`` as an int from 1 to ``most``, or None."""
    if len(text) > LIMIT_DIGITS or not matches("[0-9]+", text):
        return None
    value = int(text)
    return value if 1 <= value <= most else None


def schema_of(pattern: str, **extra: JSONValue) -> JSONObject:
    return {"type": "string", "pattern": anchored(pattern), **extra}


# RFC 3339 date-time, as JSON Schema's "date-time" format means it (T and Z in either case).
DATE_TIME = (r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})"
             r"(\.[0-9]+)?([Zz]|([+-])([0-9]{2}):([0-9]{2}))")


def instant(text: str) -> datetime | None:
    """The UTC instant of an RFC 3339 date-time, or None if ``text`` is not one.

    Years 0000 and 9999 with an offset can fall outside what Python holds; they are clamped to
    the first or last instant it does, which no job's timestamp is beyond. A leap second reads
    as the last microsecond of its minute.
    """
    found = re.fullmatch(DATE_TIME, text, re.ASCII)
    if found is None:
        return None
    fields = [int(found[n]) for n in range(1, 7)] + [int(found[10] or 0), int(found[11] or 0)]
    if not _in_range(*fields):
        return None
    year, month, day, hour, minute, second, offset_hours, offset_minutes = fields
    second, micros = _second(second, found[7])
    offset = timedelta(hours=offset_hours, minutes=offset_minutes)
    if found[9] == "-":
        offset = -offset
    if year == 0:
        return EARLIEST
    return _utc((year, month, day, hour, minute, second, micros), offset)


def _in_range(year: int, month: int, day: int, hour: int, minute: int, second: int,
              offset_hours: int, offset_minutes: int) -> bool:
    """Whether each field of a date-time is within its range (a second may be a leap one)."""
    return (1 <= month <= 12 and 1 <= day <= _days_in(year, month) and hour <= 23
            and minute <= 59 and second <= 60 and offset_hours <= 23 and offset_minutes <= 59)


def _days_in(year: int, month: int) -> int:
    """The days of a month, of the proleptic Gregorian calendar (year 0000 is a leap year)."""
    leap_year = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return [31, 29 if leap_year else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def _second(second: int, fraction: str | None) -> tuple[int, int]:
    """The second and its microseconds; a leap second as the last microsecond of its minute."""
    micros = int((fraction or ".0")[1:7].ljust(6, "0"))
    if second == 60:
        return 59, 999999
    return second, micros


def _utc(parts: tuple[int, int, int, int, int, int, int], offset: timedelta) -> datetime:
    """The UTC instant of a date-time at ``offset``, clamped to what Python holds."""
    try:
        return datetime(*parts, tzinfo=UTC) - offset
    except OverflowError:
        return EARLIEST if parts[0] < 5000 else LATEST
