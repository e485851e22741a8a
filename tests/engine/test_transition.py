"""The transition an attempt's outcome makes (``engine/transition.py``), on its own, and the
write path applying it only to the rows its fenced write changed."""

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.retry import ExponentialBackoff, FixedSchedule
from django_jobs.engine.transition import Transition, apply, transition
from django_jobs.models import Job, JobAttempt

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TEN = FixedSchedule((10.0,))
ERROR = {"type": "E", "message": "boom"}


def change(kind, **kwargs):
    values = {"attempt": 1, "max_attempts": 3, "has_unique_key": False, "kind": kind,
              "backoff": TEN, "now": NOW, **kwargs}
    return transition(**values)


def test_a_completion_stores_the_result_and_clears_the_error_the_lease_and_a_cancel_request():
    made = change("completed", result={"n": 1}, error=ERROR)
    assert (made.status, made.outcome) == ("completed", "completed")
    assert made.fields == {"status": "completed", "result": {"n": 1}, "error": None,
                           "finished_at": NOW, "updated_at": NOW, "leased_until": None,
                           "cancel_requested": False,
                           "shelf": date(2026, 1, 8)}  # NOW + 7 days is a day boundary


def test_a_cancel_keeps_its_error_and_ends_the_job():
    made = change("canceled", error=ERROR)
    assert (made.status, made.outcome) == ("canceled", "canceled")
    assert made.fields == {"status": "canceled", "error": ERROR, "finished_at": NOW,
                           "updated_at": NOW, "leased_until": None, "cancel_requested": False,
                           "shelf": date(2026, 1, 8)}


def test_a_failure_with_attempts_left_is_retried_after_the_backoff():
    made = change("failed", attempt=2, error=ERROR)
    assert (made.status, made.outcome) == ("failed", "failed")
    assert made.fields["run_at"] == NOW + timedelta(seconds=10)
    assert made.fields["error"] == ERROR and "finished_at" not in made.fields
    assert "shelf" not in made.fields  # still open
    assert "cancel_requested" not in made.fields  # a request stops its next attempt


def test_a_failure_of_the_last_attempt_goes_dead():
    made = change("failed", attempt=3, max_attempts=3, error=ERROR)
    assert (made.status, made.outcome) == ("dead", "dead")
    assert made.fields["finished_at"] == NOW and "run_at" not in made.fields
    assert made.fields["shelf"] == date(2026, 1, 31)
    assert made.fields["cancel_requested"] is False


def test_a_permanent_failure_goes_dead_with_attempts_left_and_needs_no_backoff():
    made = change("failed", permanent=True, error=ERROR, backoff=None)
    assert (made.status, made.outcome) == ("dead", "dead")


def test_a_failure_that_may_be_retried_needs_a_backoff():
    with pytest.raises(ValueError, match="backoff"):
        change("failed", backoff=None)


def test_a_snooze_gives_the_attempt_back_and_runs_again_later():
    made = change("snoozed", attempt=2, snooze_seconds=30)
    assert (made.status, made.outcome) == ("pending", "snoozed")
    assert made.fields == {"status": "pending", "attempt": 1, "started_at": None,
                           "run_at": NOW + timedelta(seconds=30), "updated_at": NOW,
                           "leased_until": None}
    assert change("snoozed", error=ERROR).fields["error"] == ERROR  # why it waits


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="not an attempt's outcome"):
        change("lost")


@pytest.mark.parametrize("kind", ["completed", "failed", "canceled", "snoozed"])
@pytest.mark.parametrize("has_key", [True, False])
def test_the_key_check_follows_the_job_holding_a_key(kind, has_key):
    assert change(kind, has_unique_key=has_key, error=ERROR).keeps_key_check is has_key


@given(
    attempt=st.integers(1, 50), max_attempts=st.integers(1, 50), permanent=st.booleans(),
    base=st.floats(0, 1e5), kind=st.sampled_from(["completed", "failed", "canceled", "snoozed"]),
    snooze=st.none() | st.floats(0, 1e6),
)
def test_every_transition_holds_plain_values_and_a_state_its_outcome_names(
        attempt, max_attempts, permanent, base, kind, snooze):
    backoff = ExponentialBackoff(base=base, cap=3600, jitter=False)
    made = transition(attempt=attempt, max_attempts=max_attempts, has_unique_key=True,
                      kind=kind, permanent=permanent, error=ERROR, result=[1],
                      snooze_seconds=snooze, backoff=backoff, now=NOW)
    assert made.fields["status"] == made.status
    assert not any(hasattr(value, "resolve_expression") for value in made.fields.values())
    expected = {"completed": "completed", "canceled": "canceled", "snoozed": "pending"}
    if kind == "failed":
        last = permanent or attempt >= max_attempts
        assert made.status == made.outcome == ("dead" if last else "failed")
        if not last:
            assert made.fields["run_at"] == NOW + timedelta(seconds=backoff.delay(attempt))
    else:
        assert made.status == expected[kind]
    if made.status in ("completed", "dead", "canceled"):
        assert made.fields["finished_at"] == NOW
    else:
        assert made.fields["run_at"] >= NOW and "finished_at" not in made.fields


