"""Inserts that need more than one plain INSERT: unique keys and dependencies.

``UniqueAndDependencies`` is the enqueue hook: it takes ``unique_key``, ``unique_states``,
``unique_for``, ``depends_on`` and ``on_dependency_failure`` out of an enqueue call and, only
when one of them applies, takes over the insert with ``insert``; every other enqueue stays a
single INSERT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from django_jobs.core import clock
from django_jobs.core.states import DependencyPolicy, JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature, Insert, Options
from django_jobs.features.dependencies import (
    FAILED,
    dependencies_failed,
    dependency_ids,
    link,
    policy,
    statuses,
    waits,
)
from django_jobs.features.unique import Rule, pop_rule
from django_jobs.features.unique import insert as insert_unique

if TYPE_CHECKING:
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
        waiting = waits(found, on_failure)
        for job in jobs:
            job.on_dependency_failure = on_failure
            if waiting:
                job.status = JobStatus.WAITING
            if rule is not None:
                job.unique_key = rule.key_for(job.type, job.payload, job.created_at)
        if rule is not None:
            created = insert_unique(manager, jobs, rule)
        else:
            created = engine_for(manager.db).bulk_insert(jobs)
            for job in created:
                job.duplicate = False  # type: ignore[attr-defined]  # as the unique insert sets it
        if depends_on:
            new = [j for j in dict.fromkeys(created) if not j.duplicate]  # type: ignore[attr-defined]
            link(manager, new, depends_on)
            failed = [pk for pk, status in found.items() if status in FAILED]
            if new and waiting and failed and on_failure == DependencyPolicy.CANCEL:
                dependencies_failed(manager, list(manager.filter(pk__in=failed)),
                                    clock.now(manager.db))
                for job in new:
                    job.refresh_from_db()
    return created


class UniqueAndDependencies(Feature):
    """The enqueue hook of unique keys and dependencies (one insert serves both)."""

    name = "unique and dependencies"

    def take_enqueue_options(self, type: str, options: Options) -> Insert | None:
        rule = pop_rule(type, options)
        depends_on = dependency_ids(options.pop("depends_on", None))
        on_failure = policy(options.pop("on_dependency_failure", None), depends_on)
        if rule is None and not depends_on:
            return None
        return lambda manager, jobs: insert(manager, jobs, rule, depends_on, on_failure)
