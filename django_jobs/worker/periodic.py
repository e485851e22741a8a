"""Work any worker does on its heartbeat: the features' steps (``hooks.periodic_steps``:
recurring jobs, pruning), then the release of jobs whose dependencies completed, then the
watch on what holds back vacuum (``worker/horizon_warning.py``, PostgreSQL).

Each step is idempotent across workers (the database decides), so no worker is special. The
worker imports no feature: the app registers them (``apps.py``), and each names its steps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import DatabaseError

from django_jobs.core.db_errors import REFUSAL, classify
from django_jobs.engine import hooks
from django_jobs.worker.horizon_warning import HorizonWatch

logger = logging.getLogger("django_jobs.worker")


class Periodic:
    """One worker's heartbeat steps, each feature's made once and kept with their state."""

    def __init__(self) -> None:
        self.made: dict[hooks.Feature, Sequence[hooks.Step]] = {}
        self.started = False  # its first heartbeat is behind it
        self.release_waiting = ReleaseWaiting()
        self.horizon = HorizonWatch()

    def steps(self) -> list[hooks.Step]:
        """The steps of this heartbeat: the features' configured now (the settings are read at
        each heartbeat), then the release and the horizon."""
        features = hooks.periodic_steps(self.made, starting=not self.started)
        return [*features, self.release_waiting, self.horizon]

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
        from django_jobs.models import Job

        Job.objects.release_waiting()