@given(kind=st.sampled_from(["completed", "failed", "canceled", "snoozed"]),
       attempt=st.integers(1, 5))
def test_a_transition_changes_neither_the_job_nor_the_outcome(kind, attempt):
    job = Job(type="noop", attempt=attempt, max_attempts=3, status="processing")
    before = dict(job.__dict__)
    outcome = AttemptOutcome(job=job, kind=kind, started_at=NOW, finished_at=NOW,
                             error=ERROR, snooze_seconds=1)
    from django_jobs.engine.transition import of

    made = of(outcome, NOW, TEN)
    assert isinstance(made, Transition)
    assert outcome.kind == kind
    assert job.__dict__ == before
    apply(outcome, made)
    assert outcome.kind == made.outcome and job.status == made.status


def test_extra_attempts_given_by_the_same_write_are_counted_before_the_decision():
    from django_jobs.engine.transition import of

    job = Job(type="noop", attempt=3, max_attempts=3, status="processing")
    outcome = AttemptOutcome(job=job, kind="failed", started_at=NOW, finished_at=NOW,
                             error=ERROR)
    assert of(outcome, NOW, TEN).status == "dead"
    assert of(outcome, NOW, TEN, extra_attempts=1).status == "failed"
    assert job.max_attempts == 3


# The write path: a fence that fails leaves the instance and the outcome as they were.

def _claim(limit=10):
    return Job.objects.claim(worker_id="w1", limit=limit, lease_seconds=30)


def _write(path, outcomes):
    if path == "finish":
        return Job.objects.finish(outcomes)
    return Job.objects.finish_and_claim(outcomes, worker_id="w1", limit=1, lease_seconds=30)[0]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["finish", "turn"])
@pytest.mark.parametrize("kind", ["completed", "failed", "canceled", "snoozed"])
def test_a_finish_whose_fence_fails_leaves_the_job_and_the_outcome_untouched(path, kind):
    Job.enqueue("noop", max_attempts=1, unique_key="k")
    job = _claim()[0]
    job.lease_token = uuid.uuid4()  # taken over: another worker holds the row
    job.result = {"kept": True} if kind == "completed" else None
    outcome = AttemptOutcome(job=job, kind=kind, started_at=NOW, finished_at=NOW,
                             error=ERROR, result={"n": 1}, snooze_seconds=5)
    before = dict(job.__dict__)
    assert _write(path, [outcome]) == []
    assert outcome.kind == kind
    assert job.__dict__ == before
    assert Job.objects.get(pk=job.pk).status == "processing"
    assert not JobAttempt.objects.filter(job_id=job.pk).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["finish", "turn"])
def test_only_the_rows_the_fence_let_through_get_their_transition(path):
    Job.enqueue_many("noop", [{}] * 2, max_attempts=1)
    mine, lost = _claim(limit=2)
    lost.lease_token = uuid.uuid4()
    outcomes = [AttemptOutcome(job=j, kind="failed", started_at=NOW, finished_at=NOW,
                               error=ERROR) for j in (mine, lost)]
    assert _write(path, outcomes) == [outcomes[0]]
    assert [o.kind for o in outcomes] == ["dead", "failed"]
    assert (mine.status, lost.status) == ("dead", "processing")
    assert JobAttempt.objects.get(job_id=mine.pk).outcome == "dead"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["finish", "turn"])
@pytest.mark.parametrize(("kind", "state"), [
    ("completed", "completed"), ("canceled", "canceled"), ("failed", "dead"),
])
@pytest.mark.parametrize("guarded", [True, False])
def test_the_written_key_stays_only_if_it_guards_the_new_state(path, kind, state, guarded):
    states = ["pending", "processing", *([state] if guarded else [])]
    Job.enqueue("noop", max_attempts=1, unique_key="k", unique_states=states)
    job = _claim()[0]
    outcome = AttemptOutcome(job=job, kind=kind, started_at=NOW, finished_at=NOW, error=ERROR)
    assert _write(path, [outcome]) == [outcome]
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == state
    assert (stored.unique_key is not None) is guarded


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["finish", "turn"])
def test_a_batch_the_database_refuses_leaves_every_job_and_outcome_as_it_was(path):
    """A batch written in one transaction: when a later outcome of it fails, the ones already
    written roll back, so their instances and outcomes must not keep the transition."""
    Job.enqueue_many("noop", [{}] * 2, max_attempts=1)
    first, second = _claim(limit=2)
    outcomes = [
        AttemptOutcome(job=first, kind="failed", started_at=NOW, finished_at=NOW, error=ERROR),
        AttemptOutcome(job=second, kind="completed", started_at=NOW, finished_at=NOW,
                       result={"not json": object()}),
    ]
    before = [dict(first.__dict__), dict(second.__dict__)]
    with pytest.raises(TypeError), transaction.atomic():  # as the worker's own transaction
        _write(path, outcomes)
    assert [o.kind for o in outcomes] == ["failed", "completed"]
    assert [dict(first.__dict__), dict(second.__dict__)] == before
    assert set(Job.objects.values_list("status", flat=True)) == {"processing"}
