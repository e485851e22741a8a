"""Jobs that wait for other jobs: ``Job.enqueue(..., depends_on=[a, b])``.

A job with unfinished dependencies is inserted ``waiting`` (outside the claim index). Enqueue
marks each dependency ``has_dependents`` (an UPDATE) and locks it until it commits (the engine's
``mark_has_dependents``: a delete waits for it, a prune batch passes over it) before reading
its status. The finish transaction of a job with
``has_dependents`` makes pending the waiting jobs whose dependencies have all completed (the
``Dependencies`` hooks); it locks those waiting rows first, so two dependencies completing at
once are counted one after the other. Each worker's heartbeat also sweeps waiting jobs
(the engine's ``release_waiting``, which calls the ``release`` hook): a dependent enqueued while
its last dependency was already finishing (the finishing worker read ``has_dependents`` before
it was set) is released there, within one heartbeat. A finish of a job without dependents
costs nothing.

Only a dependency that completed releases: one that went dead or was canceled keeps its
dependents waiting, and so does one deleted before it completed (by ``QuerySet.delete()``;
the admin refuses: ``held_by_dependents``). A deleted dependency's link stays, with no
``depends_on`` and the status it had in ``deleted_status`` (``models.keep_unmet_dependency``):
met if that was completed. ``depends_on`` may name the dependencies (a mapping), for
``dependency_results()`` (``features/dependency_results.py``). Retention does not prune a dead
or canceled job while a job waits on it, so it can still be retried, nor a completed one while
a job that depends on it has not ended, so its result stays readable (``kept_for_dependents``).

A dependent's ``on_dependency_failure`` says what it does when a dependency goes dead or is
canceled (in a finish, a cancel or a rescue: the transaction that ends the dependency applies
it, and the sweep catches a dependent enqueued meanwhile): NULL waits (as above), ``cancel``
cancels it with a ``DependencyFailed`` error naming the dependency (``cancel_waiting``, whose
``ended`` hooks apply the canceled job's own dependents' policies in turn), ``run`` counts a
dead or canceled dependency as met (``UNMET``), deleted or not. At enqueue, the same: a
dependent that cancels and has a failed dependency is canceled in the enqueue's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet

from django_jobs.core import clock
from django_jobs.core.states import DependencyPolicy, JobStatus
from django_jobs.core.stored_errors import error_dict
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
    ids: dict[int, str | None] = {}
    for name, item in _named(depends_on):
        pk = getattr(item, "pk", item)
        if not isinstance(pk, int) or isinstance(pk, bool):
            raise InvalidJob({"depends_on": f"must be jobs or job ids, not {item!r}"})
        if name is not None and pk in ids:
            raise InvalidJob({"depends_on": f"job {pk} is named twice"})
        ids.setdefault(pk, name)
    return ids


def _named(depends_on: object) -> list[tuple[str | None, object]]:
    """``depends_on``'s items with their names (None in a list); InvalidJob on a bad name or
    anything but a list or a mapping."""
    if isinstance(depends_on, Mapping):
        named = list(depends_on.items())
        for name, _ in named:
            if not isinstance(name, str) or not 0 < len(name) <= NAME_LENGTH:
                raise InvalidJob({"depends_on": f"names must be strings of 1 to {NAME_LENGTH} "
                                                f"characters, not {name!r}"})
        return named
    if isinstance(depends_on, Iterable) and not isinstance(depends_on, str | bytes):
        return [(None, item) for item in depends_on]
    raise InvalidJob({"depends_on": "must be a list of jobs or job ids, or a mapping of "
                                    "names to them"})


def policy(value: object, depends_on: dict[int, str | None]) -> str | None:
    """``on_dependency_failure`` as stored: None for ``wait``; InvalidJob on anything else but
    ``cancel`` and ``run``, or on a policy without dependencies."""
    if value is None or value == DependencyPolicy.WAIT:
        return None
    if value not in (DependencyPolicy.CANCEL, DependencyPolicy.RUN):
        raise InvalidJob({"on_dependency_failure": "must be one of wait, cancel, run, not "
                                                   f"{value!r}"})
    if not depends_on:
        raise InvalidJob({"on_dependency_failure": "needs depends_on"})
    return str(value)


def statuses(manager: JobManager, ids: list[int]) -> dict[int, str]:
    """Mark (and so lock) the dependencies, and read their statuses; InvalidJob if one does
    not exist."""
    engine_for(manager.db).mark_has_dependents(ids)
    found = dict(manager.filter(pk__in=ids).values_list("pk", "status"))
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise InvalidJob({"depends_on": f"no such job(s): {missing}"})
    return found


def waits(found: dict[int, str], on_failure: str | None) -> bool:
    """Whether a new job with dependencies in these statuses, and this policy, waits."""
    met = ENDED if on_failure == DependencyPolicy.RUN else (JobStatus.COMPLETED,)
    return any(status not in met for status in found.values())


def link(manager: JobManager, jobs: list[Job], ids: dict[int, str | None]) -> None:
    JobDependency.objects.using(manager.db).bulk_create(
        [JobDependency(job_id=job.pk, depends_on_id=pk, name=name)
         for job in jobs for pk, name in ids.items()]
    )


FAILED = (JobStatus.DEAD, JobStatus.CANCELED)  # a dependency that will not complete on its own
ENDED = (JobStatus.COMPLETED, *FAILED)


def dependency_status_not_in(states: tuple[str, ...]) -> Q:
    """Links whose dependency's status (``deleted_status`` once it was deleted) is not one of
    ``states``. Spelt out, each side of the empty ``depends_on`` apart: the status of a
    missing row must not decide on any database."""
    return (Q(depends_on__isnull=False) & ~Q(depends_on__status__in=states)) | (
        Q(depends_on__isnull=True) & ~Q(deleted_status__in=states))


def dependency_status_in(states: tuple[str, ...]) -> Q:
    """Links whose dependency's status (``deleted_status`` once deleted) is one of ``states``."""
    return Q(depends_on__status__in=states) | Q(depends_on__isnull=True,
                                                  deleted_status__in=states)


