"""The engine: the only code that writes jobs, as named verbs on one object per database.

``engine_for(using)`` gives the database's engine (``core/contract.engine``, which keeps one per
database, made by ``make_engine``), its class chosen once from the connection's vendor:
``PostgresEngine`` (``engine/postgres/engine.py``: hand-written statements for enqueue, claim,
finish and the turn), or the portable ORM implementation
(``engine/verbs.py``, ``engine/staff.py``) with the claim of ``engine/portable.py``: row locks
on MariaDB, none on SQLite. Its parts that know no database are the transition an outcome
makes (``transition``) and what the writes put in the rows (``writes``).

``parts_for(using)`` gives what the worker, the admin, the API and retention need of the
database beyond the verbs (``DatabaseParts`` of ``core/database_parts.py``): PostgreSQL's
(``engine/postgres/parts.py``), or ``NO_PARTS`` elsewhere; the app's ``ready()`` installs it
in ``core/database_parts.py``, where everyone finds it (``parts(using)``). This module is the one
outside ``engine/postgres/`` and ``engine/mariadb/`` that imports them.

The store (``models/jobs.py``, ``models/managers.py``) does not import this package: the app's
``ready()`` hands ``make_engine`` to ``core/contract.py``, where the store's verbs find the
engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.db import connections

from django_jobs.core import contract
from django_jobs.core.database_parts import NO_PARTS, DatabaseParts

if TYPE_CHECKING:
    from django_jobs.engine.verbs import Engine

_parts: dict[str, DatabaseParts] = {}


def engine_for(using: str) -> Engine:
    """The engine of database ``using`` (``contract.engine``), typed as the engine's class:
    for the features, which call its verbs beyond the store's."""
    return cast("Engine", contract.engine(using))


def make_engine(using: str) -> Engine:
    """A new engine of database ``using`` (``contract.engine`` keeps it)."""
    return _engine_class(using)(using)


def parts_for(using: str) -> DatabaseParts:
    """The parts of database ``using`` beyond the verbs, made on first use and kept."""
    found = _parts.get(using)
    if found is None:
        if connections[using].vendor == "postgresql":
            from django_jobs.engine.postgres.parts import parts

            found = parts(using)
        else:
            found = NO_PARTS
        _parts[using] = found
    return found


def load_engines() -> None:
    """Import the engine modules the configured databases will use (at start-up, from the
    app's ``ready``), so that the first enqueue or claim of a process does not pay for them.
    Reads each alias's vendor only: no connection is opened."""
    vendors = {connections[alias].vendor for alias in connections}
    if "postgresql" in vendors:
        from django_jobs.engine.postgres import engine as postgres  # noqa: F401
    if "mysql" in vendors:
        from django_jobs.engine.mariadb import engine as mariadb  # noqa: F401
    if vendors - {"postgresql"}:
        from django_jobs.engine import portable  # noqa: F401


def _engine_class(using: str) -> type[Engine]:
    connection = connections[using]
    if connection.vendor == "postgresql":
        from django_jobs.engine.postgres.engine import PostgresEngine

        return PostgresEngine
    from django_jobs.engine.portable import RowLockEngine, WithoutRowLocksEngine

    if connection.vendor == "mysql":
        from django_jobs.engine.mariadb.engine import MariaDBEngine

        return MariaDBEngine
    if connection.features.has_select_for_update_skip_locked:
        return RowLockEngine
    return WithoutRowLocksEngine
