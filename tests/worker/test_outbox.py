"""The outbox (django_jobs/worker/executor.py): which outcomes the worker's loop takes, and when a
delivered outcome wakes it."""

import uuid
from collections.abc import Iterator

import pytest

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.states import Outcome
from django_jobs.models import Job
from django_jobs.worker.executor import Outbox, Running
from django_jobs.worker.slots import Inbox
from django_jobs.worker.wake import Wake

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


@pytest.fixture
def wake() -> Iterator[Wake]:
    """The loop's wake, as the worker gives the outbox."""
    wake = Wake()
    yield wake
    wake.close()


def held(*ids: int) -> dict[int, Running]:
    return {pk: Running(Job(id=pk, lease_token=uuid.uuid4()), 0.0, None) for pk in ids}


def completed(job: Job) -> AttemptOutcome:
    return AttemptOutcome(job, Outcome.COMPLETED, 0, 1)


def test_the_loop_takes_only_the_outcomes_of_attempts_it_still_holds(wake):
    running = held(1, 2, 3)
    outbox = Outbox(wake, Inbox(), running)
    same = completed(running[1].job)
    copy = completed(Job(id=2, lease_token=running[2].job.lease_token))  # the same attempt
    newer = completed(Job(id=3, lease_token=uuid.uuid4()))  # another attempt of job 3
    gone = completed(Job(id=4, lease_token=uuid.uuid4()))  # no longer held at all
    for outcome in (same, copy, newer, gone):
        outbox.deliver(outcome)
    assert outbox.take() == [same, copy]
    assert outbox.take() == []


def test_outcomes_put_back_are_taken_first_on_the_next_turn(wake):
    running = held(1, 2)
    outbox = Outbox(wake, Inbox(), running)
    first, second = completed(running[1].job), completed(running[2].job)
    outbox.deliver(second)
    outbox.put_back([first])
    assert len(outbox) == 2
    assert outbox.take() == [first, second]


def test_the_first_outcome_wakes_the_loop_once_a_turn_when_no_job_waits_for_a_thread(wake):
    running = held(1, 2, 3)
    outbox = Outbox(wake, Inbox(), running)
    outbox.deliver(completed(running[1].job))
    assert wake.is_set()
    wake.clear()
    outbox.deliver(completed(running[2].job))
    assert not wake.is_set()  # the loop was told this turn: it gathers the rest itself
    outbox.take()
    outbox.deliver(completed(running[3].job))
    assert wake.is_set()  # a new turn


def test_while_jobs_wait_for_a_thread_only_the_last_running_outcome_wakes_the_loop(wake):
    running, inbox = held(1, 2), Inbox()
    inbox.put([running[2].job])  # claimed, no thread has taken it yet
    outbox = Outbox(wake, inbox, running)
    outbox.deliver(completed(running[1].job))
    assert not wake.is_set()
    outbox.deliver(completed(running[2].job))
    assert wake.is_set()


def test_an_outcome_put_back_keeps_its_traceback_but_not_the_handlers_locals(wake):
    """Outcomes wait in the outbox through an outage: what a handler had loaded is let go."""
    import gc
    import traceback
    import weakref

    class Loaded:
        pass

    def handler():
        data = Loaded()
        loaded.append(weakref.ref(data))
        raise ValueError("boom")

    loaded: list[weakref.ref] = []
    try:
        handler()
    except ValueError as exc:
        raised = exc
    running = held(1)
    outcome = AttemptOutcome(running[1].job, Outcome.FAILED, 0, 1, exception=raised)
    gc.collect()
    assert loaded[0]() is not None  # the traceback's frame holds the handler's data
    Outbox(wake, Inbox(), running).put_back([outcome])
    gc.collect()
    assert loaded[0]() is None
    stack = traceback.format_exception(outcome.exception)
    assert any("in handler" in line for line in stack) and "ValueError: boom" in stack[-1]
