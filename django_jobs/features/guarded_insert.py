"""Inserts that need more than one plain INSERT: unique keys and dependencies.

``UniqueAndDependencies`` is the enqueue hook: it takes ``unique_key``, ``unique_states``,
``unique_for`` and ``depends_on`` out of an enqueue call and, only when one of them applies,
takes over the insert with ``insert``; every other enqueue stays a single INSERT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from django_jobs.core.states import JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature, Insert, Options
from django_jobs.features.dependencies import dependency_ids, link, unfinished
from django_jobs.features.unique import Rule, pop_rule
from django_jobs.features.unique import insert as insert_unique

if TYPE_CHECKING:
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager


def insert(manager: JobManager, jobs: list[Job], rule: Rule | None,
           depends_on: dict[int, str | None]) -> list[Job]:
    """Insert ``jobs``; one job per input, those found by their unique key with
    ``duplicate = True``. With ``depends_on``, new jobs are ``waiting`` unless every
    dependency has completed, and are linked to them in the same transaction."""
    if not jobs:
        return []
    with transaction.atomic(using=manager.db):
        waiting = bool(depends_on) and unfinished(manager, list(depends_on))
        for job in jobs:
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
    return created


class UniqueAndDependencies(Feature):
    """The enqueue hook of unique keys and dependencies (one insert serves both)."""

    name = "unique and dependencies"

    def take_enqueue_options(self, type: str, options: Options) -> Insert | None:
        rule = pop_rule(type, options)
        depends_on = dependency_ids(options.pop("depends_on", None))
        if rule is None and not depends_on:
            return None
        return lambda manager, jobs: insert(manager, jobs, rule, depends_on)
