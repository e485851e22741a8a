"""Unique jobs: at most one job per key among the states the caller names, held by the database.

A job with a key stores it in ``Job.unique_key``, a nullable column with a unique constraint.
The stored key starts with the states it guards (``engine/unique_column.py``: the flags, and the
engine's ``keep_key_if`` that clears a key when its job leaves them), so no other column is needed.
This module reads the unique options of an enqueue call, builds keys and inserts the jobs that
carry them. A time window is folded into the key as the number of the window the job was enqueued
in: ``...:order-42@3412`` for the 3412th hour since the epoch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.states import JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.unique_column import ALL_STATES, guards_finished, state_flags
from django_jobs.exceptions import InvalidJob

if TYPE_CHECKING:
    from django_jobs.core.contract import EnqueueOptions
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager

DEFAULT_STATES = (JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.FAILED)
KEY_LENGTH = 255


@dataclass(frozen=True)
class Unique:
    """A handler's rule: ``@handler("sync", unique=Unique(fields=("customer_id",)))``.

    The key is built from the named payload fields; ``states`` and ``within`` as for
    ``Job.enqueue(unique_states=..., unique_for=...)``.
    """

    fields: Sequence[str] = ()
    states: Sequence[str] = DEFAULT_STATES
    within: timedelta | None = None


@dataclass(frozen=True)
class Rule:
    """One enqueue call's resolved key options (the key itself comes per payload)."""

    key: str | None
    fields: tuple[str, ...]
    states: str  # the flags, "1110100" for waiting, pending, processing, failed
    within: timedelta | None

    def key_for(self, type: str, payload: JSONValue, now: datetime) -> str:
        if self.key is not None:
            raw = self.key
        else:
            missing = [f for f in self.fields if not isinstance(payload, dict) or f not in payload]
            if missing:
                raise InvalidJob({"payload": f"needs {', '.join(missing)} for the unique key"})
            raw = json.dumps([payload[f] for f in self.fields], sort_keys=True, default=str)
        key = f"{type}:{raw}"
        if self.within is not None:
            key += f"@{int(now.timestamp() // self.within.total_seconds())}"
        if len(key) > KEY_LENGTH - len(self.states) - 1:
            key = f"{type[:50]}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"
        return f"{self.states}|{key}"


def rule_of(type: str, options: EnqueueOptions) -> Rule | None:
    """An enqueue call's unique options (those given, else its handler's ``unique``) as a
    ``Rule``; None when there are none. InvalidJob naming the option on a bad one."""
    from django_jobs.handlers.registry import get_handler

    found = get_handler(type)
    default: Unique | None = getattr(found, "unique", None) if found else None
    key = options.unique_key
    if key is None and default is None:
        if options.unique_states is not None or options.unique_for is not None:
            raise InvalidJob({"unique_key": "unique_states and unique_for need a unique_key"})
        return None
    if key is not None:
        _check_key(key)
    states = _states(options.unique_states, default)
    within = _within(options.unique_for, default)
    fields = tuple(default.fields) if default is not None and key is None else ()
    return Rule(key=key, fields=fields, states=state_flags(states), within=within)


def _within(given: object, default: Unique | None) -> timedelta | None:
    within = given if given is not None else (default.within if default is not None else None)
    if within is not None and (not isinstance(within, timedelta) or within.total_seconds() <= 0):
        raise InvalidJob({"unique_for": f"must be a positive timedelta, not {within!r}"})
    return within


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidJob({"unique_key": f"must be a non-empty string, not {key!r}"})
    try:
        storable_json(key)  # the same rule as a payload's strings: no NUL, no lone surrogate
    except NotStorable as exc:
        raise InvalidJob({"unique_key": str(exc)}) from None


def _states(given: Iterable[str] | None, default: Unique | None) -> tuple[str, ...]:
    """The states a key guards: those given, else the handler's rule's, else the default;
    waiting added to pending (a job waiting for its dependencies holds its key)."""
    if given is None:
        given = default.states if default is not None else DEFAULT_STATES
    states = tuple(given)
    bad = [s for s in states if s not in ALL_STATES]
    if bad or JobStatus.PENDING not in states:
        raise InvalidJob({"unique_states": f"must name job states including "
                          f"'{JobStatus.PENDING}' (from {', '.join(ALL_STATES)}), "
                          f"not {list(states)!r}"})
    if JobStatus.WAITING not in states:
        states = (JobStatus.WAITING, *states)
    return states


def insert(manager: JobManager, jobs: list[Job], rule: Rule) -> list[Job]:
    """Insert ``jobs`` (keys already set) or find the job holding each key.

    Returns one job per input, in order; a job found rather than inserted has
    ``duplicate = True``. Each insert runs in its own savepoint: a conflict on the unique
    constraint (the database waits for a concurrent inserter to commit or roll back) is caught
    and the holder of the key is read; if the holder released the key meanwhile, try again.

    The keys are inserted in sorted order, whatever the caller's: an insert holds its key's
    index entry until the transaction ends, so two transactions inserting overlapping keys in
    opposite orders would each wait for a key the other holds, and the database would abort
    one of them as a deadlock. In one order, the second waits for the first and then finds
    its keys taken.
    """
    first: dict[str | None, Job] = {}  # each key's first job in the caller's order
    for job in jobs:
        first.setdefault(job.unique_key, job)
    found = {key: _insert_one(manager, first[key]) for key in sorted(first, key=str)}
    return [found[job.unique_key] for job in jobs]


def _insert_one(manager: JobManager, job: Job, tries: int = 5) -> Job:
    """Insert ``job`` or find the job holding its key (``insert``). A key that also guards a
    finished state is held first where the engine says the index alone cannot keep it (the
    engine's ``hold_key``: on PostgreSQL, whose partitioned table keeps finished rows where the
    open rows' unique index does not see them), and its holder is looked for before the
    insert; until the caller's transaction ends no other insert of it gets past the hold."""
    key = job.unique_key
    if key is not None and guards_finished(key) and engine_for(manager.db).hold_key(key):
        holder = manager.filter(unique_key=key).first()
        if holder is not None:
            holder.duplicate = True
            return holder
    for _ in range(tries):
        try:
            with transaction.atomic(using=manager.db):
                engine_for(manager.db).save_new(job)
            job.duplicate = False  # type: ignore[attr-defined]  # not a field: set on returned jobs
            return job
        except IntegrityError:
            if job.pk is not None:
                job.pk = None
            holder = manager.filter(unique_key=job.unique_key).first()
            if holder is not None:
                holder.duplicate = True
                return holder
    raise IntegrityError(f"could not insert or find the job holding {job.unique_key!r}")
