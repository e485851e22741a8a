"""How job values read in the admin: status badges, pretty JSON, errors, durations, sizes,
links to a job's page."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from django_jobs.core import clock
from django_jobs.models.schema import jobs_database

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue

EMPTY = "-"


def job_link(job_id: int | None, text: str) -> str:
    """``text`` as a link to the job's admin page ("-" for no job; plain where the Job admin is
    not registered on the site)."""
    if job_id is None:
        return EMPTY
    try:
        url = reverse("admin:django_jobs_job_change", args=[job_id])
    except NoReverseMatch:
        return text
    return format_html('<a href="{}">{}</a>', url, text)


def status_badge(status: str, label: str, *, cancel_requested: bool = False) -> SafeString:
    """A coloured pill with the status word in it (colour is never the only signal)."""
    extra = mark_safe(' <span class="dj-jobs-note">cancel requested</span>') if (
        cancel_requested
    ) else ""
    return format_html(
        '<span class="dj-jobs-status dj-jobs-status-{}">{}</span>{}', status, label, extra
    )


def progress(fraction: float | None, message: str) -> str:
    """``40% resized 2 of 5`` as the handler last recorded it; ``-`` if it recorded none."""
    if fraction is None and not message:
        return EMPTY
    percent = f"{fraction * 100:.0f}%" if fraction is not None else ""
    return " ".join(part for part in (percent, message) if part)


def pretty_json(value: JSONValue) -> SafeString | str:
    """Indented JSON in a <pre>, escaped; ``-`` for nothing."""
    if value is None:
        return EMPTY
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    return format_html('<pre class="dj-jobs-json">{}</pre>', text)


# A traceback's frame: its ``File "...", line N, in name`` line and the indented lines under it.
FRAME_RE = re.compile(r'^  File "(?P<path>[^"]*)", line \d+, in ')
# The worker's own frames (the call into the handler): folded, so the handler's come first.
WORKER_PATH_RE = re.compile(r"django_jobs[/\\]worker[/\\]")


def traceback_parts(text: str) -> list[tuple[bool, str]]:
    """``text`` (a traceback as Python prints it) as runs of lines, each marked True if it is
    a run of the worker's own frames."""
    runs: list[tuple[bool, list[str]]] = []
    worker = False
    for line in text.splitlines():
        frame = FRAME_RE.match(line)
        if frame:
            worker = bool(WORKER_PATH_RE.search(frame.group("path")))
        elif not line.startswith("    "):
            worker = False  # the header, the exception line, a chained exception's note
        if runs and runs[-1][0] == worker:
            runs[-1][1].append(line)
        else:
            runs.append((worker, [line]))
    return [(worker, "\n".join(lines)) for worker, lines in runs]


def folded_traceback(text: str) -> SafeString:
    """The traceback in a <pre>, each run of the worker's own frames folded in a <details>
    (a block: no line break is written next to one)."""
    pieces: list[SafeString] = []
    for worker, chunk in traceback_parts(text):  # runs alternate: worker, handler, worker...
        if worker:
            frames = sum(1 for line in chunk.splitlines() if FRAME_RE.match(line))
            pieces.append(format_html(
                '<details class="dj-jobs-worker-frames"><summary>{} frame{} of the worker '
                "(django_jobs.worker)</summary>{}</details>",
                frames, "" if frames == 1 else "s", chunk))
        else:
            pieces.append(format_html("{}", chunk))
    return format_html('<pre class="dj-jobs-traceback">{}</pre>',
                       format_html_join("", "{}", ((p,) for p in pieces)))


def error_block(error: JSONValue) -> SafeString | str:
    """The error's type and message, its traceback (the worker's frames folded) and its
    details."""
    if not error:
        return EMPTY
    if not isinstance(error, dict):
        return pretty_json(error)
    parts = [
        format_html(
            '<p class="dj-jobs-error-head"><strong>{}</strong>: {}</p>',
            error.get("type") or "Error", error.get("message") or "",
        )
    ]
    if error.get("traceback"):
        parts.append(folded_traceback(str(error["traceback"])))
    if error.get("details"):
        parts.append(format_html("<p>Details:</p>{}", pretty_json(error["details"])))
    return format_html_join("", "{}", ((p,) for p in parts))


def error_summary(error: JSONValue, *, limit: int = 120) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters."""
    if not error:
        return ""
    if not isinstance(error, dict):
        return str(error)[:limit]
    text = f"{error.get('type') or 'Error'}: {error.get('message') or ''}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_line(type_: str | None, message: str | None, *, limit: int = 90) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters: a list's error cell."""
    if not type_ and not message:
        return EMPTY
    first = (message or "").strip().split("\n", 1)[0]
    text = f"{type_ or 'Error'}: {first}" if first else (type_ or "Error")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration(value: timedelta | None) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s`` or ``2 h 03 min``."""
    if value is None:
        return EMPTY
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def duration_words(value: timedelta) -> str:
    """A schedule's interval as people say it: ``5 s``, ``10 min``, ``1 h 30 min``, ``1 day``."""
    seconds = value.total_seconds()
    if seconds != int(seconds):
        return f"{seconds:g} s"
    rest, parts = int(seconds), []
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''}")
    return " ".join(parts) or "0 s"


def size(num_bytes: int | None) -> str:
    """Bytes as KiB/MiB/GiB."""
    if num_bytes is None:
        return EMPTY
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return EMPTY  # pragma: no cover


def local(value: datetime) -> datetime:
    """``value`` in the current time zone. A naive value (``USE_TZ = False``) is a time in
    ``TIME_ZONE``, as Django reads and writes them."""
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    return timezone.localtime(value)


def when(value: datetime | None, *, precise: bool = False) -> str:
    """A local timestamp with its zone, the one date format of every page of the app's admin:
    ``2026-11-30 09:41:07 UTC``, or ``2026-11-30 09:41:07.250 UTC`` precise."""
    if value is None:
        return EMPTY
    local_value = local(value)
    if precise:
        return local_value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + local_value.strftime(" %Z")
    return local_value.strftime("%Y-%m-%d %H:%M:%S %Z")


def when_column(field: str, description: str) -> Callable[[object], str]:
    """A list column or read-only field showing the datetime ``field`` as ``when`` does
    (Django's own would read "Dec. 7, 2026, 9:56 a.m."), ordered by that field."""
    from django.contrib import admin

    def column(obj: object) -> str:
        return when(getattr(obj, field))

    column.__name__ = column.__qualname__ = f"{field}_shown"
    return admin.display(description=description, ordering=field)(column)


def age(value: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``value`` was, as a duration, by the jobs database's clock (the times it
    is given were written by that clock, so a web host whose clock is off shows true ages)."""
    if value is None:
        return EMPTY
    return duration(max((now or clock.now(jobs_database())) - value, timedelta(0)))