RUNS_ANYWAY = Q(job__on_dependency_failure=DependencyPolicy.RUN)
# Links that hold their job back: the dependency has not completed (nor, for a job that runs
# anyway, gone dead or been canceled), deleted or not.
UNMET = (~RUNS_ANYWAY & dependency_status_not_in((JobStatus.COMPLETED,))) | (
    RUNS_ANYWAY & dependency_status_not_in(ENDED))


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


def dependencies_failed(manager: JobManager, failed: list[Job], now: datetime) -> None:
    """In the transaction that ended them: the waiting dependents of these dead or canceled
    jobs that cancel are canceled (the dependency named in their error, and their own
    dependents' policies applied in turn), those that run anyway are released."""
    ids = [job.pk for job in failed]
    links = JobDependency.objects.using(manager.db).filter(depends_on_id__in=ids)
    waiting = manager.filter(status=JobStatus.WAITING, pk__in=links.values("job_id"))
    for job in failed:
        cancel(manager, job_ids=list(
            links.filter(depends_on_id=job.pk, job__status=JobStatus.WAITING,
                         job__on_dependency_failure=DependencyPolicy.CANCEL)
            .values_list("job_id", flat=True)), public_id=job.public_id, status=job.status,
            now=now)
    release(manager, waiting.filter(on_dependency_failure=DependencyPolicy.RUN), now)


def cancel(manager: JobManager, *, job_ids: list[int], public_id: str | None, status: str,
           now: datetime) -> int:
    """Cancel the waiting jobs among ``job_ids`` because their dependency (``public_id``,
    None once deleted) is ``status``."""
    if not job_ids:
        return 0
    which = f"dependency {public_id}" if public_id else "a deleted dependency"
    error = error_dict(
        type="DependencyFailed", details={"dependency": public_id, "status": status},
        message=f"canceled: {which} is {status} (on_dependency_failure: cancel)")
    return len(engine_for(manager.db).cancel_waiting(job_ids, error, now))


