"""Where a worker's next claim starts (``worker/producer.py``): after the last job of its
last claim, from the start after a claim that took nothing and once per heartbeat."""

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobs.core.contract import ClaimKey
from django_jobs.models import Job
from django_jobs.worker.producer import ClaimCursor

pytestmark = pytest.mark.django_db


def jobs_in_claim_order():
    now = timezone.now()
    return [
        Job.enqueue("noop", priority="high"),
        Job.enqueue("noop", run_at=now - timedelta(seconds=5)),
        Job.enqueue("noop", run_at=now - timedelta(seconds=1)),
        Job.enqueue("noop", priority="low", run_at=now - timedelta(seconds=9)),
    ]


def test_the_key_is_the_last_job_of_the_claim_in_claim_order():
    jobs = jobs_in_claim_order()
    for taken, last in (
        (jobs, jobs[3]),
        (jobs[::-1], jobs[3]),
        (jobs[:3], jobs[2]),
        (jobs[1::-1], jobs[1]),
    ):
        assert ClaimKey.furthest(taken) == (last.priority, last.run_at, last.pk)
    assert ClaimKey.furthest([]) is None


def test_a_claim_starts_after_the_last_one_until_a_heartbeat_has_passed():
    jobs = jobs_in_claim_order()
    cursor = ClaimCursor(restart_seconds=5)
    assert cursor.after(100.0) is None  # the first claim: from the start
    cursor.claimed(None, jobs[:2], 100.0)
    assert cursor.after(101.0) == ClaimKey.furthest(jobs[:2])
    cursor.claimed(ClaimKey.furthest(jobs[:2]), jobs[2:3], 101.0)
    assert cursor.after(104.9) == ClaimKey.furthest(jobs[2:3])
    assert cursor.after(105.0) is None  # a heartbeat after the last claim from the start
    cursor.claimed(None, jobs[3:], 105.0)
    assert cursor.after(106.0) == ClaimKey.furthest(jobs[3:])


def test_a_claim_that_took_nothing_sends_the_next_from_the_start():
    jobs = jobs_in_claim_order()
    cursor = ClaimCursor(restart_seconds=5)
    cursor.claimed(None, jobs[:1], 0.0)
    cursor.claimed(cursor.after(1.0), [], 1.0)
    assert cursor.after(2.0) is None


def test_a_claim_from_the_start_that_conflicted_counts_as_sent_and_the_key_stays():
    """A claim that met rows moved under it took nothing (``ClaimConflict``): the next claims
    read after the key, and the next from the start is a heartbeat later."""
    jobs = jobs_in_claim_order()
    cursor = ClaimCursor(restart_seconds=5)
    cursor.claimed(None, jobs[:1], 0.0)
    after = cursor.after(6.0)
    assert after is None  # a heartbeat has passed: from the start
    cursor.conflicted(after, 6.0)
    assert cursor.after(6.1) == ClaimKey.furthest(jobs[:1])
    assert cursor.after(10.9) == ClaimKey.furthest(jobs[:1])
    assert cursor.after(11.0) is None


def test_a_claim_after_the_key_that_conflicted_leaves_the_cursor_as_it_was():
    jobs = jobs_in_claim_order()
    cursor = ClaimCursor(restart_seconds=5)
    cursor.claimed(None, jobs[:1], 0.0)
    cursor.conflicted(cursor.after(1.0), 1.0)
    assert cursor.after(2.0) == ClaimKey.furthest(jobs[:1])
    assert cursor.after(5.0) is None


def test_a_worker_of_two_queues_always_claims_from_the_start():
    jobs = jobs_in_claim_order()
    for queues, keyed in (((), True), (["a"], True), (["a", "a"], True), (["a", "b"], False)):
        cursor = ClaimCursor(restart_seconds=5, queues=queues)
        cursor.claimed(None, jobs, 0.0)
        assert (cursor.after(1.0) is not None) is keyed
