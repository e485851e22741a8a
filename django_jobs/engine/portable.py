"""How a claim takes its rows on Django's ORM: with row locks (MariaDB, and PostgreSQL when a
feature admits claims) or without (SQLite). The rest of the verbs are ``engine/verbs.py``'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections, models, transaction

from .. import hooks, mariadb
from ..instances import varying
from ..lockedrows import locked
from ..states import READY_STATES
from . import mariadbenqueue
from .verbs import Engine
from .writes import claim_fields

if TYPE_CHECKING:
    from ..models import Job


class RowLockEngine(Engine):
    """Candidates are read with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers pass over
    each other's rows instead of waiting; features admit them (limits), then one UPDATE."""

    def take(self, ready: Any, values: dict[str, Any], limit: int, now: datetime) -> list[Job]:
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

    def lock_candidates(self, ready: Any, limit: int) -> list[Job]:
        """The first ``limit`` rows of ``ready``, locked, skipping rows other claimers hold."""
        return locked(ready, limit)


class MariaDBEngine(RowLockEngine):
    """MariaDB and MySQL: the candidates' ids are read first, then only those are locked
    (``mariadb.lock_ready``: MariaDB would lock every ready row it sorts)."""

    def lock_candidates(self, ready: Any, limit: int) -> list[Job]:
        return mariadb.lock_ready(ready, limit)

    def insert_many(self, jobs: list[Job], shared: dict[str, Any]) -> list[Job]:
        """On MariaDB ``bulk_create``'s INSERT with the values all jobs share sent once
        (``engine/mariadbenqueue.py``); a failed INSERT marks the caller's atomic block for
        rollback, as ``bulk_create``'s does. MySQL has no ``INSERT ... RETURNING``: it keeps
        ``bulk_create``."""
        connection: Any = connections[self.db]  # the MySQL backend's wrapper
        if not connection.mysql_is_mariadb:
            return super().insert_many(jobs, shared)
        with transaction.mark_for_rollback_on_error(self.db):
            mariadbenqueue.insert_many(jobs, self.db, varying(self.jobs.model, shared=shared))
        return jobs


class WithoutRowLocksEngine(Engine):
    """SQLite: no row locks, one writer at a time. The claim is a single ``UPDATE ... WHERE id
    IN (SELECT ... LIMIT n)``, run under SQLite's database-wide write lock."""

    row_locks = False

    def take(self, ready: Any, values: dict[str, Any], limit: int, now: datetime) -> list[Job]:
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
