"""Whether a PostgreSQL connection keeps its session: reached directly, through a session
pooler, or through a transaction pooler (PgBouncer's ``pool_mode = transaction``, the pooled
endpoint of most hosted PostgreSQL offers).

Prepared statements and LISTEN belong to a server session. A transaction pooler hands each
transaction to whichever server connection is free, so a statement prepared in one transaction
is missing in the next, or another client's statement of the same name is already there
(``prepared statement "_pg3_0" already exists``), and notifications go to a session nobody
listens on. With ``PREPARED_STATEMENTS`` left at ``None`` django-jobs finds out on its own:

- A pooler answers the login with its own cancel key, so the process id the client read at
  login (``info.backend_pid``) is not the server's ``pg_backend_pid()``. One query per process
  and database tells a direct connection from a pooled one.
- Behind a pooler the session counts as kept only once a worker's listener has received its own
  test notification (``engine/postgres/listener.py``): that happens in session pooling, never in
  transaction pooling. Until then statements are sent unprepared.
- Should a pooler pass the server's process id through, the first prepared-statement error
  turns preparing off for the process.

``True`` prepares whatever the connection (a pooler that keeps prepared statements, such as
PgBouncer 1.21+ with ``max_prepared_statements``); ``False`` never prepares.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_jobs.core.settings import jobs_settings

if TYPE_CHECKING:
    import psycopg
    from django.db.backends.base.base import BaseDatabaseWrapper
    from psycopg.rows import TupleRow

logger = logging.getLogger("django_jobs.pooler")

# SQLSTATEs of a prepared statement the server session does not hold as the client expects.
PREPARED_STATEMENT_ERRORS = frozenset({
    "42P05",  # duplicate_prepared_statement: another client's statement of that name
    "26000",  # invalid_sql_statement_name: prepared on a server connection since handed on
})


@dataclass
class Route:
    """What is known of the way one database (host, port, name, user) is reached."""

    pooled: bool | None = None  # None: not looked yet
    sessions_kept: bool | None = None  # behind a pooler: known from a listener's test
    prepare_failed: bool = False  # a prepared-statement error was seen


_routes: dict[tuple[object, ...], Route] = {}  # setdefault is atomic: no lock needed
# Counts changes to what is known of any route: a connection's cursor, made under an older
# count, is made again (pgcursor), while the hot path compares one integer.
generation = 0


def _changed() -> None:
    global generation
    generation += 1


def route(connection: BaseDatabaseWrapper) -> Route:
    """The route of a Django connection's database, shared by every connection of the process."""
    settings = connection.settings_dict
    key = (settings.get("HOST"), settings.get("PORT"), settings.get("NAME"), settings.get("USER"))
    return _routes.get(key) or _routes.setdefault(key, Route())


def prepares(connection: BaseDatabaseWrapper, raw: psycopg.Connection[TupleRow]) -> bool:
    """Whether statements on this connection (its open psycopg connection ``raw``) should be
    prepared on the server."""
    setting = jobs_settings.PREPARED_STATEMENTS
    if setting is not None:
        return bool(setting)
    found = route(connection)
    if found.prepare_failed:
        return False
    if found.pooled is None:
        found.pooled = is_pooled(connection, raw)
        _changed()
        if found.pooled and found.sessions_kept:  # a listener found out first
            logger.info("database %s is reached through a connection pooler; the pooler keeps "
                        "sessions: statements are prepared", connection.alias)
        elif found.pooled:
            logger.info(
                "database %s is reached through a connection pooler: statements are sent "
                "unprepared unless the pooler keeps sessions", connection.alias,
            )
    return not found.pooled or found.sessions_kept is True


def keeps_session(connection: BaseDatabaseWrapper, raw: psycopg.Connection[TupleRow]) -> bool:
    """Whether a setting of this connection's server session stays with this connection alone:
    reached directly, or through a pooler a listener found to keep sessions. Whatever
    ``PREPARED_STATEMENTS`` says: a transaction pooler that keeps prepared statements (PgBouncer's
    ``max_prepared_statements``) still hands a session's settings on to other clients."""
    found = route(connection)
    if found.pooled is None:
        found.pooled = is_pooled(connection, raw)
        _changed()
    return not found.pooled or found.sessions_kept is True


def is_pooled(connection: BaseDatabaseWrapper, raw: psycopg.Connection[TupleRow]) -> bool:
    """True if the server process behind ``raw`` is not the one the login named: a pooler."""
    with connection.wrap_database_errors, raw.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        (server_pid,) = cur.fetchone()  # type: ignore[misc]  # one row: never None
    return server_pid != raw.info.backend_pid


def note_notifications(connection: BaseDatabaseWrapper, arrived: bool) -> None:
    """A listener's test notification arrived (the pooler, if any, keeps sessions) or not."""
    found = route(connection)
    found.sessions_kept = arrived
    _changed()
    if arrived and found.pooled:
        logger.info("database %s: the pooler keeps sessions; statements are prepared",
                    connection.alias)


def note_error(connection: BaseDatabaseWrapper, exc: BaseException) -> None:
    """After a failed statement: if the server lost or already held a prepared statement,
    prepare nothing more in this process (unless ``PREPARED_STATEMENTS`` says to)."""
    cause = exc.__cause__ or exc
    if getattr(cause, "sqlstate", None) not in PREPARED_STATEMENT_ERRORS:
        return
    if jobs_settings.PREPARED_STATEMENTS is not None:
        return
    found = route(connection)
    if not found.prepare_failed:
        found.prepare_failed = True
        _changed()
        logger.warning(
            "database %s does not keep prepared statements (%s): sending statements "
            "unprepared from now on", connection.alias, str(cause).splitlines()[0],
        )
