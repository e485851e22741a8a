"""The exceptions django-jobs raises, and the ones handlers raise to steer it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db.transaction import TransactionManagementError

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome


class InvalidJob(ValidationError, ValueError):
    """Bad arguments to ``Job.enqueue``; ``message_dict`` names each bad field."""


class UnknownJobType(InvalidJob):
    """No handler is registered under the job's type."""


class PermanentError(Exception):
    """Raised by a handler: the job cannot succeed, so it goes dead without retry."""


class InvalidResult(PermanentError):
    """A handler returned what a job cannot hold as its result (not JSON, a NUL, too big).

    Permanent: the handler's work is done, and running it again would repeat that work only to
    return the same kind of value. The job goes dead with this error for a person to look at.
    """


class JobTimeout(Exception):
    """Raised inside a handler that ran past its timeout."""

    def __init__(self, message: str = "the handler ran past its timeout") -> None:
        # The worker raises the bare class in the handler's thread: give it a message.
        super().__init__(message)


class JobCanceled(Exception):
    """Raised inside a handler whose job was canceled while it ran."""


class WorkerLost(Exception):
    """Recorded for an attempt whose worker stopped heartbeating (killed, lost power)."""


class Snooze(Exception):
    """Raised by a handler: run the job again in ``seconds``, without spending the attempt."""

    def __init__(self, seconds: float = 60.0) -> None:
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or \
                not 0 <= seconds <= 366 * 86400:
            raise ValueError(f"Snooze needs 0 to 366 days in seconds, not {seconds!r}")
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = float(seconds)


class DependencyUnavailable(LookupError):
    """``dependency_results()[key]`` of a dependency that has no result: it went dead or was
    canceled (a dependent whose policy runs it anyway), or it was deleted (pruned) after it
    completed."""


class ClaimConflict(Exception):
    """A claim that met, on each of its tries, a row another worker claimed and finished since
    the claim's statement began (on PostgreSQL's partitioned jobs table, a row moved to another
    partition: ``engine/moved_claims.py``). Not an outage: the database is there and other
    workers are taking the jobs, so a worker claims again on its next turn. ``written``: the
    outcomes the same turn wrote before its claim (a worker's ``finish_and_claim``)."""

    def __init__(self, tries: int) -> None:
        super().__init__(f"the claim met a row moved under it on each of its {tries} tries")
        self.tries = tries
        self.written: list[AttemptOutcome] = []


class JobConflict(Exception):
    """A staff action (retry, cancel, run now, a payload's edit, a delete) met another action
    or a worker writing the same jobs at the same moment (a deadlock, a lock wait that ran out,
    a row moved again under it) and changed nothing. Not an error of the request: trying again
    acts on the jobs as they are now. The API answers it with 409, the admin with a message,
    ``manage.py jobs`` with a ``CommandError``."""


class WorkflowMismatch(PermanentError):
    """A workflow's replay met a step other than the one its history holds at that place (its
    code changed under it, or it is not deterministic): the workflow goes dead, naming the
    first mismatch, and is never retried blindly."""


class WorkflowFinished(Exception):
    """``send_event`` to a workflow that has ended (completed, dead or canceled): no wait of
    its will ever take the event."""


class StepLeaseLost(Exception):
    """A workflow step's checkpoint refused: the run no longer holds its job's lease (another
    worker took it over), so the step's transaction is rolled back and the run ends."""


class EventTimeout(TimeoutError):
    """``wait_for(name, timeout=...)`` whose deadline came before an event of that name."""


class JobFailed(Exception):
    """Raised by ``Job.wait`` and ``Job.await_result`` for a job that ended without a result:
    dead (its attempts spent, or a permanent error) or canceled. Carries what the job stored
    of its error: ``error_type`` (the exception's class name), ``error_message``,
    ``traceback`` (the handler's traceback as text), ``details``; ``status`` is ``dead`` or
    ``canceled`` and ``job`` the job as it ended."""

    def __init__(self, job: object, status: str, error: dict | None) -> None:
        error = error or {}
        self.job, self.status = job, status
        self.error_type = str(error.get("type") or "")
        self.error_message = str(error.get("message") or "")
        self.traceback = str(error.get("traceback") or "")
        self.details = error.get("details") or {}
        what = f"{self.error_type}: {self.error_message}" if self.error_type else "no error"
        super().__init__(f"job {getattr(job, 'public_id', job)} is {status} ({what})")


class WaitTimeout(TimeoutError):
    """``Job.wait`` or ``Job.await_result`` gave up: the job had not ended within ``timeout``
    seconds. The job goes on; wait again, or read it later."""


class WaitInTransaction(TransactionManagementError):
    """``Job.wait`` was called inside a transaction on the job's database. A job enqueued in
    that transaction is not visible to any worker until it commits, so the wait could only
    time out; and a transaction's snapshot (REPEATABLE READ, MariaDB's default) may never show
    the job's end. Wait after the commit (``transaction.on_commit``, or outside ``atomic``)."""
