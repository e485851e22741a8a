"""What the engine's writes put in the rows, shared by both implementations: the claim's
fields, a transition's ``update()`` values, an attempt row, a retry's fields, and which
outcomes a fenced write let through."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, TypedDict

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Case, F
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Greatest

from django_jobs.core.database_parts import parts
from django_jobs.core.retry import Backoff, as_backoff
from django_jobs.core.shelves import OPEN_SHELF, clamp
from django_jobs.core.states import COMPLETED, FAILED, PENDING, PROCESSING
from django_jobs.engine import transition
from django_jobs.engine.transition import Apply, Transition, apply
from django_jobs.engine.unique_column import keep_key_if
from django_jobs.handlers.registry import get_handler

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import JobAttempt


class ClaimValues(TypedDict):
    """What a claim writes that is known before it runs (``claim_values``)."""

    status: str
    lease_token: uuid.UUID
    worker_id: str
    leased_until: datetime
    started_at: datetime
    updated_at: datetime


class ClaimFields(ClaimValues):
    """A claim's ORM ``update()`` values (``claim_fields``): its values, the attempt counted
    and the unique key kept where it guards processing."""

    attempt: CombinedExpression
    unique_key: Case


# The keyword arguments of an ORM ``update()``: plain values and expressions (F, Greatest).
UpdateFields = dict[str, object]


def backoff(type: str) -> Backoff:
    """The retry policy of jobs of ``type``: its handler's, or the settings'."""
    found = get_handler(type)
    return found.get_backoff() if found else as_backoff(None)


def transition_of(outcome: AttemptOutcome, now: datetime, extra_attempts: int = 0) -> Transition:
    """What ``outcome`` does to its job (``engine/transition.py``); reads, changes nothing."""
    policy = backoff(outcome.job.type) if outcome.kind == FAILED else None
    change = transition.of(outcome, now, policy, extra_attempts)
    shelf = change.fields.get("shelf")
    if isinstance(shelf, date):  # no partition for its day yet: the kept shelf
        using = outcome.job._state.db or DEFAULT_DB_ALIAS
        change.fields["shelf"] = clamp(shelf, parts(using).partitions.last_day)
    return change


def update_fields(change: Transition) -> UpdateFields:
    """The ORM ``update()`` values of a transition: its fields, and the unique key kept only if
    it guards the new state (a job without a key keeps none, and needs no expression)."""
    key = keep_key_if(change.status) if change.keeps_key_check else None
    return {**change.fields, "unique_key": key}


def claim_values(
    worker_id: str, now: datetime, lease_seconds: float, token: uuid.UUID | None = None
) -> ClaimValues:
    """What a claim writes that is known before it runs (plain values, no expression)."""
    return {
        "status": PROCESSING, "lease_token": token or uuid.uuid4(), "worker_id": worker_id,
        "leased_until": now + timedelta(seconds=lease_seconds),
        "started_at": now, "updated_at": now,
    }


def claim_fields(values: ClaimValues) -> ClaimFields:
    """A claim's ORM ``update()`` values: ``claim_values`` with the attempt counted and the
    unique key kept if it guards processing."""
    return {**values, "attempt": F("attempt") + 1, "unique_key": keep_key_if(PROCESSING)}


def retry_fields(now: datetime) -> UpdateFields:
    """A person's retry: pending now, at least one attempt left, crashes counted afresh, open
    again (``core/shelves.py``)."""
    return {
        "status": PENDING, "run_at": now, "updated_at": now, "finished_at": None,
        "shelf": OPEN_SHELF,
        "cancel_requested": False, "max_attempts": Greatest(F("max_attempts"), F("attempt") + 1),
        "crashes": 0,
    }


def attempt_row(outcome: AttemptOutcome) -> JobAttempt:
    """The attempt row of a written outcome, on its job's new shelf."""
    from django_jobs.models import JobAttempt

    job = outcome.job
    return JobAttempt(
        job=job, number=job.attempt, worker_id=job.worker_id,
        started_at=outcome.started_at, finished_at=outcome.finished_at, outcome=outcome.kind,
        error=outcome.error, cpu_time=outcome.cpu_time, peak_memory=outcome.peak_memory,
        shelf=job.shelf,
    )


def split_plain_completions(
    outcomes: Sequence[AttemptOutcome],
) -> tuple[dict[uuid.UUID | None, list[AttemptOutcome]], list[AttemptOutcome]]:
    """Completions without a result, by lease token (one UPDATE each), and the others."""
    plain: dict[uuid.UUID | None, list[AttemptOutcome]] = defaultdict(list)
    other: list[AttemptOutcome] = []
    for outcome in outcomes:
        if outcome.kind == COMPLETED and outcome.result is None:
            plain[outcome.job.lease_token].append(outcome)
        else:
            other.append(outcome)
    return plain, other


def written(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], mine: set[int],
    applying: Apply = apply,
) -> list[AttemptOutcome]:
    """The outcomes whose jobs a statement wrote (``mine``), their transitions applied."""
    done = []
    for outcome, change in zip(outcomes, changes, strict=True):
        if outcome.job.id in mine:
            applying(outcome, change)
            done.append(outcome)
    return done
