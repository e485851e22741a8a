"""What an attempt's outcome does to its job: a pure function of the job's counters, the
outcome and the retry policy (and, for a job it finishes, the ``RETENTION`` setting, which
decides its shelf: ``core/shelves.py``), with no query and no change to the job or the outcome.

The write path (``engine/verbs.py``, ``engine/postgres/statements.py``) writes ``Transition.fields``
fenced on the job's lease; only for the rows that write changed does it set the fields on the
``Job`` instance and ``Transition.outcome`` as the outcome's kind (``apply``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django_jobs.core.retry import Backoff, decide
from django_jobs.core.shelves import prune_day
from django_jobs.core.states import JobStatus, Outcome

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject, JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job


@dataclass(frozen=True, slots=True)
class Transition:
    """The job's new state and the plain column values that go with it.

    ``outcome`` is what the attempt came to (its row's ``outcome``): the kind handed in, but
    ``dead`` for a failure that ends the job. ``keeps_key_check`` says the job holds a unique
    key, which the write keeps only if the key guards ``status`` (``unique.keep_key_if``);
    a job without one needs no expression."""

    status: str
    outcome: str
    fields: dict[str, Any]  # column values of several types, read back by name (run_at: a time)
    keeps_key_check: bool


def transition(
    *,
    attempt: int,
    max_attempts: int,
    has_unique_key: bool,
    kind: str,
    permanent: bool = False,
    error: JSONObject | None = None,
    result: JSONValue = None,
    snooze_seconds: float | None = None,
    backoff: Backoff | None = None,
    now: datetime,
) -> Transition:
    """The transition of a processing job at ``attempt`` whose attempt ended as ``kind``
    (completed, failed, canceled or snoozed). ``backoff`` is needed for a failure that may be
    retried (ValueError without one)."""
    common: dict[str, Any] = {"updated_at": now, "leased_until": None}
    # A job this ends keeps no cancel request: one that came while the attempt ran (and that
    # the handler finished before it was read) has nothing left to stop. A job that runs
    # again keeps it, and its next attempt is stopped.
    ended = {**common, "finished_at": now, "cancel_requested": False}
    if kind == Outcome.COMPLETED:
        status, outcome = JobStatus.COMPLETED, Outcome.COMPLETED
        fields = {**ended, "status": status, "result": result, "error": None,
                  "shelf": prune_day(status, now)}
    elif kind == Outcome.CANCELED:
        status, outcome = JobStatus.CANCELED, Outcome.CANCELED
        fields = {**ended, "status": status, "error": error, "shelf": prune_day(status, now)}
    elif kind == Outcome.SNOOZED:  # pending again later; the attempt is given back
        status, outcome = JobStatus.PENDING, Outcome.SNOOZED
        fields = {**common, "status": status, "attempt": attempt - 1, "started_at": None,
                  "run_at": now + timedelta(seconds=snooze_seconds or 0)}
        if error is not None:  # why it waits (a type this worker does not know)
            fields["error"] = error
    elif kind == Outcome.FAILED:
        if backoff is None and not (permanent or attempt >= max_attempts):
            raise ValueError("a failure that may be retried needs a backoff")
        decision = decide(attempt=attempt, max_attempts=max_attempts, permanent=permanent,
                          backoff=backoff, now=now)  # type: ignore[arg-type]
        if decision.dead:
            status, outcome = JobStatus.DEAD, Outcome.DEAD
            fields = {**ended, "status": status, "error": error,
                      "shelf": prune_day(status, now)}
        else:
            status, outcome = JobStatus.FAILED, Outcome.FAILED
            fields = {**common, "status": status, "error": error, "run_at": decision.retry_at}
    else:
        raise ValueError(f"not an attempt's outcome: {kind!r}")
    return Transition(status, outcome, fields, has_unique_key)


def of(
    outcome: AttemptOutcome, now: datetime, backoff: Backoff | None = None,
    extra_attempts: int = 0,
) -> Transition:
    """The transition of ``outcome``'s job (reads them, changes neither). ``extra_attempts``
    are added to the job's ``max_attempts`` before the decision: the attempts the same write
    gives the job (a lost attempt that does not count gives one)."""
    job = outcome.job
    return transition(
        attempt=job.attempt, max_attempts=job.max_attempts + extra_attempts,
        has_unique_key=job.unique_key is not None, kind=outcome.kind,
        permanent=outcome.permanent, error=outcome.error, result=outcome.result,
        snooze_seconds=outcome.snooze_seconds, backoff=backoff, now=now,
    )


def apply(outcome: AttemptOutcome, change: Transition) -> None:
    """After the fenced write changed its row: the job instance holds what the row holds
    (the unique key aside, which the database decides), the outcome says what it came to.
    None of these fields is a descriptor that setattr would run, so they go straight into
    the instance's ``__dict__``."""
    job: Job = outcome.job
    job.__dict__.update(change.fields)
    outcome.kind = change.outcome



Apply = Callable[["AttemptOutcome", Transition], None]


# The outcomes applied in the outermost ``undone_on_error`` block running, to put back
_undo: ContextVar[list[tuple[AttemptOutcome, str, dict[str, Any]]] | None] = ContextVar(
    "django_jobs_undo", default=None)


@contextmanager
def undone_on_error() -> Iterator[Apply]:
    """An ``apply`` for a write that runs in a transaction with more statements after it: if
    anything in the block raises (the transaction then rolls back), each outcome and job it
    applied to is put back as it was, so that writing them again starts from the same place.
    Inside another such block (a finish inside a worker's turn) it applies for the outer one,
    which puts back all it applied if anything in it raises, after this block too."""
    outer = _undo.get()
    undo: list[tuple[AttemptOutcome, str, dict[str, Any]]] = [] if outer is None else outer

    def applying(outcome: AttemptOutcome, change: Transition) -> None:
        held = outcome.job.__dict__
        undo.append((outcome, outcome.kind, {name: held[name] for name in change.fields
                                             if name in held}))
        apply(outcome, change)

    if outer is not None:
        yield applying
        return
    token = _undo.set(undo)
    try:
        yield applying
    except BaseException:
        for outcome, kind, values in reversed(undo):
            outcome.job.__dict__.update(values)
            outcome.kind = kind
        raise
    finally:
        _undo.reset(token)
