"""A claim whose statement meets a row that another worker claimed and finished (moved to a day
partition) after the statement took its snapshot and before it locked the row: PostgreSQL
refuses the statement (``40001``), and the engine sends it again or raises ``ClaimConflict``,
a worker's turn writing its outcomes apart from its claim (``engine/moved_claims.py``); the
worker claims again, with no outage.

The claim is paused at that row (``paused_claims``, ``tests/partitioned.py``): its statement
has read the job as ready and waits there while this connection, another worker, claims and
finishes the job; let go, it locks the row it read, whose newer version has left the open
partition."""

import logging
import uuid
from collections.abc import Callable

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from django_jobs.core.contract import ClaimKey, ClaimRequest, engine
from django_jobs.core.db_errors import sqlstate
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.states import COMPLETED, PENDING, PROCESSING
from django_jobs.exceptions import ClaimConflict
from django_jobs.models import Job
from tests.conftest import requires_postgres
from tests.helpers import claim, run_burst
from tests.partitioned import day_partition, partition_of, partitioned_jobs_table, paused_claims

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

MOVED = "tuple to be locked was already moved to another partition due to concurrent update"


@pytest.fixture
def partitioned_jobs():
    with partitioned_jobs_table():
        yield


def completed(job: Job) -> AttemptOutcome:
    now = timezone.now()
    return AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)


def request(worker_id: str, limit: int, after: Job | None = None) -> ClaimRequest:
    """A claim's request; ``after``: the job the worker's last claim ended with (its key)."""
    key = None if after is None else ClaimKey(after.priority, after.run_at, after.pk)
    return ClaimRequest(worker_id=worker_id, limit=limit, lease_seconds=30,
                        lease_token=uuid.uuid4(), after=key)


def claimed_and_finished(job: Job) -> None:
    """``job``, the first in claim order, claimed and finished by another worker: its row moves
    to a day partition."""
    (taken,) = claim(1, worker_id="a")
    assert taken.pk == job.pk
    assert Job.objects.finish([completed(taken)])
    assert partition_of(job) == day_partition(job)


def recorded(work: Callable[[], object], sent: list[str]) -> Callable[[], object]:
    """``work``, with the engine's statements it sends named in ``sent``."""
    def kind(sql: str) -> str:
        if "claimed AS (" in sql:
            return "turn"
        return "claim" if sql.startswith("UPDATE") else "finish"

    def record(execute, sql, params, many, context):
        sent.append(kind(sql))
        return execute(sql, params, many, context)

    def recording() -> object:
        with connection.execute_wrapper(record):
            return work()

    return recording


def test_a_claim_after_a_key_that_meets_a_moved_row_is_sent_again_and_takes_the_next_job(
    partitioned_jobs
):
    Job.enqueue("noop")
    (own,) = claim(1, worker_id="b")
    moved, other = Job.enqueue("noop"), Job.enqueue("noop")  # after own's key, in this order
    sent: list[str] = []

    with paused_claims(moved) as pause:
        pause.start(recorded(
            lambda: engine(connection.alias).claim(request("b", 2, after=own)), sent))
        claimed_and_finished(moved)
        taken = pause.resume()

    assert [job.pk for job in taken] == [other.pk]
    assert sent == ["claim", "claim"]  # the second with a snapshot in which moved is finished
    assert Job.objects.get(pk=moved.pk).worker_id == "a"
    assert (Job.objects.get(pk=other.pk).status, Job.objects.get(pk=other.pk).worker_id) == (
        PROCESSING, "b")


def test_a_claim_from_the_start_that_meets_a_moved_row_raises_claim_conflict_taking_nothing(
    partitioned_jobs
):
    """Tried once (``CLAIM_TRIES``): a claim from the start walks furthest under a long-open
    snapshot, and its worker's next claim reads after its key."""
    moved = Job.enqueue("noop", priority="high")  # first in claim order
    other = Job.enqueue("noop")
    sent: list[str] = []

    with paused_claims(moved) as pause:
        pause.start(recorded(lambda: engine(connection.alias).claim(request("b", 2)), sent))
        claimed_and_finished(moved)
        with pytest.raises(ClaimConflict) as raised:
            pause.resume()

    assert isinstance(raised.value.__cause__, OperationalError)
    assert sqlstate(raised.value.__cause__) == "40001"
    assert MOVED in str(raised.value.__cause__)
    assert raised.value.written == []
    assert sent == ["claim"]
    assert Job.objects.get(pk=other.pk).status == PENDING  # its lock went with the statement


def test_a_turn_that_meets_a_moved_row_writes_its_outcome_apart_and_claims_again(
    partitioned_jobs
):
    """The worker's turn (its outcome written and its next jobs claimed in one statement) is
    refused whole; its outcome is then written alone, and its claim sent alone."""
    Job.enqueue("noop")
    (own,) = claim(1, worker_id="b")
    moved, other = Job.enqueue("noop"), Job.enqueue("noop")
    outcome = completed(own)
    sent: list[str] = []

    with paused_claims(moved) as pause:
        pause.start(recorded(lambda: engine(connection.alias).finish_and_claim(
            [outcome], request("b", 2, after=own)), sent))
        claimed_and_finished(moved)
        written, taken = pause.resume()

    assert sent == ["turn", "finish", "claim"]
    assert written == [outcome]
    assert [job.pk for job in taken] == [other.pk]
    row = Job.objects.get(pk=own.pk)
    assert (row.status, row.worker_id) == (COMPLETED, "b")
    assert row.finished_at is not None


def test_a_turn_whose_claim_conflicts_carries_the_outcome_it_wrote(partitioned_jobs):
    """Its claim from the start meets a second moved row: ``ClaimConflict``, with the outcome
    that was written apart from it, so that the worker does not send it again."""
    Job.enqueue("noop")
    (own,) = claim(1, worker_id="b")
    first = Job.enqueue("noop", priority="high")  # first in claim order, then second
    second = Job.enqueue("noop", priority="high")
    other = Job.enqueue("noop")
    outcome = completed(own)
    sent: list[str] = []

    with paused_claims(first, second) as pause:
        pause.start(recorded(lambda: engine(connection.alias).finish_and_claim(
            [outcome], request("b", 2)), sent))
        claimed_and_finished(first)
        pause.step()  # the turn refused, the outcome written, the claim paused at second
        claimed_and_finished(second)
        with pytest.raises(ClaimConflict) as raised:
            pause.resume()

    assert sent == ["turn", "finish", "claim"]
    assert raised.value.written == [outcome]
    row = Job.objects.get(pk=own.pk)
    assert (row.status, row.worker_id) == (COMPLETED, "b")
    assert Job.objects.get(pk=other.pk).status == PENDING


def test_a_burst_worker_whose_claim_conflicts_claims_again_at_once(partitioned_jobs, caplog):
    """Its claims meet two moved rows, one each: not an outage (no "database unavailable", no
    backoff), and a ``--burst`` worker does not take a claim that took nothing for an empty
    queue."""
    first = Job.enqueue("noop", priority="high")
    second = Job.enqueue("noop", priority="high")
    other = Job.enqueue("noop")

    with caplog.at_level(logging.INFO, logger="django_jobs"), \
            paused_claims(first, second) as pause:
        pause.start(lambda: run_burst(worker_id="b", concurrency=1))
        claimed_and_finished(first)
        pause.step()  # its next claim, paused at the second row
        claimed_and_finished(second)
        processed = pause.resume()

    assert processed == 1
    row = Job.objects.get(pk=other.pk)
    assert (row.status, row.worker_id) == (COMPLETED, "b")
    assert not [r for r in caplog.records if "unavailable" in r.getMessage()]
