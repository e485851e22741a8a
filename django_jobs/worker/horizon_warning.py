"""The heartbeat step that tells the operator when vacuum is held back (PostgreSQL).

On every heartbeat it reads what holds the xmin horizon (the database's ``VacuumHorizon``):
snapshots, prepared transactions, replication slots. When the oldest has been held longer
than ``HORIZON_WARNING_SECONDS`` it logs one warning naming it, and one line (INFO) when none is
past the bound any more; a different holder past the bound gets its own warning. A slot keeps
no time, so its age is how long this worker has seen it hold the same horizon.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django_jobs.core import clock
from django_jobs.core.database_parts import parts
from django_jobs.core.settings import jobs_settings
from django_jobs.core.vacuum_horizon import Holder
from django_jobs.models import Job

logger = logging.getLogger("django_jobs.worker")


class HorizonWatch:
    """One worker's watch: the holders it warned about, and when it first saw each slot."""

    def __init__(self) -> None:
        self.warned: set[tuple[Any, ...]] = set()  # holders warned about, still past the bound
        self.seen: dict[tuple[Any, ...], datetime] = {}  # holders without a time: first seen

    def __call__(self, worker_id: str) -> None:
        bound = jobs_settings.HORIZON_WARNING_SECONDS
        using = Job.objects.db
        horizon = parts(using).horizon
        if not bound or not horizon.available():
            return
        found = horizon.holders()
        now = clock.now(using)
        past: list[tuple[float, Holder]] = []
        seen = {}
        for holder in found:
            age = holder.age_seconds
            if age is None:
                seen[holder.key] = self.seen.get(holder.key, now)
                age = (now - seen[holder.key]).total_seconds()
            if age > bound:
                past.append((age, holder))
        self.seen = seen
        if not past:
            if self.warned:
                logger.info(
                    "worker %s: the xmin horizon is no longer held back longer than "
                    "HORIZON_WARNING_SECONDS = %s s", worker_id, bound,
                    extra={"worker_id": worker_id, "event": "horizon_clear"})
            self.warned = set()
            return
        self.warned &= {holder.key for _, holder in past}
        age, oldest = max(past, key=lambda pair: pair[0])
        if oldest.key in self.warned:
            return
        self.warned.add(oldest.key)
        if oldest.age_seconds is None:
            text = f"{oldest.describe()}, seen by this worker for {age:.0f} s"
        else:
            text = oldest.describe()
        logger.warning(
            "worker %s: vacuum is held back: %s (more than HORIZON_WARNING_SECONDS = %s s); "
            "dead rows of the jobs table pile up until it ends (docs/howto-deploy-systemd.md)",
            worker_id, text, bound,
            extra={"worker_id": worker_id, "event": "horizon_held",
                   "reason": f"{oldest.kind} older than {bound} s",
                   "next": "end it: pg_terminate_backend, ROLLBACK PREPARED or "
                           "pg_drop_replication_slot"},
        )
