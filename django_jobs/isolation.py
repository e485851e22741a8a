"""Poison isolation: when the database refuses a batch of outcomes, write them one by one.

A batch of outcomes is written in one statement (the engine's ``finish``, ``finish_and_claim``).
If the database refuses that statement because of what one outcome holds (a value it cannot
store, a constraint, a trigger), writing the same batch again would fail the same way for ever:
the worker would claim nothing more and the refused job's attempt would never count. So a
refused batch is written outcome by outcome; each outcome the database refuses on its own is
replaced by a failed attempt whose error says so (``OutcomeRefused``), which spends the attempt
like any error, so ``max_attempts`` ends the job. An outage (the connection lost, the server
shutting down, a lock timeout) is not a refusal: those outcomes are kept and written later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import DatabaseError, InterfaceError, OperationalError

from .errors import error_dict
from .models import Job
from .outcomes import AttemptOutcome
from .states import Outcome

logger = logging.getLogger("django_jobs.worker")

# SQLSTATE classes that say the database is away or busy, not that it refused the statement:
# connection exception, transaction rollback (serialization, deadlock), insufficient
# resources, object not in prerequisite state (lock not available), operator intervention
# (shutdown), system error.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})

# MariaDB and MySQL: mysqlclient gives no SQLSTATE, only the server's error number, and raises
# OperationalError for most numbers, a trigger's SIGNAL (1644) included. The numbers that say
# the server is away or busy, as the classes above do: out of memory or threads (1037, 1038,
# 1041, 1135, 1206), too many connections (1040, 1203), a login or handshake refused (1042,
# 1043, 1045, 1129, 1130), shutting down (1053, 1077-1079), the network (1152, 1154-1161), a
# lock wait timeout or deadlock (1205, 1213), read-only during a failover (1290, 1836), a
# statement interrupted or timed out (1317, 1969, 3024), the connection killed (1927) or timed
# out idle (4031). Below 1000 an operating system error; 2000-2999 the client library's own
# (the server gone, the connection lost).
MYSQL_TRANSIENT = frozenset({
    1037, 1038, 1040, 1041, 1042, 1043, 1045, 1053, 1077, 1078, 1079, 1129, 1130, 1135, 1152,
    1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161, 1203, 1205, 1206, 1213, 1290, 1317, 1836,
    1927, 1969, 3024, 4031,
})


def refused(exc: BaseException) -> bool:
    """True if ``exc`` means the database (or the driver, encoding the statement) will not take
    this statement, so that sending it again cannot help; False for an outage."""
    if not isinstance(exc, Exception) or isinstance(exc, InterfaceError):
        return False
    if not isinstance(exc, DatabaseError):
        return True  # the statement could not even be encoded (a value psycopg cannot send)
    cause = exc.__cause__
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if state:
        return state[:2] not in TRANSIENT_CLASSES
    number = mysql_error_number(cause)
    if number is not None:
        server = 1000 <= number < 2000 or number >= 3000  # not the OS's, not the client's
        return server and number not in MYSQL_TRANSIENT
    return not isinstance(exc, OperationalError)  # SQLite's "database is locked", lost links


def mysql_error_number(cause: BaseException | None) -> int | None:
    """The server's or client library's error number of a mysqlclient error, else None."""
    if cause is None or not type(cause).__module__.startswith("MySQLdb"):
        return None
    number = cause.args[0] if cause.args else None
    return number if isinstance(number, int) else None


def finish_isolating(outcomes: Sequence[AttemptOutcome]) -> tuple[list, list]:
    """``Job.objects.finish(outcomes)``, split outcome by outcome if the database refuses it.

    Returns the outcomes written (refused ones replaced by their ``OutcomeRefused`` failure)
    and those left unwritten by an outage, to be written later. Raises what is not a refusal.
    """
    try:
        return Job.objects.finish(outcomes), []
    except Exception as exc:
        if not refused(exc):
            raise
        return finish_one_by_one(outcomes, exc)


def finish_one_by_one(
    outcomes: Sequence[AttemptOutcome], exc: BaseException
) -> tuple[list[AttemptOutcome], list[AttemptOutcome]]:
    """Write each outcome on its own (see the module's docstring); returns (written, unwritten).

    An outcome whose job cannot be written at all, even as ``OutcomeRefused``, is neither:
    it is dropped and logged, and its lease runs out, for the rescue to record."""
    logger.warning("the database refused a batch of %d outcome(s) (%s); writing them one by one",
                   len(outcomes), _describe(exc))
    written: list[AttemptOutcome] = []
    for position, outcome in enumerate(outcomes):
        try:
            written += Job.objects.finish([outcome])
            continue
        except Exception as error:
            if not refused(error):
                return written, list(outcomes[position:])
            substitute, why = refusal(outcome, error), _describe(error)
        try:
            written += Job.objects.finish([substitute])
        except Exception as error:
            if not refused(error):
                return written, list(outcomes[position:])
            logger.error("job %s: the database refused even its OutcomeRefused failure (%s); "
                         "left to the rescue once its lease runs out", outcome.job.public_id,
                         _describe(error))
        else:
            logger.warning("job %s: the database refused its outcome (%s); recorded as a "
                           "failed attempt", outcome.job.public_id, why)
    return written, []


def refusal(outcome: AttemptOutcome, exc: BaseException) -> AttemptOutcome:
    """The failed attempt written in place of an outcome the database refused."""
    job = outcome.job
    job.result = None  # the refused result must not reach a callback or a signal
    substitute = AttemptOutcome(
        job=job, kind=Outcome.FAILED, started_at=outcome.started, finished_at=outcome.finished,
        error=error_dict(
            type="OutcomeRefused",
            message=f"the database refused this job's outcome: {_describe(exc)}",
        ),
        peak_memory=outcome.peak_memory,
    )
    substitute.cpu_ns = outcome.cpu_ns
    return substitute


def _describe(exc: BaseException) -> str:
    """The exception's class and first line, storable (it may quote the refused value)."""
    text = str(exc).strip().splitlines()
    return error_dict(message=f"{exc.__class__.__name__}: {text[0] if text else ''}")["message"]
