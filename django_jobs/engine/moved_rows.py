"""A fenced write sent once more when PostgreSQL refused it for a row another transaction moved
to another partition (``once_more_if_moved``).

On a table partitioned by shelf (``docs/explanation-history-partitions.md``), a finish moves its
row from the open partition to a day partition. A write that waited on that row (a fenced
write of the same job, the staff's cancel or retry of it) then cannot follow it and gets
``SQLSTATE 40001``, "tuple to be locked (updated, deleted) was already moved to another
partition due to concurrent update", where on a plain table it would have seen the row's new
version and matched nothing. Sent again, the statement sees the moved row and its fence answers:
0 rows. So the engine's fenced writes (the finish and a worker's turn, the heartbeat's lease
extension, progress, release, the rescue) send their transaction once more on that error, and on
that error only (the staff's verbs, which two people may send at once, try a few times:
``engine/staff.py``): any other ``40001`` (a
serialization failure of a ``REPEATABLE READ`` or ``SERIALIZABLE`` transaction) is raised as
before, and the worker waits it out as an outage (``core/db_errors.py``).

Where the wrapper sits: around the verb's whole transaction. When the verb opens the
transaction (the caller is in autocommit, as a worker always is), the error has rolled it all
back, and the verb runs again from its start. When the caller already holds a transaction, the
verb runs in a savepoint, which the error rolls back to, and runs again after it. A savepoint
costs two more round trips, so it is taken only on a database that moves rows
(``moves_rows``): one whose jobs table is partitioned, as the catalog says (read once per
process and database), or on which a statement of this process has met the error (a table
partitioned after that read). On a plain table, which never moves a row, no savepoint is ever
taken. A wrapped verb called by another one (the finish inside a worker's turn, a fenced
write inside the rescue) leaves the retry to the outer one: one retry, of the whole. Only on
PostgreSQL, the one database that moves rows between partitions: elsewhere the verb runs as it
is.

The error is told by its SQLSTATE and its message, PostgreSQL's only mark of it (the server's
messages in English, its default; a server whose ``lc_messages`` translates them gets no retry,
and the worker's outage handling as before).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from django.db import DatabaseError, connections, transaction

from django_jobs.core.database_parts import parts
from django_jobs.core.db_errors import sqlstate

P = ParamSpec("P")
R = TypeVar("R")

# PostgreSQL 11-17's messages for a row moved by a concurrent update (nodeModifyTable.c,
# nodeLockRows.c, heapam_handler.c): locked, updated, deleted, or merged (MERGE, 15+).
MOVED = re.compile(
    r"tuple to be (locked|updated|deleted|merged) was already moved to another partition"
    r" due to concurrent update"
)
SERIALIZATION_FAILURE = "40001"

# The databases (aliases) known to move rows: their jobs table is partitioned, or a statement of
# this process met the error there. A verb in a caller's transaction runs in a savepoint there.
MOVES_ROWS: set[str] = set()
# The databases whose catalog was read for it (``moves_rows``).
_read: set[str] = set()

# The databases on which a wrapped verb is running (the outer one retries, not the inner).
_retrying: ContextVar[frozenset[str]] = ContextVar("django_jobs_moved_rows", default=frozenset())


def moved_row(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL's refusal of a write whose row a concurrent update moved
    to another partition."""
    if not isinstance(exc, DatabaseError) or sqlstate(exc) != SERIALIZATION_FAILURE:
        return False
    diag = getattr(exc.__cause__, "diag", None)
    message = getattr(diag, "message_primary", None) or str(exc.__cause__)
    return MOVED.search(message) is not None


def moves_rows(using: str) -> bool:
    """Whether ``using`` moves rows between partitions: known from an error met there, or from
    the catalog, read once per process and database (a catalog read, in the caller's
    transaction if there is one)."""
    if using not in MOVES_ROWS and using not in _read:
        if parts(using).partitions.partitioned():
            MOVES_ROWS.add(using)
        _read.add(using)
    return using in MOVES_ROWS


def forget(using: str) -> None:
    """Forget what is known of ``using`` (a table partitioned or put back, in the tests)."""
    MOVES_ROWS.discard(using)
    _read.discard(using)


def once_more(using: str, write: Callable[[], R]) -> R:
    """``write()``, sent once more if it raised ``moved_row``'s error (see the module)."""
    connection = connections[using]
    if connection.vendor != "postgresql" or using in _retrying.get():
        return write()
    token = _retrying.set(_retrying.get() | {using})
    try:
        if connection.in_atomic_block and not moves_rows(using):
            try:
                return write()
            except DatabaseError as exc:
                if moved_row(exc):
                    MOVES_ROWS.add(using)
                raise  # the caller's transaction cannot go on
        try:
            if not connection.in_atomic_block:
                return write()  # its own transaction, rolled back by the error
            with transaction.atomic(using=using):  # a savepoint, rolled back to
                return write()
        except DatabaseError as exc:
            if not moved_row(exc):
                raise
            MOVES_ROWS.add(using)
        return write()  # once: what it raises now is raised
    finally:
        _retrying.reset(token)


def outermost(using: str, write: Callable[[], R]) -> R:
    """``write()``, the wrapped verbs it calls on ``using`` leaving a moved row to the caller,
    which handles it for the whole (``moved_claims.apart_if_moved``)."""
    token = _retrying.set(_retrying.get() | {using})
    try:
        return write()
    finally:
        _retrying.reset(token)


class OnDatabase(Protocol):
    db: str


S = TypeVar("S", bound=OnDatabase)


def once_more_if_moved(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """A verb of the engine (on ``self.db``) sent once more as ``once_more`` says."""

    @functools.wraps(method)
    def verb(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return once_more(self.db, lambda: method(self, *args, **kwargs))

    return verb
