"""A crash is not an error: what the rescue records for jobs whose worker process died.

When a worker dies (``os._exit``, a segfault, the OOM killer, ``kill -9``) every job it held
loses its lease, and the rescue finds them. Only one of them may have caused the crash; the
others only shared the process. So a crash is counted apart from errors, in ``Job.crashes``:

- ``on_crash="retry"`` (the default, setting ``ON_CRASH``): the lost attempt does not count:
  the job is retried after the backoff like a failed attempt (state ``failed``, a
  ``WorkerLost`` error saying why), and its ``max_attempts`` is raised by one, so attempt
  numbers still count every run. ``"fail"``: the lost attempt counts as a failed attempt.
- A job that has been in a crash is a *suspect*, and workers run a suspect alone
  (``worker/suspects.py``), so a crash while it runs is its own.
- Quarantine: a job goes dead when it has been in ``max_crashes`` crashes (setting
  ``MAX_CRASHES``) and the last of them it was alone in its worker. A crash it shared never
  kills it, whatever its ``max_attempts``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import F

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import PROCESSING, JobStatus, Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.engine import engine_for, hooks
from django_jobs.engine.hooks import Feature
from django_jobs.handlers.registry import get_handler

if TYPE_CHECKING:
    from django_jobs.engine.transition import Transition
    from django_jobs.engine.verbs import Engine
    from django_jobs.engine.writes import UpdateFields
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager


@dataclass(frozen=True)
class CrashPolicy:
    """A job type's answer to a crash (the handler's options, else the settings)."""

    on_crash: str
    max_crashes: int

    @classmethod
    def of(cls, job_type: str) -> CrashPolicy:
        found = get_handler(job_type)
        on_crash = (found and found.on_crash) or jobs_settings.ON_CRASH
        max_crashes = (found and found.max_crashes) or int(jobs_settings.MAX_CRASHES)
        return cls(on_crash=on_crash, max_crashes=max(int(max_crashes), 1))


def alone_in_worker(manager: JobManager, jobs: Sequence[Job]) -> set[int]:
    """The ids of those stale ``jobs`` that were the only job their worker held.

    Read before any of them is written: a worker's other jobs are those of this batch with the
    same worker id, and any still processing that another rescuer has or that are not stale."""
    held = Counter(job.worker_id for job in jobs)
    ids = [job.pk for job in jobs]
    others = set(
        manager.filter(status=PROCESSING, worker_id__in=list(held))
        .exclude(pk__in=ids).values_list("worker_id", flat=True)
    )
    return {job.pk for job in jobs if held[job.worker_id] == 1 and job.worker_id not in others}


def crash_outcome(job: Job, *, alone: bool, now: datetime) -> tuple[AttemptOutcome, bool]:
    """What the lost attempt of ``job`` comes to (see the module's docstring), and whether it
    counts against ``max_attempts``."""
    policy = CrashPolicy.of(job.type)
    crashes = job.crashes + 1
    lost = (f"worker {job.worker_id!r} stopped renewing its lease (last lease until "
            f"{job.leased_until.isoformat()})" if job.leased_until else
            f"worker {job.worker_id!r} was lost")
    shared = "alone in its worker" if alone else "with other jobs in its worker"
    details = {"crashes": crashes, "max_crashes": policy.max_crashes, "alone": alone}
    started = job.started_at or now
    if alone and crashes >= policy.max_crashes:
        error = error_dict(type="Quarantined", details=details, message=(
            f"killed its worker {crashes} times (max_crashes {policy.max_crashes}), the last "
            f"time alone: {lost}"))
        return AttemptOutcome(job=job, kind=Outcome.FAILED, permanent=True, error=error,
                              started_at=started, finished_at=now), True
    if policy.on_crash == "fail":
        error = error_dict(type="WorkerLost", details=details, message=(
            f"{lost}; crash {crashes} of this job ({shared}); counted as a failed attempt"))
        return AttemptOutcome(job=job, kind=Outcome.FAILED, error=error, started_at=started,
                              finished_at=now), True
    error = error_dict(type="WorkerLost", details=details, message=(
        f"{lost}; crash {crashes} of this job ({shared}); the attempt does not count "
        f"(max_attempts raised by one) and the job runs again alone in a worker "
        f"(max_crashes {policy.max_crashes})"))
    return AttemptOutcome(job=job, kind=Outcome.FAILED, error=error, started_at=started,
                          finished_at=now), False


def crash_change(
    engine: Engine, outcome: AttemptOutcome, *, counts: bool, now: datetime
) -> tuple[Transition, UpdateFields, dict[str, int]]:
    """What the rescue of ``outcome``'s job writes, from the job as it was read, changing
    nothing: the transition (decided on a budget one attempt larger when the lost attempt
    does not count), the row's ``update()`` values (the counters as expressions on the row),
    and the counters' new values, which the job instance takes once the write changed its row."""
    job = outcome.job
    extra = 0 if counts else 1
    change = engine.transition(outcome, now, extra)
    fields = {**engine.update_fields(change), "crashes": F("crashes") + 1}
    counters = {"crashes": job.crashes + 1}
    if extra:
        fields["max_attempts"] = F("max_attempts") + extra
        counters["max_attempts"] = job.max_attempts + extra
    return change, fields, counters


def rescue_one(engine: Engine, job: Job, *, alone: bool, now: datetime) -> bool:
    """Record the lost attempt of the stale ``job`` if it still holds the lease it was read
    with (the write is fenced on that token); True if it did. The job instance changes only
    then."""
    from django_jobs.engine.transition import apply
    from django_jobs.models import JobAttempt

    outcome, counts = crash_outcome(job, alone=alone, now=now)
    change, fields, counters = crash_change(engine, outcome, counts=counts, now=now)
    if not engine.write_fenced(job, fields):
        return False
    apply(outcome, change)
    job.__dict__.update(counters)
    engine.shelve_attempts([job])  # gone dead: its attempts take its prune day
    row = engine.attempt_row(outcome)
    row.outcome = JobAttempt.Outcome.LOST
    row.save(force_insert=True, using=engine.db)
    return True


def rescue(manager: JobManager, *, limit: int, now: datetime) -> list[Job]:
    """Record the lost attempts of up to ``limit`` stale jobs (the engine's ``rescue``); call
    inside a transaction. Every write is fenced on the old lease token."""
    engine = engine_for(manager.db)
    stale = manager.stale(now).order_by("leased_until")
    if engine.row_locks:
        stale = stale.select_for_update(skip_locked=True)
    jobs = list(stale[:limit])
    alone = alone_in_worker(manager, jobs) if jobs else set()
    rescued = [job for job in jobs if rescue_one(engine, job, alone=job.pk in alone, now=now)]
    hooks.ended([job for job in rescued if job.status == JobStatus.DEAD], manager.db)
    return rescued


class CrashCounting(Feature):
    """The rescue hook: lost attempts are recorded as crashes (see the module)."""

    name = "crash counting"

    def rescue(self, manager: JobManager, *, limit: int, now: datetime) -> list[Job] | None:
        return rescue(manager, limit=limit, now=now)
