"""The worker's heartbeat, every ``HEARTBEAT_SECONDS``: what keeps its jobs its own and the
queue healthy while it runs.

It renews the leases of the jobs the worker holds (a job whose lease runs out is rescued by
another worker) and interrupts those with a cancel request; rescues the jobs of workers that
died (a job rescued as dead is sent ``job_finished``, as a turn's outcomes); reads which queues
are paused; refreshes the worker's own row and removes the rows of workers long silent (and, on
PostgreSQL, the waiting rows of workers whose session is gone); writes the counts of the jobs
finished since the last heartbeat (``engine/finish_counts.py``); and runs the periodic steps
(``Periodic``: the features' steps, such as recurring jobs and pruning, then the release of
waiting jobs, then the watch on what holds back vacuum, ``worker/horizon_warning.py``). Any
worker may do each of these: the database decides, so no worker is special. The worker imports
no feature: the app registers them (``apps.py``), and each names its steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import DatabaseError

from django_jobs.core import clock
from django_jobs.core.database_parts import parts
from django_jobs.core.db_errors import REFUSAL, classify
from django_jobs.core.states import Outcome
from django_jobs.engine import finish_counts, hooks
from django_jobs.exceptions import JobCanceled
from django_jobs.models import Job, QueueState
from django_jobs.models import Worker as WorkerRow
from django_jobs.signals import job_finished
from django_jobs.worker.handoff import handoff
from django_jobs.worker.log_lines import at_utc, level_for
from django_jobs.worker.turn import send_finished

if TYPE_CHECKING:
    from django_jobs.worker.horizon_warning import HorizonWatch
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")

# A worker row whose heartbeat is this many leases old belongs to a worker that is gone.
STALE_ROW_LEASES = 4


def rescue(worker: WorkerState) -> list[Job]:
    """The engine's rescue, looking only at the leases that ran out since this worker's last
    rescue that found none (``since``): under a long-open snapshot the lease index keeps an
    entry, its lease long run out, for every job claimed since, and a look from the start
    would read them all at every heartbeat. At least once per lease the look starts at the
    index's front, for a lease no bounded look saw (one that ran out before the last look
    yet was written after it; one another worker was rescuing)."""
    now, beat = clock.now(Job.objects.db), time.monotonic()
    since = worker.watchman.rescued_until if beat < worker.watchman.full_rescue_at else None
    if since is None:
        worker.watchman.full_rescue_at = beat + worker.options.lease_seconds
    rescued = Job.objects.rescue(now=now, since=since)
    worker.watchman.rescued_until = None if rescued else now
    return rescued


def heartbeat(worker: WorkerState) -> None:
    """One heartbeat (run through ``Worker.safely``: a database error skips the rest)."""
    lease_seconds = worker.options.lease_seconds
    # The database's clock judges leases: a step of this host's clock is caught here.
    clock.measure(Job.objects.db)
    running = worker.executor.running
    # A claimed job always has a lease token; one without has no lease to renew.
    held = {pk: r.job.lease_token for pk, r in running.items() if r.job.lease_token is not None}
    still, cancel = Job.objects.heartbeat(held=held, lease_seconds=lease_seconds)
    for pk in set(running) - still:
        logger.warning(
            "worker %s: lost the lease of job %s: the job is no longer held under this "
            "worker's lease (rescued by another worker, changed or deleted); its handler runs "
            "on here, and its outcome is not written", worker.worker_id, pk,
            extra={"worker_id": worker.worker_id, "event": "lease_lost",
                   "reason": "the job is no longer held under this worker's lease",
                   "next": "its handler runs on here, and its outcome is not written"},
        )
    for pk in cancel:
        worker.executor.interrupt(pk, JobCanceled)
    rescued_dead = []
    for job in rescue(worker):
        dead = job.status == Job.Status.DEAD
        if dead:
            rescued_dead.append((job, Outcome.DEAD, None))
        then = ("dead: it does not run again" if dead
                else f"{job.status}, runs again at {at_utc(job.run_at)}")
        # A rescue that ends the job is a failure that ends it: the "dead" level (ERROR).
        logger.log(
            level_for(Outcome.DEAD) if dead else logging.WARNING,
            "worker %s: rescued job %s of lost worker %s: its lease ran out; %s",
            worker.worker_id, job.public_id, job.worker_id, then,
            extra={"worker_id": worker.worker_id, "job_id": job.public_id,
                   "job_type": job.type, "job_queue": job.queue, "attempt": job.attempt,
                   "event": "job_rescued",
                   "reason": f"the lease of worker {job.worker_id} ran out", "next": then},
        )
    if rescued_dead and job_finished.has_listeners(Job):  # off the loop, as a turn's
        handoff.call(send_finished, rescued_dead)
    paused = QueueState.objects.filter(paused=True).values_list("name", flat=True)
    worker.producer.paused = set(paused)
    now = clock.now(WorkerRow.objects.db)
    WorkerRow.objects.filter(pk=worker.worker_id).update(
        last_heartbeat=now, running=len(worker.executor.running)
    )
    stale = now - timedelta(seconds=lease_seconds * STALE_ROW_LEASES)
    WorkerRow.objects.filter(last_heartbeat__lt=stale).delete()
    if worker.listener is not None:  # PostgreSQL: the waiting rows of killed workers
        worker.listener.forget_gone()
    finish_counts.flush()
    worker.periodic(worker.worker_id)


class Periodic:
    """One worker's heartbeat steps, each feature's made once and kept with their state."""

    def __init__(self) -> None:
        self.made: dict[hooks.Feature, Sequence[hooks.Step]] = {}
        self.started = False  # its first heartbeat is behind it
        self.release_waiting = ReleaseWaiting()
        self.horizon: HorizonWatch | None = None  # made where the database reads a horizon

    def steps(self) -> list[hooks.Step]:
        """The steps of this heartbeat: the features' configured now (the settings are read at
        each heartbeat), then the release and, where the database reads one, the horizon."""
        hooks.decide()  # which features join the claims until the next heartbeat
        features = hooks.periodic_steps(self.made, starting=not self.started)
        if self.horizon is None and parts(Job.objects.db).horizon.available():
            from django_jobs.worker.horizon_warning import HorizonWatch

            self.horizon = HorizonWatch()
        horizon = [] if self.horizon is None else [self.horizon]
        return [*features, self.release_waiting, *horizon]

    def __call__(self, worker_id: str) -> None:
        steps = self.steps()
        self.started = True
        for step in steps:
            try:
                step(worker_id)
            except DatabaseError as exc:
                # An outage (the connection lost, a failover) is the worker's to report, once
                # (worker/outage.py); a statement the database refused is this step's own.
                if classify(exc) is REFUSAL:
                    logger.exception("worker %s: %s failed", worker_id, step_name(step))
                raise
            except Exception:  # a bad schedule setting must not stop the worker's heartbeat
                logger.exception("worker %s: %s failed", worker_id, step_name(step))


def step_name(step: hooks.Step) -> str:
    """A step's name in the log: a function's own, else its class's (``Ticker``)."""
    return getattr(step, "__name__", type(step).__name__)


class ReleaseWaiting:
    """The step that makes pending the waiting jobs no feature holds back any more (a job whose
    dependencies all completed): ``Job.objects.release_waiting``."""

    def __call__(self, worker_id: str = "") -> None:
        Job.objects.release_waiting()
