"""How a claim takes its rows on Django's ORM: with row locks (PostgreSQL when a feature admits
claims; MariaDB's engine in ``engine/mariadb/`` builds on it) or without (SQLite). The rest of
the verbs are ``engine/verbs.py``'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import models

from django_jobs.core.states import READY_STATES
from django_jobs.engine import hooks
from django_jobs.engine.locked_rows import locked
from django_jobs.engine.verbs import Engine
from django_jobs.engine.writes import ClaimValues, claim_fields

if TYPE_CHECKING:
    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet


class RowLockEngine(Engine):
    """Candidates are read with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers pass over
    each other's rows instead of waiting; features admit them (limits), then one UPDATE."""

    def take(self, ready: JobQuerySet, values: ClaimValues, limit: int, now: datetime
             ) -> list[Job]:
        with self.verb_atomic():
            jobs = self.lock_candidates(ready, limit)
            if not jobs:
                return []
            # Concurrency and rate limits; no query unless a candidate has limits
            jobs = hooks.admit(self.jobs, jobs, ready, limit, now)
            if not jobs:
                return []
            self.mark_claimed(jobs, values)
        return jobs

    def lock_candidates(self, ready: JobQuerySet, limit: int) -> list[Job]:
        """The first ``limit`` rows of ``ready``, locked, skipping rows other claimers hold."""
        return locked(ready, limit)


class WithoutRowLocksEngine(Engine):
    """SQLite: no row locks, one writer at a time. The claim is a single ``UPDATE ... WHERE id
    IN (SELECT ... LIMIT n)``, run under SQLite's database-wide write lock."""

    row_locks = False

    def take(self, ready: JobQuerySet, values: ClaimValues, limit: int, now: datetime
             ) -> list[Job]:
        claim = claim_fields(values)
        # Limits need the candidates first (None: no limits registered)
        limited = hooks.claim_without_row_locks(self.jobs, ready, claim, limit, now)
        if limited is not None:
            return limited
        ids = ready.values("pk")[:limit]
        claimable = self.jobs.filter(pk__in=models.Subquery(ids), status__in=READY_STATES)
        if not claimable.update(**claim):
            return []
        token = values["lease_token"]
        return list(self.jobs.filter(lease_token=token).order_by("-priority", "run_at", "id"))