def cancel_sweep(manager: JobManager, waiting: JobQuerySet, now: datetime,
                 limit: int = 500) -> int:
    """The heartbeat's sweep of waiting jobs that cancel and have a dead or canceled
    dependency (one enqueued while its dependency was ending)."""
    links = JobDependency.objects.using(manager.db).filter(
        dependency_status_in(FAILED), job__status=JobStatus.WAITING,
        job__on_dependency_failure=DependencyPolicy.CANCEL,
        job_id__in=waiting.values("pk"),
    ).order_by("job_id")
    found = list(links.values_list("job_id", "depends_on__public_id", "depends_on__status",
                                   "deleted_status")[:limit])
    done: set[int] = set()
    canceled = 0
    for job_id, public_id, status, deleted_status in found:
        if job_id not in done:
            done.add(job_id)
            canceled += cancel(manager, job_ids=[job_id], public_id=public_id,
                               status=status or deleted_status, now=now)
    return canceled


def waited_on() -> Exists:
    """For a filter on jobs: some waiting job depends on this one."""
    return Exists(JobDependency.objects.filter(depends_on=OuterRef("pk"),
                                               job__status=JobStatus.WAITING))


UNENDED = (JobStatus.WAITING, JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.FAILED)


def kept_for_dependents(status: str) -> Q:
    """For a filter on finished jobs of ``status``: those pruning keeps for their dependents.
    A dead or canceled job while a job waits on it (it can still be retried); a completed one
    while a job that depends on it has not ended (it may still read its result:
    ``dependency_results()``). One uncorrelated subquery, read once per statement: a
    correlated one is planned again for each partition of a partitioned table."""
    needing = UNENDED if status == JobStatus.COMPLETED else (JobStatus.WAITING,)
    return Q(has_dependents=True, pk__in=JobDependency.objects.filter(
        job__status__in=needing, depends_on__isnull=False).values("depends_on_id"))


def held_by_dependents(jobs: QuerySet[Job]) -> Q:
    """For a filter on ``jobs``: those a waiting job outside ``jobs`` depends on, and that have
    not completed. Deleted, such a job would never complete, and that job would wait for ever;
    the admin does not delete them."""
    waiting_outside = Exists(JobDependency.objects.using(jobs.db).filter(
        depends_on=OuterRef("pk"), job__status=JobStatus.WAITING)
        .exclude(job_id__in=jobs.values("pk")))
    return ~Q(status=JobStatus.COMPLETED) & Q(has_dependents=True) & Q(waiting_outside)


def waiting_dependents(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The waiting jobs that depend on one of ``jobs`` (a queryset) and are not among them:
    what deleting ``jobs`` would leave waiting on a deleted job."""
    links = JobDependency.objects.using(jobs.db).filter(
        depends_on__in=jobs.exclude(status=JobStatus.COMPLETED).values("pk"))
    return (jobs.model._default_manager.using(jobs.db)
            .filter(status=JobStatus.WAITING, pk__in=links.values("job_id"))
            .exclude(pk__in=jobs.values("pk")))


class Dependencies(Feature):
    """The hooks of dependencies: after a finish, release the dependents of completed jobs
    and apply the policies of those of dead or canceled ones (also after a cancel or a
    rescue: ``ended``); at the heartbeat's sweep, release waiting jobs whose dependencies are
    all met and cancel those that cancel and have a failed dependency."""

    name = "dependencies"
    marks = ("has_dependents",)

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        done = [o.job.pk for o in written
                if o.kind == JobStatus.COMPLETED and o.job.has_dependents]
        if done:
            release_dependents(manager, done, now)
        failed = [o.job for o in written if o.kind in FAILED and o.job.has_dependents]
        if failed:
            dependencies_failed(manager, failed, now)

    def hold_for_cancel(self, cancelable: JobQuerySet) -> list[Job]:
        """The jobs that have dependents, locked (where the database can) until commit."""
        depended_on = cancelable.filter(has_dependents=True)
        if connections[cancelable.db].features.has_select_for_update:
            depended_on = depended_on.select_for_update()
        return list(depended_on)

    def ended(self, jobs: Sequence[Job], using: str) -> None:
        failed = [job for job in jobs if job.has_dependents and job.status in FAILED]
        if failed:
            from django_jobs.models import Job

            dependencies_failed(Job.objects.db_manager(using), failed, clock.now(using))

    def release(self, manager: JobManager, waiting: JobQuerySet, now: datetime) -> int:
        return cancel_sweep(manager, waiting, now) + release(manager, waiting, now, sweep=True)
