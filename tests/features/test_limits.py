"""Concurrency and rate limits, enforced at claim time under per-limit locks."""

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs import ConcurrencyLimit, RateLimit
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.models import Job
from django_jobs.models.limits import LimitStart
from tests.conftest import wait_for
from tests.helpers import claim
from tests.sched_jobs import register_limited, unregister_limited

LIMITS_ENV = {"DJANGO_JOBS_TEST_LIMITS": "1"}


@pytest.fixture
def limited():
    register_limited()
    yield
    unregister_limited()


def complete(job):
    now = timezone.now()
    Job.objects.finish([AttemptOutcome(job=job, kind="completed", started_at=now,
                                       finished_at=now)])


@pytest.mark.django_db
def test_a_type_cap_admits_only_that_many_running(limited):
    Job.enqueue_many("capped", [{}] * 5)
    first = claim()
    assert len(first) == 2
    assert claim() == []
    complete(first[0])
    assert len(claim()) == 1
    assert Job.objects.filter(status="processing").count() == 2


@pytest.mark.django_db
def test_a_key_cap_counts_per_payload_value(limited):
    Job.enqueue_many("capped_tenant", [{"tenant": "a"}] * 3 + [{"tenant": "b"}] * 2)
    taken = claim()
    assert sorted(j.payload["tenant"] for j in taken) == ["a", "b"]
    assert claim() == []


@pytest.mark.django_db
def test_a_backlog_of_capped_jobs_does_not_hide_the_jobs_behind_it(limited):
    Job.enqueue_many("capped", [{}] * 10, priority="high")
    behind = Job.enqueue("echo", {"n": 1})
    taken = claim(3)
    assert sorted(j.type for j in taken) == ["capped", "capped", "echo"]
    assert behind.pk in {j.pk for j in taken}


@pytest.mark.django_db
def test_a_rate_limit_admits_n_starts_per_period(limited):
    Job.enqueue_many("rated", [{}] * 5)
    assert len(claim()) == 3
    assert claim() == []
    assert LimitStart.objects.count() == 3
    LimitStart.objects.update(at=timezone.now() - timedelta(seconds=2))  # the period went by
    assert len(claim()) == 2
    assert LimitStart.objects.count() == 2  # the old starts were forgotten


@pytest.mark.django_db
def test_jobs_without_limits_claim_with_no_extra_query(limited):
    Job.enqueue("echo")
    with CaptureQueriesContext(connection) as with_limits:
        assert len(claim()) == 1
    unregister_limited()
    Job.enqueue("echo")
    with CaptureQueriesContext(connection) as without:
        assert len(claim()) == 1
    register_limited()
    if connection.vendor == "postgresql":
        # perf: with no limits registered the claim is one statement; with some, it selects
        # the candidates before marking them (sched's admit needs them): one more, never more
        statements = [q for q in with_limits.captured_queries if "SAVEPOINT" not in q["sql"]]
        assert len(statements) <= len(without.captured_queries) + 1
        assert not any("django_jobs_limit" in q["sql"] for q in with_limits.captured_queries)
    else:  # SQLite takes its write lock, then selects before it marks: one more statement
        statements = [q for q in with_limits.captured_queries if "SAVEPOINT" not in q["sql"]]
        assert len(statements) <= len(without.captured_queries) + 1
        assert not any("django_jobs_limitstart" in q["sql"]
                       for q in with_limits.captured_queries)


@pytest.mark.parametrize("make", [
    lambda: ConcurrencyLimit(0), lambda: ConcurrencyLimit(2, key=""),
    lambda: RateLimit(5, per=0), lambda: RateLimit(True),
])
def test_bad_limits_are_refused_when_declared(make):
    with pytest.raises(ImproperlyConfigured):
        make()


def _workers(start_worker, n, concurrency):
    return [start_worker("--concurrency", str(concurrency), "--heartbeat", "0.5", "--lease", "5",
                         env=LIMITS_ENV) for _ in range(n)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_concurrency_cap_holds_across_four_workers(start_worker, limited):
    """Four runworker processes with three threads each, sixteen jobs capped at two running:
    every handler records how many it saw processing; the peak is exactly the cap."""
    Job.enqueue_many("capped", [{"sleep": 0.3}] * 16)
    workers = _workers(start_worker, 4, 3)
    wait_for(lambda: Job.objects.filter(type="capped", status="completed").count() == 16,
             timeout=90)
    for worker in workers:
        worker.stop()
    peak = max(j.result["running_seen"] for j in Job.objects.filter(type="capped"))
    assert peak == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_rate_limit_holds_across_four_workers(start_worker, limited):
    """Twelve jobs limited to three starts per second over four workers: in no one-second
    window did more than three start."""
    Job.enqueue_many("rated", [{}] * 12)
    workers = _workers(start_worker, 4, 2)
    wait_for(lambda: Job.objects.filter(type="rated", status="completed").count() == 12,
             timeout=90)
    for worker in workers:
        worker.stop()
    starts = sorted(Job.objects.filter(type="rated").values_list("started_at", flat=True))
    window = timedelta(seconds=1)
    busiest = max(sum(1 for s in starts if t <= s < t + window) for t in starts)
    assert busiest == 3
