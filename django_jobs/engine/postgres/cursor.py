"""How django-jobs talks to PostgreSQL on its hot paths: server-side parameters, statements
prepared once per connection, timestamps loaded in C. Used by the engine's PostgreSQL modules
(``engine/postgres/engine.py``, ``engine/postgres/enqueue.py``) only.

psycopg is imported only here and only when a PostgreSQL statement runs, so a site without it
(SQLite only) can import django-jobs. Under psycopg2 the statements run on Django's own
cursor, bound on the client: the same statements, without the server-side parameters and the
prepared statements.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeAlias

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from django_jobs.engine.postgres import pooler

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

# A statement's parameters: psycopg adapts more (lists, UUIDs, JSON text) than the stubs' union
# of parameter types names.
Params: TypeAlias = Any


def run(connection: BaseDatabaseWrapper, sql: str, params: Params) -> list[tuple]:
    """Execute one statement on Django's connection, binding its parameters on the server,
    and return its rows.

    Django's psycopg cursors bind on the client unless the site sets ``server_side_binding``:
    psycopg quotes every value into the statement's text, and PostgreSQL then lexes, parses
    and plans the statement, a large JSON literal among it, on every call. Sent as parameters
    to a statement prepared once per connection (``PREPARED_STATEMENTS``), the claim and the
    finish cost the server about 40% less and the client a quarter less
    (``docs/explanation-performance.md``). Same connection, same transaction; Django's wrapper still
    translates errors and records the query when queries are logged.
    """
    if not _psycopg3(connection):
        return run_on_django_cursor(connection, sql, params)
    cur = _cursor(connection)
    try:
        if connection.queries_logged or connection.execute_wrappers:
            wrapped = LoggedCursor(cur, connection) if connection.queries_logged else (
                CursorWrapper(cur, connection)
            )
            wrapped.execute(sql, params)
            return wrapped.fetchall()
        # What CursorWrapper does when nothing is logged and no execute_wrapper is installed,
        # without building a wrapper and a wrapped fetchall per statement (a third of the
        # client's time for a small statement).
        connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            cur.execute(sql, params)
            return cur.fetchall()
    except DatabaseError as exc:
        pooler.note_error(connection, exc)  # a pooler that keeps no prepared statements
        raise


def run_on_django_cursor(connection: BaseDatabaseWrapper, sql: str, params: Params) -> list[tuple]:
    """The same statement on Django's cursor (psycopg2, or anything but psycopg 3)."""
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _psycopg3(connection: BaseDatabaseWrapper) -> bool:
    """True if Django's PostgreSQL backend runs on psycopg 3 (it prefers it to psycopg2)."""
    return _is_psycopg3()


@functools.cache
def _is_psycopg3() -> bool:
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3


def _cursor(connection: BaseDatabaseWrapper) -> psycopg.Cursor[TupleRow]:
    """This connection's psycopg cursor for our statements, made once per connection (making
    one, with its own adapters, cost more than a small INSERT's client work), and again if
    whether to prepare changes (``pooler``)."""
    if connection.connection is None:
        connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = connection.connection
    held = getattr(connection, "_django_jobs_cursor", None)
    if held is not None and held.connection is raw and not held.closed and (
        connection._django_jobs_generation == pooler.generation  # type: ignore[attr-defined]
    ):
        return held
    while True:  # the count read first: a change made meanwhile remakes it next time
        generation = pooler.generation
        prepare = pooler.prepares(connection, raw)
        if generation == pooler.generation:  # else this call found out first: once more
            break
    psycopg = _psycopg()
    factory = psycopg.PlainCursor
    if prepare:
        factory = psycopg.PreparingCursor
        if raw.prepare_threshold is None:
            # Django's default, which turns preparing off even when asked for. A threshold
            # no statement reaches prepares only what asks (ours); Django's own cursors bind
            # on the client and never prepare either way.
            raw.prepare_threshold = ONLY_WHEN_ASKED
        if raw.prepared_max is not None and raw.prepared_max < PREPARED_ROOM:
            # The claim and the turn are prepared once per LIMIT (1 to --concurrency): with
            # psycopg's default room for 100, a worker of --concurrency 50 or more would evict
            # and re-plan them in turn.
            raw.prepared_max = PREPARED_ROOM
    with connection.wrap_database_errors:
        cur = factory(raw)
        if prepare and getattr(connection, "_django_jobs_generic_plans", False) and \
                pooler.keeps_session(connection, raw):
            cur.execute(GENERIC_PLANS, prepare=False)
    if connection.timezone is not None:
        # Django loads timestamps with a Python subclass of psycopg's loader, to give them
        # its time zone; with USE_TZ that is the session's own, which psycopg's C loader
        # gives as well, at a tenth of the cost (a claim reads several per job).
        cur.adapters.register_loader("timestamptz", psycopg.timestamptz_loader)
    # Kept on Django's wrapper, which the stubs do not know to hold them.
    connection._django_jobs_cursor = cur  # type: ignore[attr-defined]
    connection._django_jobs_generation = generation  # type: ignore[attr-defined]
    return cur


