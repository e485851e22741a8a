"""Is the database migrated for django-jobs? One clear answer for commands and system checks.

A command run against a database whose ``django_jobs`` migrations have not been applied would
otherwise fail deep inside its first query with a long traceback about a missing table.
"""

from __future__ import annotations

from django.db import DatabaseError, connections, router
from django.db.migrations.executor import MigrationExecutor

APP_LABEL = "django_jobs"


class NotMigrated(Exception):
    """The jobs tables are missing or behind the code: run ``manage.py migrate``."""


def jobs_database() -> str:
    """The alias jobs are written to (the site's routers may move them off ``default``)."""
    from .models import Job

    return router.db_for_write(Job)


def unapplied_migrations(using: str) -> list[str]:
    """The ``django_jobs`` migrations (and what they depend on) not yet applied on ``using``."""
    executor = MigrationExecutor(connections[using])
    targets = [node for node in executor.loader.graph.leaf_nodes() if node[0] == APP_LABEL]
    plan = executor.migration_plan(targets)
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan
            if not backwards]


def problem(using: str | None = None) -> str | None:
    """One line saying why the jobs tables cannot be used on ``using``, or None if they can."""
    using = using or jobs_database()
    try:
        missing = unapplied_migrations(using)
    except DatabaseError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"cannot read database {using!r}: {first_line}"
    if not missing:
        return None
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (f"database {using!r} is not migrated for django-jobs ({shown} not applied): "
            f"run `manage.py migrate`")


def require_migrated(using: str | None = None) -> None:
    """Raise NotMigrated with a one-line reason unless the jobs tables are ready."""
    reason = problem(using)
    if reason is not None:
        raise NotMigrated(reason)
