"""Jobs that wait for other jobs: ``Job.enqueue(..., depends_on=[a, b])``.

A job with unfinished dependencies is inserted ``waiting`` (outside the claim index). Enqueue
marks each dependency ``has_dependents`` (an UPDATE, which also locks it, so a concurrent finish
waits for the enqueue to commit) before reading its status. The finish transaction of a job with
``has_dependents`` makes pending the waiting jobs whose dependencies have all completed (the
``Dependencies`` hooks); it locks those waiting rows first, so two dependencies completing at
once are counted one after the other. Each worker's heartbeat also sweeps waiting jobs
(the engine's ``release_waiting``, which calls the ``release`` hook): a dependent enqueued while
its last dependency was already finishing (the finishing worker read ``has_dependents`` before
it was set) is released there, within one heartbeat. A finish of a job without dependents
costs nothing.

Only a dependency that completed releases: one that went dead or was canceled keeps its
dependents waiting, and so does one deleted before it completed (in the admin, by
``QuerySet.delete()``). A deleted dependency's link stays, with no ``depends_on`` and the
status it had in ``deleted_status`` (``models.keep_unmet_dependency``): met if that was
completed. ``depends_on`` may name the dependencies (a mapping), for ``dependency_results()``
(``features/dependency_results.py``). Retention does not prune a dead or
canceled job while a job waits on it (``retention.prunable``), so it can still be retried.
There is no policy for a dependency that will never complete yet: its dependents wait until
they are canceled or deleted; a link's ``depends_on`` status, or its ``deleted_status``, is
what such a policy would read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet

from django_jobs.core.states import JobStatus
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature
from django_jobs.exceptions import InvalidJob
from django_jobs.models import JobDependency

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager, JobQuerySet


NAME_LENGTH = 100  # JobDependency.name


def dependency_ids(depends_on: object) -> dict[int, str | None]:
    """Job primary keys, in order, each with its name (None in a list); InvalidJob on anything
    else. ``depends_on`` is a list of jobs or ids, or a mapping of names to jobs or ids."""
    if depends_on is None:
        return {}
    named: list[tuple[str | None, object]]
    if isinstance(depends_on, Mapping):
        named = list(depends_on.items())
        for name, _ in named:
            if not isinstance(name, str) or not 0 < len(name) <= NAME_LENGTH:
                raise InvalidJob({"depends_on": f"names must be strings of 1 to {NAME_LENGTH} "
                                                f"characters, not {name!r}"})
    elif isinstance(depends_on, Iterable) and not isinstance(depends_on, str | bytes):
        named = [(None, item) for item in depends_on]
    else:
        raise InvalidJob({"depends_on": "must be a list of jobs or job ids, or a mapping of "
                                        "names to them"})
    ids: dict[int, str | None] = {}
    for name, item in named:
        pk = getattr(item, "pk", item)
        if not isinstance(pk, int) or isinstance(pk, bool):
            raise InvalidJob({"depends_on": f"must be jobs or job ids, not {item!r}"})
        if name is not None and pk in ids:
            raise InvalidJob({"depends_on": f"job {pk} is named twice"})
        ids.setdefault(pk, name)
    return ids


def unfinished(manager: JobManager, ids: list[int]) -> bool:
    """Mark (and so lock) the dependencies, and say whether any has not completed; InvalidJob
    if one does not exist."""
    engine_for(manager.db).mark_has_dependents(ids)
    statuses = dict(manager.filter(pk__in=ids).values_list("pk", "status"))
    missing = [pk for pk in ids if pk not in statuses]
    if missing:
        raise InvalidJob({"depends_on": f"no such job(s): {missing}"})
    return any(status != JobStatus.COMPLETED for status in statuses.values())


def link(manager: JobManager, jobs: list[Job], ids: dict[int, str | None]) -> None:
    JobDependency.objects.using(manager.db).bulk_create(
        [JobDependency(job_id=job.pk, depends_on_id=pk, name=name)
         for job in jobs for pk, name in ids.items()]
    )


# Links that hold their job back: the dependency has not completed, or was deleted before it
# completed (no ``depends_on``, its status in ``deleted_status``). Spelt out, each side of the
# empty ``depends_on`` apart: the status of a missing row must not decide on any database.
UNMET = (Q(depends_on__isnull=False) & ~Q(depends_on__status=JobStatus.COMPLETED)) | (
    Q(depends_on__isnull=True) & ~Q(deleted_status=JobStatus.COMPLETED))


def release_dependents(manager: JobManager, completed_ids: list[int], now: datetime) -> int:
    """In a finish transaction: release the waiting dependents of these completed jobs."""
    links = JobDependency.objects.using(manager.db).filter(depends_on_id__in=completed_ids)
    waiting = manager.filter(status=JobStatus.WAITING, pk__in=links.values("job_id"))
    return release(manager, waiting, now)


def release(manager: JobManager, waiting: JobQuerySet, now: datetime, limit: int = 500,
            sweep: bool = False) -> int:
    """Make pending those of the ``waiting`` jobs whose dependencies have all completed.

    They are locked before their dependencies are counted (a sweep skips rows another
    transaction holds, and looks only at jobs with no unfinished dependency left).
    """
    db = manager.db
    links = JobDependency.objects.using(db)
    if sweep:
        waiting = waiting.exclude(pk__in=links.filter(UNMET).values("job_id"))
    waiting = waiting.order_by("pk")
    if connections[db].features.has_select_for_update:
        waiting = waiting.select_for_update(skip_locked=sweep)
    candidates = list(waiting.values_list("pk", flat=True)[:limit])
    if not candidates:
        return 0
    blocked = set(links.filter(UNMET, job_id__in=candidates).values_list("job_id", flat=True))
    ready = [pk for pk in candidates if pk not in blocked]
    return engine_for(db).make_pending(ready, now)


def waited_on() -> Exists:
    """For a filter on jobs: some waiting job depends on this one."""
    return Exists(JobDependency.objects.filter(depends_on=OuterRef("pk"),
                                               job__status=JobStatus.WAITING))


def waiting_dependents(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The waiting jobs that depend on one of ``jobs`` (a queryset) and are not among them:
    what deleting ``jobs`` would leave waiting on a deleted job."""
    links = JobDependency.objects.using(jobs.db).filter(
        depends_on__in=jobs.exclude(status=JobStatus.COMPLETED).values("pk"))
    return (jobs.model._default_manager.using(jobs.db)
            .filter(status=JobStatus.WAITING, pk__in=links.values("job_id"))
            .exclude(pk__in=jobs.values("pk")))


class Dependencies(Feature):
    """The hooks of dependencies: after a finish, release the dependents of completed jobs;
    at the heartbeat's sweep, release waiting jobs whose dependencies all completed."""

    name = "dependencies"

    def joins_finish(self, job: Job) -> bool:
        return bool(job.has_dependents)

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        done = [o.job.pk for o in written
                if o.kind == JobStatus.COMPLETED and o.job.has_dependents]
        if done:
            release_dependents(manager, done, now)

    def release(self, manager: JobManager, waiting: JobQuerySet, now: datetime) -> int:
        return release(manager, waiting, now, sweep=True)