def keep_generic_plans(connection: BaseDatabaseWrapper, keep: bool = True) -> None:
    """Run the statements this connection prepares on their generic plans, planned once, from
    its next cursor on, through its reconnections; ``keep=False`` stops asking for it (the
    session keeps the setting until it ends).

    PostgreSQL plans a prepared statement's first five runs for their values, then keeps the
    generic plan only while it costs no more than those did. After autovacuum analyzes the open
    partition the turn's generic plan costs more on paper, so every turn was planned again: 1.0
    to 1.15 ms of planning per turn, more than running it, and the turns' planning grew from
    under 2% to 31% of the server's statement time within minutes of a sustained run
    (``docs/explanation-performance.md``). The generic plans are the ones the engine's
    statements are written and tested for (``tests/engine/test_claim_plans.py``,
    ``test_turn_plans.py``, ``test_indexes.py``).

    ``plan_cache_mode`` is a setting of the server session, so it reaches every prepared
    statement and PL/pgSQL function the session runs: the worker sets it on the connection of
    its loop, which runs django-jobs' own statements (handlers run on their slots' connections),
    never on a connection a site's own code is known to share. It is sent when the cursor that
    prepares is made, and only on a connection that keeps its session
    (``pooler.keeps_session``): through a transaction pooler a session setting would stay on a
    server connection other clients get, even one that keeps prepared statements
    (``PREPARED_STATEMENTS = True``)."""
    connection._django_jobs_generic_plans = keep  # type: ignore[attr-defined]
    connection._django_jobs_cursor = None  # type: ignore[attr-defined]  # made again, to send it


# Sent in the connection's transaction, if it is in one: a rollback of that transaction takes
# it back, and the plans are then chosen as PostgreSQL's default does until the next cursor.
GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"


class LoggedCursor(CursorDebugWrapper):
    """Records the statement as written: a prepared statement has no text with its values,
    which is what Django's wrapper would look for."""

    # Django's signature, passed through (the stubs type the statement and its result loosely).
    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


ONLY_WHEN_ASKED = 2**31 - 1
PREPARED_ROOM = 1000


@functools.cache
def _psycopg() -> SimpleNamespace:
    """The psycopg cursor classes and the timestamp loader this module uses."""
    import psycopg

    # The overrides pass psycopg's arguments through, whatever they are, adding one.
    class PreparingCursor(psycopg.Cursor):
        """Binds on the server and prepares each statement on its first run."""

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", True)
            return super().execute(query, params, **kwargs)

    class PlainCursor(psycopg.Cursor):
        """Binds on the server and never prepares, nor runs a statement this connection
        prepared before preparing was turned off (``pooler``)."""

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", False)
            return super().execute(query, params, **kwargs)

    return SimpleNamespace(
        PlainCursor=PlainCursor,
        PreparingCursor=PreparingCursor,
        timestamptz_loader=psycopg.adapters.get_loader(
            psycopg.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT
        ),
    )
