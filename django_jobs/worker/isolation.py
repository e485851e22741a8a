"""Poison isolation: when the database refuses a batch of outcomes, write them one by one.

A batch of outcomes is written in one statement (the engine's ``finish``, ``finish_and_claim``).
If the database refuses that statement because of what one outcome holds (a value it cannot
store, a constraint, a trigger), writing the same batch again would fail the same way for ever:
the worker would claim nothing more and the refused job's attempt would never count. So a
refused batch is written outcome by outcome; each outcome the database refuses on its own is
replaced by a failed attempt whose error says so (``OutcomeRefused``), which spends the attempt
like any error, so ``max_attempts`` ends the job. An outage (the connection lost, the server
shutting down or read-only, a lock or statement timeout) is not a refusal: those outcomes are
kept and written later (``outage.classify`` tells them apart).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django_jobs.core.db_errors import REFUSAL, classify
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.states import Outcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job
from django_jobs.worker.log_lines import level_for

logger = logging.getLogger("django_jobs.worker")


def refused(exc: BaseException) -> bool:
    """True if ``exc`` means the database (or the driver, encoding the statement) will not take
    this statement, so that sending it again cannot help; False for an outage or a timeout
    (``outage.classify``)."""
    return classify(exc) is REFUSAL


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
                   len(outcomes), describe(exc))
    written: list[AttemptOutcome] = []
    for position, outcome in enumerate(outcomes):
        try:
            written += Job.objects.finish([outcome])
            continue
        except Exception as error:
            if not refused(error):
                return written, list(outcomes[position:])
            substitute, why, refusal_error = refusal(outcome, error), describe(error), error
        try:
            written += Job.objects.finish([substitute])
        except Exception as error:
            if not refused(error):
                return written, list(outcomes[position:])
            logger.error("job %s: the database refused even its OutcomeRefused failure (%s); "
                         "left to the rescue once its lease runs out", outcome.job.public_id,
                         describe(error))
        else:
            job = outcome.job
            logger.log(
                level_for("refused"), "job %s: the database refused its outcome (%s); "
                "recorded as a failed attempt", job.public_id, why,
                exc_info=(type(refusal_error), refusal_error, refusal_error.__traceback__),
                extra={"job_id": job.public_id, "job_type": job.type, "job_queue": job.queue,
                       "attempt": job.attempt, "event": "outcome_refused", "reason": why,
                       "next": "recorded as a failed attempt"})
    return written, []


def refusal(outcome: AttemptOutcome, exc: BaseException) -> AttemptOutcome:
    """The failed attempt written in place of an outcome the database refused."""
    substitute = failure_in_place(outcome, "OutcomeRefused",
                                  f"the database refused this job's outcome: {describe(exc)}")
    substitute.exception = exc
    return substitute


def failure_in_place(outcome: AttemptOutcome, type: str, message: str) -> AttemptOutcome:
    """A failed attempt, with this error, to be written in place of ``outcome``: small to
    write, whatever the outcome held."""
    job = outcome.job
    job.result = None  # the unwritten result must not reach a callback or a signal
    substitute = AttemptOutcome(
        job=job, kind=Outcome.FAILED, started_at=outcome.started, finished_at=outcome.finished,
        error=error_dict(type=type, message=message), peak_memory=outcome.peak_memory,
    )
    substitute.cpu_ns = outcome.cpu_ns
    return substitute


def describe(exc: BaseException) -> str:
    """The exception's class and first line, storable (it may quote the refused value)."""
    text = str(exc).strip().splitlines()
    return error_dict(message=f"{exc.__class__.__name__}: {text[0] if text else ''}")["message"]
