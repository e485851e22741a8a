"""What one attempt came to, as handed from the executor to the write path."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue
    from django_jobs.models import Job

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)


def now_us() -> int:
    """Now, in whole microseconds since the epoch."""
    return time.time_ns() // 1000


def micros(moment: datetime | int) -> int:
    """A time as whole microseconds since the epoch; a naive datetime is read in the default
    time zone, as Django reads one under ``USE_TZ = False``. An int is taken as it is."""
    if isinstance(moment, int):
        return moment
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return (moment - EPOCH) // ONE_MICROSECOND


def moment(us: int) -> datetime:
    """Back from microseconds: what ``timezone.now()`` would have said at that time (aware in
    UTC under ``USE_TZ``, naive in the default time zone otherwise)."""
    aware = EPOCH + timedelta(microseconds=us)
    return aware if settings.USE_TZ else timezone.make_naive(aware)


def stored(when: datetime) -> datetime:
    """An aware time as a datetime field holds it: unchanged under ``USE_TZ``, naive in the
    default time zone otherwise (SQLite and MariaDB refuse an aware value then). A time beyond
    what Python holds in that zone is clamped to the first or last one it does."""
    if settings.USE_TZ or timezone.is_naive(when):
        return when
    try:
        return timezone.make_naive(when)
    except OverflowError:
        return datetime.min if when.year < 5000 else datetime.max


class AttemptOutcome:
    """The result of running one claimed job once.

    ``kind`` is ``completed``, ``failed``, ``canceled`` or ``snoozed``; for ``failed``,
    ``permanent`` says the error is not worth retrying. The retry decision is taken in the write
    path. ``error`` is what is stored of the failure; ``exception`` the exception itself, kept
    in memory for the worker's log line (an error tracker reads its traceback there).

    The start and end are kept as whole microseconds since the epoch (``started``,
    ``finished``) and the CPU time as nanoseconds (``cpu_ns``): a slot thread reads them from
    the clock as integers, and the write path sends them as integers, where datetimes and
    floats cost more to make and to encode than a no-op job costs to run. ``started_at``,
    ``finished_at`` and ``cpu_time`` give them as datetimes and seconds; the constructor takes
    datetimes or microseconds.
    """

    __slots__ = (
        "cpu_ns",
        "error",
        "exception",
        "finished",
        "job",
        "kind",
        "peak_memory",
        "permanent",
        "result",
        "snooze_seconds",
        "started",
        "trace_context",
    )

    def __init__(
        self,
        job: Job,
        kind: str,
        started_at: datetime | int,
        finished_at: datetime | int,
        result: JSONValue = None,
        error: JSONObject | None = None,
        permanent: bool = False,
        cpu_time: float | None = None,
        peak_memory: int | None = None,
        snooze_seconds: float | None = None,  # kind "snoozed": run again after this
        exception: BaseException | None = None,
    ) -> None:
        self.job = job
        self.kind = kind
        # a slot thread's times are ints already: no call for them
        self.started = started_at if started_at.__class__ is int else micros(started_at)
        self.finished = finished_at if finished_at.__class__ is int else micros(finished_at)
        self.result = result
        self.error = error
        self.permanent = permanent
        self.cpu_ns = None if cpu_time is None else round(cpu_time * 1e9)
        self.peak_memory = peak_memory
        self.snooze_seconds = snooze_seconds
        # What the handler raised (or the database, for a refused outcome), with its
        # traceback, for the log line of a job it ends; never written to the database.
        self.exception = exception
        # The attempt span's context (worker/tracing.py), for what the finish enqueues
        # (callbacks) to continue its trace; None when the attempt was not traced.
        self.trace_context: str | None = None

    @property
    def started_at(self) -> datetime:
        return moment(self.started)

    @property
    def finished_at(self) -> datetime:
        return moment(self.finished)

    @finished_at.setter
    def finished_at(self, value: datetime | int) -> None:
        self.finished = micros(value)

    @property
    def cpu_time(self) -> float | None:
        """Seconds of CPU the attempt's thread spent, or None if not measured."""
        return None if self.cpu_ns is None else self.cpu_ns / 1e9

    @property
    def duration_ms(self) -> float:
        return (self.finished - self.started) / 1000

    def __repr__(self) -> str:
        return (f"<AttemptOutcome {self.kind} job={getattr(self.job, 'id', None)} "
                f"started_at={self.started_at.isoformat()} "
                f"duration_ms={self.duration_ms:.3f}>")
