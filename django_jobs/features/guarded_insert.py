"""Inserts that need more than one plain INSERT: unique keys and dependencies.

``UniqueAndDependencies`` is the enqueue hook: it reads ``unique_key``, ``unique_states``,
``unique_for``, ``depends_on`` and ``on_dependency_failure`` of an enqueue call (and its
handler's ``unique`` rule), is asked only when one of them is set, and when one applies takes
over the insert with ``insert``; every other enqueue stays a single INSERT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from django_jobs.core import clock
from django_jobs.core.states import DependencyPolicy, JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature, Insert
from django_jobs.features.dependencies import (
    FAILED,
    dependencies_failed,
    dependency_ids,
    link,
    policy,
    statuses,
    waits,
)
from django_jobs.features.unique import Rule, rule_of
from django_jobs.features.unique import insert as insert_unique

if TYPE_CHECKING:
    from django_jobs.core.contract import EnqueueOptions
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager


def insert(manager: JobManager, jobs: list[Job], rule: Rule | None,
           depends_on: dict[int, str | None], on_failure: str | None = None) -> list[Job]:
    """Insert ``jobs``; one job per input, those found by their unique key with
    ``duplicate = True``. With ``depends_on``, new jobs are ``waiting`` unless every
    dependency is met (completed; or ended, for ``on_failure`` ``run``), and are linked to
    them in the same transaction; with ``on_failure`` ``cancel`` and a dead or canceled
    dependency they are canceled there too."""
    if not jobs:
        return []
    with transaction.atomic(using=manager.db):
        found = statuses(manager, list(depends_on)) if depends_on else {}
        prepare(jobs, rule, waits(found, on_failure), on_failure)
        created = _insert(manager, jobs, rule)
        if depends_on:
            _link(manager, created, depends_on, found, on_failure)
    return created


def prepare(jobs: list[Job], rule: Rule | None, waiting: bool, on_failure: str | None) -> None:
    """Set on the built jobs what the options make of them: their policy, waiting, their key."""
    for job in jobs:
        job.on_dependency_failure = on_failure
        if waiting:
            job.status = JobStatus.WAITING
        if rule is not None:
            job.unique_key = rule.key_for(job.type, job.payload, job.created_at)


def _insert(manager: JobManager, jobs: list[Job], rule: Rule | None) -> list[Job]:
    if rule is not None:
        return insert_unique(manager, jobs, rule)
    created = engine_for(manager.db).bulk_insert(jobs)
    for job in created:
        job.duplicate = False  # type: ignore[attr-defined]  # as the unique insert sets it
    return created


def _link(manager: JobManager, created: list[Job], depends_on: dict[int, str | None],
          found: dict[int, str], on_failure: str | None) -> None:
    """Link the new jobs to their dependencies; those that cancel, canceled at once if one
    has failed."""
    new = [j for j in dict.fromkeys(created) if not j.duplicate]  # type: ignore[attr-defined]
    link(manager, new, depends_on)
    failed = [pk for pk, status in found.items() if status in FAILED]
    if new and failed and on_failure == DependencyPolicy.CANCEL and waits(found, on_failure):
        dependencies_failed(manager, list(manager.filter(pk__in=failed)), clock.now(manager.db))
        for job in new:
            job.refresh_from_db()


class UniqueAndDependencies(Feature):
    """The enqueue hook of unique keys and dependencies (one insert serves both)."""

    name = "unique and dependencies"
    enqueue_reads = ("unique_key", "unique_states", "unique_for", "depends_on",
                     "on_dependency_failure")
    handler_reads = ("unique",)

    def enqueue_insert(self, type: str, options: EnqueueOptions) -> Insert | None:
        rule = rule_of(type, options)
        depends_on = dependency_ids(options.depends_on)
        on_failure = policy(options.on_dependency_failure, depends_on)
        if rule is None and not depends_on:
            return None
        return lambda manager, jobs: insert(manager, jobs, rule, depends_on, on_failure)
