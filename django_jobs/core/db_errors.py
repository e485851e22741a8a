"""What a database error says about the statement that raised it.

One table of the servers' error codes, read by the worker (``worker/outage.py``: wait out an
outage, split a batch that timed out, set aside a refused outcome) and by pruning
(``features/retention.py``: a lock conflict between two pruners is neither). PostgreSQL's
errors carry a SQLSTATE; mysqlclient's carry only MariaDB's or MySQL's error number; SQLite's
carry neither.
"""

from __future__ import annotations

from django.db import DatabaseError, InterfaceError, OperationalError

# What a database error says about the statement that raised it (``classify``).
OUTAGE = "outage"  # the database is away, busy or read-only: send it again when it is back
TIMEOUT = "timeout"  # the statement ran out of time or was canceled: an outage, which a
# smaller statement may get past
REFUSAL = "refusal"  # the database will not take this statement: sending it again cannot help

# PostgreSQL: SQLSTATEs by class (their first two characters) or one by one, the code winning
# over its class. Connection exception (08), transaction rollback (40: serialization, deadlock),
# insufficient resources (53), object not in prerequisite state (55: a lock not available),
# operator intervention (57: shutdown 57P01-57P03, a canceled statement), system error (58);
# a read-only transaction (25006: a standby, or a primary demoted during a failover), a session
# ended by its idle or transaction timeout (25P03, 25P04); a statement timeout or cancel (57014).
SQLSTATES: dict[str, str] = {
    "08": OUTAGE, "40": OUTAGE, "53": OUTAGE, "55": OUTAGE, "57": OUTAGE, "58": OUTAGE,
    "25006": OUTAGE, "25P03": OUTAGE, "25P04": OUTAGE, "57014": TIMEOUT,
}
# MariaDB and MySQL: mysqlclient gives no SQLSTATE, only the error number, and raises
# OperationalError for most numbers, a trigger's SIGNAL (1644) included. Out of memory or
# threads (1037, 1038, 1041, 1135, 1206), too many connections (1040, 1203), a login or
# handshake refused (1042, 1043, 1045, 1129, 1130), shutting down (1053, 1077-1079), the network
# (1152, 1154-1161), a lock wait timeout or deadlock (1205, 1213), read-only (1290 under
# --read-only, 1792 in a read-only transaction, 1836 on a replica), the connection killed
# (1927) or timed out idle (4031); a statement interrupted (1317: KILL QUERY) or past
# max_statement_time (1969) or MySQL's max_execution_time (3024). Numbers below 1000 are the
# operating system's and 2000-2999 the client library's own (2006, 2013: the server gone, the
# connection lost): outages, as are all numbers not listed here that a server does not send.
MYSQL_ERRORS: dict[int, str] = {
    **dict.fromkeys((
        1037, 1038, 1040, 1041, 1042, 1043, 1045, 1053, 1077, 1078, 1079, 1129, 1130, 1135,
        1152, 1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161, 1203, 1205, 1206, 1213, 1290,
        1792, 1836, 1927, 4031,
    ), OUTAGE),
    **dict.fromkeys((1317, 1969, 3024), TIMEOUT),
}


def classify(exc: BaseException) -> str:
    """OUTAGE, TIMEOUT or REFUSAL: what ``exc``, raised by a statement, says about sending that
    statement again (see the module's docstring and the tables above)."""
    if not isinstance(exc, Exception) or isinstance(exc, InterfaceError):
        return OUTAGE  # a stop, or the connection unusable
    if not isinstance(exc, DatabaseError):
        return REFUSAL  # the statement could not even be encoded (a value psycopg cannot send)
    state = sqlstate(exc)
    if state is not None:
        return _by_sqlstate(state)
    number = mysql_error_number(exc.__cause__)
    if number is not None:
        return _by_mysql_number(number)
    # No code: SQLite's "database is locked" and lost links are OperationalErrors.
    return OUTAGE if isinstance(exc, OperationalError) else REFUSAL


def _by_sqlstate(state: str) -> str:
    """PostgreSQL's SQLSTATE: the code's own entry, else its class's, else a refusal."""
    return SQLSTATES.get(state) or SQLSTATES.get(state[:2]) or REFUSAL


def _by_mysql_number(number: int) -> str:
    """MariaDB's or MySQL's error number: its entry, else a refusal if the server sent it, an
    outage if the operating system or the client library did."""
    server = 1000 <= number < 2000 or number >= 3000  # not the OS's, not the client's
    return MYSQL_ERRORS.get(number, REFUSAL if server else OUTAGE)


def mysql_error_number(cause: BaseException | None) -> int | None:
    """The server's or client library's error number of a mysqlclient error, else None."""
    if cause is None or not type(cause).__module__.startswith("MySQLdb"):
        return None
    number = cause.args[0] if cause.args else None
    return number if isinstance(number, int) else None


# A deadlock or lock wait timeout: PostgreSQL's SQLSTATEs, MariaDB's and MySQL's error numbers.
LOCK_CONFLICT_STATES = ("40P01", "55P03")
LOCK_CONFLICT_NUMBERS = (1205, 1213)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a PostgreSQL error Django wrapped, else None."""
    cause = exc.__cause__
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    return state if isinstance(state, str) and state else None


def lock_conflict(exc: DatabaseError) -> bool:
    """Whether ``exc`` is a deadlock or lock wait timeout, which ended its transaction with
    nothing written."""
    state = sqlstate(exc)
    if state is not None:
        return state in LOCK_CONFLICT_STATES
    return mysql_error_number(exc.__cause__) in LOCK_CONFLICT_NUMBERS
