"""The engine on MariaDB and MySQL (``MariaDBEngine``): the row-lock claim with MariaDB's
locking read, and ``enqueue_many`` in one statement on MariaDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.db import connections, transaction

from django_jobs.engine.mariadb import enqueue, locks
from django_jobs.engine.portable import RowLockEngine
from django_jobs.models.instances import varying

if TYPE_CHECKING:
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLWrapper

    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet


class MariaDBEngine(RowLockEngine):
    """MariaDB and MySQL: the candidates' ids are read first, then only those are locked
    (``locks.lock_ready``: MariaDB would lock every ready row it sorts)."""

    def lock_candidates(self, ready: JobQuerySet, limit: int) -> list[Job]:
        return locks.lock_ready(ready, limit)

    def lock_depended_on(self, ids: list[int]) -> None:
        """``LOCK IN SHARE MODE``: a delete waits for it, a prune batch's ``FOR UPDATE SKIP
        LOCKED`` passes over it, and other enqueues share it."""
        locks.lock_shared(self.jobs.filter(pk__in=ids))

    def insert_many(self, jobs: list[Job], shared: dict[str, object]) -> list[Job]:
        """On MariaDB ``bulk_create``'s INSERT with the values all jobs share sent once
        (``engine/mariadb/enqueue.py``); a failed INSERT marks the caller's atomic block for
        rollback, as ``bulk_create``'s does. MySQL has no ``INSERT ... RETURNING``: it keeps
        ``bulk_create``."""
        connection = cast("MySQLWrapper", connections[self.db])  # the engine of the mysql vendor
        if not connection.mysql_is_mariadb:
            return super().insert_many(jobs, shared)
        with transaction.mark_for_rollback_on_error(self.db):
            enqueue.insert_many(jobs, self.db, varying(self.jobs.model, shared=shared))
        return jobs
