"""The seam between the tables and the engine: the engine's verbs (``JobEngine``), what an
enqueue asks for (``EnqueueOptions``), what a claim asks for (``ClaimRequest``), and where the
store's verbs find the engine (``engine``).

Layers point one way (models <- engine): the engine imports the models, so the models and
their managers cannot import the engine back. ``Job.objects.claim(...)`` and the other verbs
of ``models/managers.py`` call ``engine(using)`` here instead, typed as ``JobEngine``, and the
app's ``ready()`` (``apps.py``) provides the engine once, when Django starts. Every engine
(``engine/verbs.py``, ``engine/portable.py``, ``engine/postgres/engine.py``,
``engine/mariadb/engine.py``) is a ``JobEngine``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict, runtime_checkable

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet


class EnqueueKeywords(TypedDict, total=False):
    """The keyword options of ``Job.enqueue`` and its siblings (``Unpack[EnqueueKeywords]``),
    each of its own type; ``EnqueueOptions`` holds them once given."""

    priority: str | int
    queue: str | None
    delay: timedelta | float | None
    run_at: datetime | None
    max_attempts: int | None
    callback_url: str | None
    unique_key: str | None
    unique_states: Iterable[str] | None
    unique_for: timedelta | None
    depends_on: Iterable[Job | int] | Mapping[str, Job | int] | None
    on_dependency_failure: str | None


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """What an enqueue asks for besides its type and payload: ``Job.enqueue``'s keyword options
    (``EnqueueKeywords``), as given, checked by the engine before anything is written
    (``core/validation.py``; the features' options by the features that read them). None: not
    given. ``group_id`` is set by ``enqueue_group`` (``features/groups.py``) only."""

    priority: str | int = "normal"
    queue: str | None = None
    delay: timedelta | float | None = None
    run_at: datetime | None = None
    max_attempts: int | None = None
    callback_url: str | None = None
    unique_key: str | None = None
    unique_states: Iterable[str] | None = None
    unique_for: timedelta | None = None
    depends_on: Iterable[Job | int] | Mapping[str, Job | int] | None = None
    on_dependency_failure: str | None = None
    group_id: int | None = None


PLAIN = EnqueueOptions()  # an enqueue that gives no option


class ClaimKey(NamedTuple):
    """Where a job stands in claim order (the ready indexes' order: priority descending, then
    run_at, then id)."""

    priority: int
    run_at: datetime
    id: int

    @classmethod
    def furthest(cls, jobs: Sequence[Job]) -> ClaimKey | None:
        """The key of the job of ``jobs`` that comes last in claim order (None: no job)."""
        if not jobs:
            return None
        last = max(jobs, key=lambda job: (-job.priority, job.run_at, job.pk))
        return cls(last.priority, last.run_at, last.pk)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """What a claim asks for: up to ``limit`` ready jobs for worker ``worker_id``, leased for
    ``lease_seconds``, from ``queues`` (None: every queue) but not ``exclude_queues`` (the
    paused ones), under ``lease_token`` (None: a new one). ``waiter``: on PostgreSQL, how the
    claim registers its worker as waiting (``Waiting``).

    ``after``: where the worker's last claim ended (``ClaimKey``). The claim then reads the
    ready rows of that key's priority that come after it, so that its walk of the ready index
    starts there instead of at the index's front, where the entries of the rows claimed
    before lie until vacuum removes them (which a long-open snapshot prevents). If nothing is
    found after the key, the claim reads from the front: a claim returns nothing only when
    nothing is ready. A row placed before the key (a higher priority enqueued later, a run_at
    in the past, a job handed back) is taken by the worker's next claim without ``after``,
    which the worker sends at least once per heartbeat (``worker/producer.py``)."""

    worker_id: str
    limit: int
    lease_seconds: float
    queues: Sequence[str] | None = None
    exclude_queues: Sequence[str] = ()
    lease_token: uuid.UUID | None = None
    waiter: Waiting | None = None
    after: ClaimKey | None = None


@dataclass(frozen=True)
class Waiting:
    """How a claim registers its worker as waiting for wake-ups (``engine/postgres/waiters.py``):
    ``pid``, the process id of the session that listens for them; ``room``, the jobs the worker
    could take; ``holding``: whether it holds jobs whose outcome is not written. A claim that
    takes fewer than ``room`` leaves the worker waiting under ``pid`` (its ``limit`` may be
    smaller: the jobs it was told of), idle if it then holds no job (idle waiters are woken
    first); one that takes ``room`` marks it busy."""

    pid: int
    room: int
    holding: bool = False


@runtime_checkable
class JobEngine(Protocol):
    """The verbs of one database's engine: every write to the jobs and queues tables.

    ``jobs`` arguments are querysets of ``Job`` on the engine's database (the staff's verbs
    narrow them to the rows each applies to). ``options`` of an enqueue are ``Job.enqueue``'s
    keyword options, each validated (by the features that read them, for theirs) before
    anything is written.
    """

    def enqueue(self, type: str, payload: JSONValue, options: EnqueueOptions) -> Job:
        """Validate and insert one job in the caller's transaction."""
        ...

    def enqueue_many(self, type: str, payloads: Iterable[JSONValue], options: EnqueueOptions
                     ) -> list[Job]:
        """Insert one job per payload, all with the same options, in one statement."""
        ...

    def claim(self, request: ClaimRequest) -> list[Job]:
        """Take up to ``request.limit`` ready jobs for the worker, in claim order; raises
        ``ClaimConflict`` if, on each try, rows it read as ready were claimed and finished by
        others before it could lock them (``engine/moved_claims.py``)."""
        ...

    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]:
        """Write the outcomes of attempts, fenced on each job's lease; returns those written."""
        ...

    def finish_and_claim(self, outcomes: Sequence[AttemptOutcome], request: ClaimRequest
                         ) -> tuple[list[AttemptOutcome], list[Job]]:
        """A worker's turn: ``finish`` then ``claim`` in one transaction; returns both. A
        ``ClaimConflict`` carries the outcomes written (``written``)."""
        ...

    def heartbeat(self, *, held: dict[int, uuid.UUID], lease_seconds: float
                  ) -> tuple[set[int], set[int]]:
        """Renew a worker's leases; returns the ids still held and those asked to cancel."""
        ...

    def rescue(self, *, limit: int = 100, now: datetime | None = None,
               since: datetime | None = None) -> list[Job]:
        """Record the lost attempts of jobs whose lease expired (their worker died); with
        ``since``, only if a lease ran out at or after it."""
        ...

    def release(self, jobs: Sequence[Job], delay: float = 0.0) -> int:
        """Hand held jobs back to the queue, their attempt unspent, due ``delay`` s from now."""
        ...

    def release_claim(self, lease_token: uuid.UUID) -> int:
        """Hand back the jobs still held under one claim's lease token."""
        ...

    def release_waiting(self) -> int:
        """Make pending the waiting jobs no feature holds back any more."""
        ...

    def record_progress(self, job: Job, fraction: float, message: str) -> bool:
        """Store a running job's progress, fenced on its lease."""
        ...

    def retry(self, jobs: JobQuerySet) -> int:
        """Dead, failed and canceled jobs become pending now, with at least one attempt left."""
        ...

    def retry_with_payload(self, jobs: JobQuerySet, payload: JSONValue) -> int:
        """Dead jobs get a corrected payload and are retried, in one statement."""
        ...

    def cancel(self, jobs: JobQuerySet) -> int:
        """Pending and failed jobs become canceled; processing ones get a cancel request."""
        ...

    def run_now(self, jobs: JobQuerySet) -> int:
        """Scheduled (or backing-off) jobs become due now."""
        ...

    def delete_batch(self, jobs: JobQuerySet, limit: int) -> int:
        """Delete up to ``limit`` of these jobs (oldest first) and their attempts."""
        ...

    def discard(self, jobs: JobQuerySet) -> int:
        """Delete jobs no worker holds (all but processing) with their attempts."""
        ...

    def pause(self, queue: str) -> bool:
        """Stop workers claiming from ``queue``; True if it was running."""
        ...

    def resume(self, queue: str) -> bool:
        """Let workers claim from ``queue`` again; True if it was paused."""
        ...

    def wait(self, job: Job, timeout: float | None) -> JSONValue:
        """Block until ``job`` ends: its result, or ``JobFailed``, or ``WaitTimeout``."""
        ...

    async def await_result(self, job: Job, timeout: float | None) -> JSONValue:
        """``wait`` for async code."""
        ...


_make_engine: Callable[[str], JobEngine] | None = None
_engines: dict[str, JobEngine] = {}


def provide(make_engine: Callable[[str], JobEngine]) -> None:
    """Install ``make_engine(using)``, the function that makes a database's engine."""
    global _make_engine
    _make_engine = make_engine
    _engines.clear()


def engine(using: str) -> JobEngine:
    """The engine of database ``using``, made on first use and kept: the one way every verb,
    the store's and the features', reaches it (``engine_for`` is this, typed as the engine)."""
    found = _engines.get(using)
    if found is None:
        if _make_engine is None:
            raise ImproperlyConfigured(
                "django_jobs has no engine: add 'django_jobs' to INSTALLED_APPS and call "
                "django.setup() before writing jobs"
            )
        found = _engines[using] = _make_engine(using)
    return found
