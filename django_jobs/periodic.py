"""Work any worker does on its heartbeat: enqueue due recurring jobs, prune old jobs, release
jobs whose dependencies completed.

Each step is idempotent across workers (the database decides), so no worker is special.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError

from .retention import AutoPruner

logger = logging.getLogger("django_jobs.worker")


class Periodic:
    def __init__(self) -> None:
        from .scheduling.ticker import Ticker

        self.steps: list[Callable[[str], object]] = [Ticker(), AutoPruner(), ReleaseWaiting()]

    def __call__(self, worker_id: str) -> None:
        for step in self.steps:
            try:
                step(worker_id)
            except DatabaseError:
                logger.exception("worker %s: %s failed", worker_id, type(step).__name__)
                raise
            except Exception:  # a bad schedule setting must not stop the worker's heartbeat
                logger.exception("worker %s: %s failed", worker_id, type(step).__name__)


class ReleaseWaiting:
    """The step that makes pending the waiting jobs no feature holds back any more (a job whose
    dependencies all completed): ``Job.objects.release_waiting``."""

    def __call__(self, worker_id: str = "") -> None:
        from .models import Job

        Job.objects.release_waiting()
