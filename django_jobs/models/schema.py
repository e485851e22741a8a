"""Is the database migrated for django-jobs? One clear answer for commands and system checks.

A command run against a database whose ``django_jobs`` migrations have not been applied would
otherwise fail deep inside its first query with a long traceback about a missing table.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router
from django.db.migrations.executor import MigrationExecutor

APP_LABEL = "django_jobs"
RUN_MIGRATE = "run `manage.py migrate`"


class NotMigrated(Exception):
    """The jobs tables are missing or behind the code: run ``manage.py migrate``.

    ``reason`` says what is wrong and ``hint`` what to do (None when no command would help);
    the message is both on one line, for a ``CommandError``."""

    def __init__(self, reason: str, hint: str | None = RUN_MIGRATE) -> None:
        super().__init__(f"{reason}: {hint}" if hint else reason)
        self.reason = reason
        self.hint = hint


class Unreachable(NotMigrated):
    """The database could not be asked (down, refusing logins, a wrong address)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, hint=None)


def jobs_database() -> str:
    """The alias the jobs live on: where the site's routers write ``Job``
    (``router.db_for_write``; ``default`` without routers).

    Every read and write of the app goes there (the managers' ``RoutedQuerySet``), and so do
    the worker's connection handling, its LISTEN connection and the commands' checks; a router
    that sends reads to a replica is not asked where jobs are read. The one exception is the
    replica a site names in ``READ_REPLICA`` for the admin's and the API's lists and counts
    (``engine/read_replica.py``)."""
    from django_jobs.models import Job

    return router.db_for_write(Job)


def migrate_hint(using: str) -> str:
    """What to run to migrate ``using``: ``migrate`` names an alias other than ``default``."""
    if using == DEFAULT_DB_ALIAS:
        return RUN_MIGRATE
    return f"run `manage.py migrate --database={using}`"


def unapplied_migrations(using: str) -> list[str]:
    """The ``django_jobs`` migrations (and what they depend on) not yet applied on ``using``."""
    executor = MigrationExecutor(connections[using])
    targets = [node for node in executor.loader.graph.leaf_nodes() if node[0] == APP_LABEL]
    plan = executor.migration_plan(targets)
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan
            if not backwards]


def require_migrated(using: str | None = None) -> None:
    """Raise NotMigrated with a one-line reason unless the jobs tables are ready (Unreachable
    if the database could not be asked)."""
    using = using or jobs_database()
    try:
        missing = unapplied_migrations(using)
    except DatabaseError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unreachable(f"cannot read database {using!r}: {first_line}") from None
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise NotMigrated(f"database {using!r} is not migrated for django-jobs ({shown} not "
                          f"applied)", hint=migrate_hint(using))


def problem(using: str | None = None) -> NotMigrated | None:
    """Why the jobs tables cannot be used on ``using``, or None if they can."""
    try:
        require_migrated(using)
    except NotMigrated as exc:
        return exc
    return None
