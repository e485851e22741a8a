"""Unique jobs: one job per key among the guarded states, held by a unique constraint."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from django_jobs import InvalidJob
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.features.unique import Rule
from django_jobs.models import Job
from tests.conftest import requires_row_locks


def claim_one(job):
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert claimed.pk == job.pk
    return claimed


def finish(job, kind="completed"):
    now = timezone.now()
    Job.objects.finish([AttemptOutcome(job=job, kind=kind, started_at=now, finished_at=now,
                                       error=None if kind == "completed" else {"type": "X"})])


@pytest.mark.django_db
def test_a_duplicate_enqueue_returns_the_existing_job():
    first = Job.enqueue("echo", {"n": 1}, unique_key="order-42")
    second = Job.enqueue("echo", {"n": 2}, unique_key="order-42")
    assert second.pk == first.pk and second.duplicate and not first.duplicate
    assert second.payload == {"n": 1}
    assert Job.objects.filter(type="echo").count() == 1


@pytest.mark.django_db
def test_keys_are_per_type():
    Job.enqueue("echo", unique_key="k")
    other = Job.enqueue("noop", unique_key="k")
    assert not other.duplicate and Job.objects.count() == 2


@pytest.mark.django_db
def test_the_key_is_released_when_the_job_completes():
    job = Job.enqueue("echo", unique_key="k")
    claimed = claim_one(job)
    assert Job.enqueue("echo", unique_key="k").duplicate  # processing is guarded by default
    finish(claimed)
    job.refresh_from_db()
    assert job.status == "completed" and job.unique_key is None
    again = Job.enqueue("echo", unique_key="k")
    assert not again.duplicate and again.pk != job.pk


@pytest.mark.django_db
def test_a_failed_job_awaiting_retry_keeps_its_key_and_a_dead_one_releases_it():
    job = Job.enqueue("echo", unique_key="k", max_attempts=2)
    finish(claim_one(job), kind="failed")
    job.refresh_from_db()
    assert job.status == "failed" and Job.enqueue("echo", unique_key="k").duplicate
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())
    finish(claim_one(job), kind="failed")
    job.refresh_from_db()
    assert job.status == "dead" and job.unique_key is None
    assert not Job.enqueue("echo", unique_key="k").duplicate


@pytest.mark.django_db
def test_guarding_only_pending_lets_a_new_job_in_once_the_first_starts():
    job = Job.enqueue("echo", unique_key="k", unique_states=["pending"])
    assert Job.enqueue("echo", unique_key="k", unique_states=["pending"]).duplicate
    claim_one(job)
    assert not Job.enqueue("echo", unique_key="k", unique_states=["pending"]).duplicate


@pytest.mark.django_db
def test_guarding_completed_refuses_a_second_job_after_success():
    states = ["pending", "processing", "failed", "completed"]
    job = Job.enqueue("echo", unique_key="once", unique_states=states)
    finish(claim_one(job))
    dup = Job.enqueue("echo", unique_key="once", unique_states=states)
    assert dup.duplicate and dup.pk == job.pk and dup.status == "completed"


@pytest.mark.django_db
def test_cancel_releases_the_key():
    job = Job.enqueue("echo", unique_key="k")
    job.cancel()
    assert job.status == "canceled" and job.unique_key is None
    assert not Job.enqueue("echo", unique_key="k").duplicate


@pytest.mark.django_db
def test_a_window_folds_into_the_key():
    job = Job.enqueue("echo", unique_key="k", unique_for=timedelta(days=36500))
    assert job.unique_key.startswith("1110100|echo:k@")
    assert Job.enqueue("echo", unique_key="k", unique_for=timedelta(days=36500)).duplicate
    rule = Rule(key="k", fields=(), states="0100000", within=timedelta(hours=1))
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    assert rule.key_for("t", {}, at) == rule.key_for("t", {}, at + timedelta(minutes=59))
    assert rule.key_for("t", {}, at) != rule.key_for("t", {}, at + timedelta(minutes=60))


@pytest.mark.django_db
def test_the_handler_rule_builds_the_key_from_payload_fields():
    a = Job.enqueue("unique_customer", {"customer_id": 7, "x": 1})
    b = Job.enqueue("unique_customer", {"customer_id": 7, "x": 2})
    c = Job.enqueue("unique_customer", {"customer_id": 8})
    assert b.pk == a.pk and b.duplicate and not c.duplicate
    assert a.unique_key == "1110100|unique_customer:[7]"  # waiting, pending, processing, failed
    with pytest.raises(InvalidJob) as err:
        Job.enqueue("unique_customer", {"x": 1})
    assert "customer_id" in str(err.value.message_dict["payload"])


@pytest.mark.django_db
def test_enqueue_many_maps_duplicates_to_one_job_each():
    existing = Job.enqueue("unique_customer", {"customer_id": 2})
    jobs = Job.enqueue_many("unique_customer", [
        {"customer_id": 1}, {"customer_id": 2}, {"customer_id": 1}, {"customer_id": 3},
    ])
    assert [j.payload["customer_id"] for j in jobs] == [1, 2, 1, 3]
    assert jobs[0].pk == jobs[2].pk and jobs[1].pk == existing.pk and jobs[1].duplicate
    assert Job.objects.filter(type="unique_customer").count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize("options, field", [
    ({"unique_states": ["pending"]}, "unique_key"),
    ({"unique_key": "k", "unique_states": ["processing"]}, "unique_states"),
    ({"unique_key": "k", "unique_states": ["pending", "sleeping"]}, "unique_states"),
    ({"unique_key": "k", "unique_for": 60}, "unique_for"),
    ({"unique_key": ""}, "unique_key"),
])
def test_bad_unique_options_are_refused_by_field(options, field):
    with pytest.raises(InvalidJob) as err:
        Job.enqueue("echo", **options)
    assert field in err.value.message_dict
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_enqueuers_of_one_key_make_one_job():
    """Eight threads, each with its own connection and transaction, enqueue the same key at
    once; the unique constraint lets one insert win and the others return that job."""
    barrier = threading.Barrier(8)
    found: list[int] = []
    errors: list[BaseException] = []

    def enqueue() -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                job = Job.enqueue("echo", {"by": threading.get_ident()}, unique_key="race")
                Job.objects.filter(pk=job.pk).exists()  # keep the transaction open a moment
            found.append(job.pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(found) == 8 and len(set(found)) == 1
    assert Job.objects.filter(type="echo").count() == 1



@pytest.mark.django_db
def test_a_very_long_key_is_stored_as_a_digest_behind_its_flags():
    job = Job.enqueue("echo", unique_key="x" * 1000)
    assert job.unique_key.startswith("1110100|echo:sha256:") and len(job.unique_key) <= 255
    assert Job.enqueue("echo", unique_key="x" * 1000).duplicate


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_enqueue_many_calls_on_the_same_keys_make_one_job_per_key():
    """Eight threads enqueue the same two keys in one batch each, in their own transactions."""
    barrier = threading.Barrier(8)
    found: list[list[int]] = []
    errors: list[BaseException] = []

    def enqueue_many() -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                jobs = Job.enqueue_many("unique_customer",
                                        [{"customer_id": 1}, {"customer_id": 2}])
            found.append([job.pk for job in jobs])
        except BaseException as exc:
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=enqueue_many) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(found) == 8 and len({tuple(pks) for pks in found}) == 1
    assert Job.objects.filter(type="unique_customer").count() == 2


@requires_row_locks
@pytest.mark.django_db(transaction=True)
def test_enqueue_many_of_overlapping_keys_in_opposite_orders_never_deadlocks():
    """Two threads, each with its own connection, enqueue the same keys in one transaction
    each, one in the reverse order of the other, round after round. Each insert of a key
    waits for the transaction holding it; were the keys inserted in the caller's order, each
    thread would wait for a key the other holds and the database would abort one as a
    deadlock. Inserted in the order of their keys, one waits for the other and then finds its
    jobs."""
    rounds, keys = 20, 20
    barrier = threading.Barrier(2, timeout=60)
    found: dict[str, list[list[tuple[int, int]]]] = {"up": [], "down": []}
    errors: list[BaseException] = []

    def enqueue_rounds(direction: str) -> None:
        try:
            for r in range(rounds):
                ids = [r * keys + n for n in range(keys)]
                if direction == "down":
                    ids.reverse()
                barrier.wait()
                with transaction.atomic():
                    jobs = Job.enqueue_many("unique_customer",
                                            [{"customer_id": i} for i in ids])
                found[direction].append(
                    [(job.payload["customer_id"], job.pk) for job in jobs])
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=enqueue_rounds, args=(d,)) for d in ("up", "down")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e for e in errors if not isinstance(e, threading.BrokenBarrierError)] == []
    assert errors == []
    for up, down in zip(found["up"], found["down"], strict=True):
        assert [i for i, _ in up] == sorted(i for i, _ in up)  # the caller's order is kept
        assert [i for i, _ in down] == sorted((i for i, _ in down), reverse=True)
        assert dict(up) == dict(down)  # both calls return the same job for each key
    made = sorted(job.payload["customer_id"] for job in Job.objects.filter(type="unique_customer"))
    assert made == list(range(rounds * keys))  # one job per key
