"""The claim and finish write path (``Job.objects.claim`` / ``.finish``) on SQLite and PostgreSQL.

On PostgreSQL each is a single statement (``engine/postgres/engine.py``); on SQLite the
ORM verbs of ``engine/verbs.py`` and ``engine/portable.py`` run. Both must give the same results,
which is what these tests pin down.
"""

import threading
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.core import contract
from django_jobs.core.contract import ClaimKey, ClaimRequest
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job, JobAttempt
from django_jobs.worker.execution import run_job
from tests.conftest import requires_postgres, requires_row_locks
from tests.helpers import claim

pytestmark = pytest.mark.django_db


def sent(queries: CaptureQueriesContext) -> list[str]:
    """The statements a verb sent, less the savepoint a fenced write on the partitioned table
    takes in a caller's transaction, here the test's (``engine/moved_rows.py``)."""
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def run(job):
    """Run the job's handler as a worker thread does (its own connections, none touched)."""
    done = []
    thread = threading.Thread(target=lambda: done.append(run_job(job)))
    thread.start()
    thread.join()
    return done[0]


def outcome(job, kind="completed", **kwargs):
    now = timezone.now()
    return AttemptOutcome(job=job, kind=kind, started_at=job.started_at or now, finished_at=now,
                          **kwargs)


def test_claim_takes_highest_priority_then_earliest_run_at_then_oldest():
    now = timezone.now()
    low = Job.enqueue("noop", priority="low")
    late = Job.enqueue("noop", run_at=now - timedelta(seconds=1))
    early = Job.enqueue("noop", run_at=now - timedelta(seconds=5))
    first_normal = Job.enqueue("noop", run_at=now - timedelta(seconds=1))
    high = Job.enqueue("noop", priority="high")
    claimed = claim()
    assert [j.pk for j in claimed] == [high.pk, early.pk, late.pk, first_normal.pk, low.pk]


def test_claim_marks_jobs_processing_under_one_lease_and_returns_them_as_stored():
    Job.enqueue_many("echo", [{"n": 1}, {"n": 2}])
    claimed = claim(worker_id="worker-a")
    assert len(claimed) == 2
    assert len({j.lease_token for j in claimed}) == 1
    for job in claimed:
        stored = Job.objects.get(pk=job.pk)
        assert stored.status == job.status == "processing"
        assert stored.attempt == job.attempt == 1
        assert stored.worker_id == job.worker_id == "worker-a"
        assert stored.lease_token == job.lease_token
        assert stored.leased_until == job.leased_until > timezone.now()
        assert stored.started_at == job.started_at
        assert job.payload == stored.payload and isinstance(job.payload, dict)


def test_claim_respects_limit_run_at_queues_and_excluded_queues():
    Job.enqueue("noop", delay=60)
    mail = Job.enqueue_many("noop", [{}] * 3, queue="mail")
    other = Job.enqueue("noop", queue="other")
    assert claim(limit=0) == []
    assert {j.pk for j in claim(limit=2, queues=["mail"])} == {j.pk for j in mail[:2]}
    assert [j.pk for j in claim(exclude_queues=["mail"])] == [other.pk]
    assert [j.pk for j in claim()] == [mail[2].pk]
    assert claim() == []


@pytest.mark.parametrize("queues", [["mail", "sms"], ["mail", "sms", "push"],
                                    ["sms", "mail", "sms"]])
def test_a_claim_from_several_queues_takes_what_ready_selects_in_its_order(queues):
    now = timezone.now()
    for n in range(24):
        Job.enqueue("noop", queue=["mail", "sms", "push", "other"][n % 4],
                    priority=[0, 10, -10][n % 3], run_at=now - timedelta(seconds=n % 5))
    Job.enqueue("noop", queue="mail", delay=60)
    expected = list(Job.objects.ready(queues, timezone.now()).values_list("pk", flat=True))
    taken = [[j.pk for j in batch] for batch in iter(lambda: claim(limit=4, queues=queues), [])]
    assert [pk for batch in taken for pk in batch] == expected
    assert len(expected) == 6 * (len(set(queues)))
    assert all(len(batch) == 4 for batch in taken[:-1])  # a claim takes as many as it may
    left = Counter(Job.objects.ready().values_list("queue", flat=True))
    assert left == {queue: 6 for queue in {"mail", "sms", "push", "other"} - set(queues)}


def claim_after(key, limit=4, queues=None, outcomes=()):
    """A worker's turn claiming from ``key`` on (``ClaimRequest.after``)."""
    request = ClaimRequest("w1", limit, 30.0, queues=queues, after=key)
    return contract.engine("default").finish_and_claim(list(outcomes), request)[1]


@pytest.mark.parametrize("queues", [None, ["mail"], ["mail", "sms"]])
def test_a_claim_after_a_key_takes_what_ready_selects_after_it_then_from_the_start(queues):
    now = timezone.now()
    for n in range(30):
        Job.enqueue("noop", queue=["mail", "sms", "other"][n % 3], priority=[0, 10, -10][n % 2],
                    run_at=now - timedelta(seconds=n % 4))
    ready = Job.objects.ready(queues, timezone.now())
    order = list(ready)
    key = ClaimKey(order[3].priority, order[3].run_at, order[3].pk)
    after = [j.pk for j in ready.after(key)]
    assert 0 < len(after) < len(order) - 4  # the key's priority has rows after it, not all
    taken, batch = [], []
    while len(taken) < len(after):  # each claim from where the last ended, as a worker's
        batch = claim_after(ClaimKey.furthest(batch) or key, queues=queues,
                            outcomes=[outcome(j) for j in batch])
        assert batch
        taken += [j.pk for j in batch]
    assert taken == after
    # Nothing after the last key: the same claim reads from the start, in claim order.
    assert [j.pk for j in claim_after(ClaimKey.furthest(batch), queues=queues)] == [
        j.pk for j in order if j.pk not in after][:4]


def test_a_claim_after_a_key_misses_nothing_placed_before_it():
    a, b, c = Job.enqueue_many("noop", [{}] * 3)
    assert [j.pk for j in claim(limit=1)] == [a.pk]
    key = ClaimKey(a.priority, a.run_at, a.pk)
    urgent = Job.enqueue("noop", priority="high")
    assert [j.pk for j in claim_after(key, limit=1)] == [b.pk]  # after the key first
    Job.objects.filter(pk=a.pk).update(status="pending")  # handed back, as a rescue leaves it
    assert [j.pk for j in claim_after(key, limit=4)] == [c.pk]
    # Nothing after the key is ready: the claim takes the rows before it, in claim order.
    assert [j.pk for j in claim_after(ClaimKey(c.priority, c.run_at, c.pk))] == [urgent.pk, a.pk]
    assert claim_after(key) == []


def test_a_failed_job_due_again_is_claimed_with_its_next_attempt_number():
    job = Job.enqueue("always_fails")
    (first,) = claim()
    Job.objects.finish([outcome(first, "failed", error=error_dict(type="E", message="m"))])
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now() - timedelta(seconds=1))
    (second,) = claim()
    assert second.pk == job.pk and second.attempt == 2


def test_finish_completes_jobs_and_records_one_attempt_each():
    Job.enqueue_many("noop", [{}] * 3)
    Job.enqueue("echo", {"x": 1})
    claimed = claim()
    outcomes = [run(job) for job in claimed]
    written = Job.objects.finish(outcomes)
    assert len(written) == 4
    for job in claimed:
        stored = Job.objects.get(pk=job.pk)
        assert stored.status == job.status == "completed"
        assert stored.leased_until is None and stored.finished_at is not None
        assert stored.result == ({"echo": {"x": 1}} if job.type == "echo" else None)
        (attempt,) = JobAttempt.objects.filter(job=stored)
        assert (attempt.number, attempt.outcome, attempt.worker_id) == (1, "completed", "w1")
        assert attempt.cpu_time is not None and attempt.peak_memory > 0
        assert attempt.error is None


def test_finish_retries_a_failure_with_attempts_left_and_buries_the_last_one():
    job = Job.enqueue("always_fails", max_attempts=2)
    (first,) = claim()
    before = timezone.now()
    Job.objects.finish([run(first)])
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == "failed" and stored.run_at >= before and stored.finished_at is None
    assert stored.error["type"] == "RuntimeError" and "boom" in stored.error["message"]
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())
    (second,) = claim()
    Job.objects.finish([run(second)])
    stored.refresh_from_db()
    assert stored.status == "dead" and stored.finished_at is not None
    assert list(stored.attempts.values_list("number", "outcome")) == [(1, "failed"), (2, "dead")]


def test_finish_of_a_mixed_batch_writes_each_kind():
    ok, bad, gone, perm = (Job.enqueue(t) for t in ("echo", "always_fails", "noop", "permanent"))
    claimed = {j.pk: j for j in claim()}
    cancel = outcome(claimed[gone.pk], "canceled", error=error_dict(type="JobCanceled"))
    written = Job.objects.finish([run(claimed[ok.pk]), run(claimed[bad.pk]), cancel,
                                  run(claimed[perm.pk])])
    assert [o.kind for o in written] == ["completed", "failed", "canceled", "dead"]
    status = dict(Job.objects.values_list("pk", "status"))
    assert status == {ok.pk: "completed", bad.pk: "failed", gone.pk: "canceled",
                      perm.pk: "dead"}
    assert JobAttempt.objects.count() == 4
    assert Job.objects.get(pk=gone.pk).error["type"] == "JobCanceled"


def test_finish_with_a_taken_over_lease_writes_nothing_for_that_job():
    """A late worker whose lease was taken over can never overwrite the newer attempt."""
    stale_job, fresh_job = Job.enqueue("noop"), Job.enqueue("noop")
    claimed = {j.pk: j for j in claim()}
    new_token = uuid.uuid4()
    Job.objects.filter(pk=stale_job.pk).update(lease_token=new_token, attempt=2)
    written = Job.objects.finish([outcome(claimed[stale_job.pk]), outcome(claimed[fresh_job.pk])])
    assert [o.job.pk for o in written] == [fresh_job.pk]
    stale = Job.objects.get(pk=stale_job.pk)
    assert (stale.status, stale.lease_token, stale.attempt) == ("processing", new_token, 2)
    assert list(JobAttempt.objects.values_list("job_id", flat=True)) == [fresh_job.pk]


def test_finish_twice_writes_once():
    Job.enqueue("noop")
    (job,) = claim()
    assert len(Job.objects.finish([outcome(job)])) == 1
    assert Job.objects.finish([outcome(job)]) == []
    assert JobAttempt.objects.count() == 1


@requires_postgres
def test_claim_and_finish_are_one_statement_each_on_postgresql():
    Job.enqueue_many("noop", [{}] * 5)
    with CaptureQueriesContext(connection) as queries:
        claimed = claim()
        Job.objects.finish([outcome(job) for job in claimed])
    assert len(sent(queries)) == 2
    assert Job.objects.filter(status="completed").count() == 5


def prepared_statements():
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@requires_postgres
@pytest.mark.django_db(transaction=True)  # closes its connection: no test transaction around
@pytest.mark.parametrize("prepare", [True, None, False])  # None: direct, so prepared
def test_claim_and_finish_are_prepared_unless_the_setting_says_not(settings, prepare):
    settings.DJANGO_JOBS = {"PREPARED_STATEMENTS": prepare}
    connection.close()  # a new connection: nothing prepared yet
    Job.enqueue_many("noop", [{}] * 3)
    for _ in range(2):
        claimed = claim(limit=2)
        assert Job.objects.finish([outcome(job) for job in claimed]) != []
    statements = prepared_statements()
    claims = [s for s in statements if "FOR UPDATE SKIP LOCKED" in s]
    finishes = [s for s in statements if "jsonb_to_recordset" in s]
    assert (len(claims), len(finishes)) == ((0, 0) if prepare is False else (1, 1))
    assert Job.objects.filter(status="completed").count() == 3
    assert JobAttempt.objects.count() == 3


@requires_row_locks
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_share_a_job():
    Job.enqueue_many("noop", [{}] * 200)
    taken: list[list[int]] = []

    def claimer(name):
        try:
            while batch := claim(limit=7, worker_id=name):
                taken.append([j.pk for j in batch])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [pk for batch in taken for pk in batch]
    assert len(ids) == len(set(ids)) == 200
    assert Job.objects.filter(status="processing", attempt=1).count() == 200


@pytest.mark.parametrize("result", ["text", 7, [1, "two"], {"nested": {"deep": [None, True]}}])
def test_finish_stores_any_json_result_as_the_handler_returned_it(result):
    Job.enqueue("noop")
    (job,) = claim()
    Job.objects.finish([outcome(job, result=result)])
    assert Job.objects.get(pk=job.pk).result == result


def test_enqueue_returns_the_stored_job_and_sends_post_save_for_receivers():
    from django.db.models.signals import post_save

    seen = []

    def receiver(sender, instance, created, **kwargs):
        seen.append((instance.pk, created))

    post_save.connect(receiver, sender=Job)
    try:
        job = Job.enqueue("echo", {"a": [1, 2]}, priority=5, queue="mail", max_attempts=4)
    finally:
        post_save.disconnect(receiver, sender=Job)
    assert seen == [(job.pk, True)]
    stored = Job.objects.get(pk=job.pk)
    for name in ("public_id", "type", "payload", "status", "priority", "queue", "run_at",
                 "max_attempts", "created_at", "attempt"):
        assert getattr(stored, name) == getattr(job, name)
    assert (stored.status, stored.priority, stored.payload) == ("pending", 5, {"a": [1, 2]})
    assert not job._state.adding


def test_enqueue_many_gives_each_job_its_own_stored_row():
    jobs = Job.enqueue_many("echo", [{"n": n} for n in range(30)], priority="high")
    stored = {j.pk: j for j in Job.objects.all()}
    assert len(stored) == 30
    for job in jobs:
        assert stored[job.pk].public_id == job.public_id
        assert stored[job.pk].payload == job.payload
        assert stored[job.pk].priority == 10
    assert Job.enqueue_many("echo", []) == []


@pytest.mark.django_db(transaction=True)
def test_enqueues_in_a_rolled_back_transaction_leave_no_job():
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        Job.enqueue("noop")
        Job.enqueue_many("noop", [{}, {}])
        raise RuntimeError("roll back")
    assert not Job.objects.exists()


@pytest.fixture
def slow_backoff(settings):
    """A backoff a turn's own claim cannot reach. With the tests' 10 ms one, the claim that
    follows the finish (outside PostgreSQL a second statement) may take a failed job back."""
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "BACKOFF_BASE": 60, "BACKOFF_CAP": 60}


def turn(outcomes, limit=10, **kwargs):
    return Job.objects.finish_and_claim(outcomes, worker_id=kwargs.pop("worker_id", "w1"),
                                        limit=limit, lease_seconds=30, **kwargs)


def test_a_turn_writes_the_outcomes_then_claims_the_next_jobs_in_order(slow_backoff):
    first = Job.enqueue_many("noop", [{}] * 2)
    fails = Job.enqueue("always_fails", max_attempts=3)
    claimed = {j.pk: j for j in claim(limit=3)}
    later = Job.enqueue_many("noop", [{}] * 3)
    high = Job.enqueue("noop", priority="high")
    outcomes = [outcome(claimed[j.pk]) for j in first]
    outcomes.append(run(claimed[fails.pk]))
    written, jobs = turn(outcomes, limit=3)
    assert sorted(o.job.pk for o in written) == sorted([*[j.pk for j in first], fails.pk])
    assert [j.pk for j in jobs] == [high.pk, later[0].pk, later[1].pk]
    assert all(j.status == "processing" and j.attempt == 1 for j in jobs)
    status = dict(Job.objects.values_list("pk", "status"))
    assert [status[j.pk] for j in first] == ["completed", "completed"]
    assert status[fails.pk] == "failed"  # backing off: not claimed again by the same turn
    assert sorted(JobAttempt.objects.values_list("outcome", flat=True)) == [
        "completed", "completed", "failed"]
    assert Job.objects.get(pk=later[0].pk).lease_token == jobs[0].lease_token


def test_a_turn_with_a_taken_over_lease_drops_that_outcome_and_still_claims():
    stale_job, fresh_job = Job.enqueue("noop"), Job.enqueue("noop")
    claimed = {j.pk: j for j in claim()}
    waiting = Job.enqueue("noop")
    Job.objects.filter(pk=stale_job.pk).update(lease_token=uuid.uuid4(), attempt=2)
    written, jobs = turn([outcome(claimed[stale_job.pk]), outcome(claimed[fresh_job.pk])])
    assert [o.job.pk for o in written] == [fresh_job.pk]
    assert [j.pk for j in jobs] == [waiting.pk]
    assert Job.objects.get(pk=stale_job.pk).status == "processing"


def test_a_turn_with_nothing_left_to_claim_still_writes_the_outcomes():
    Job.enqueue("noop")
    (job,) = claim()
    written, jobs = turn([outcome(job)])
    assert [o.job.pk for o in written] == [job.pk] and jobs == []
    assert Job.objects.get(pk=job.pk).status == "completed"
    written, jobs = turn([], limit=0)
    assert (written, jobs) == ([], [])


@requires_postgres
def test_a_plain_turn_is_one_statement_on_postgresql():
    Job.enqueue_many("noop", [{}] * 6)
    claimed = claim(limit=3)
    with CaptureQueriesContext(connection) as queries:
        written, jobs = turn([outcome(job) for job in claimed], limit=3)
    assert len(sent(queries)) == 1
    assert (len(written), len(jobs)) == (3, 3)


@requires_postgres
def test_a_turn_with_a_callback_takes_the_transaction_path_and_enqueues_it(settings):
    settings.DJANGO_JOBS = {"CALLBACK_ALLOWED_HOSTS": ["hooks.example.com"],
                            "CALLBACK_SECRET": "s3cret"}
    hooked = Job.enqueue("noop", callback_url="https://hooks.example.com/done")
    (job,) = claim()
    with CaptureQueriesContext(connection) as queries:
        written, _ = turn([outcome(job)])
    assert [o.job.pk for o in written] == [hooked.pk]
    assert len(queries.captured_queries) > 1
    assert Job.objects.filter(type="django_jobs.callback").count() == 1


def test_claimed_jobs_are_built_through_init_when_something_listens_to_post_init():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance.pk)

    Job.enqueue_many("noop", [{}] * 2)
    post_init.connect(receiver, sender=Job)
    try:
        claimed = claim()
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert sorted(seen) == sorted(job.pk for job in claimed)
    assert not claim() and [j._state.adding for j in claimed] == [False, False]


@requires_postgres
def test_the_statements_also_run_on_djangos_own_cursor(monkeypatch):
    """Under psycopg2 (anything but psycopg 3) pgcursor runs the same statements on Django's
    cursor, bound on the client; here psycopg 3's client cursor stands in for it."""
    from django_jobs.engine.postgres import cursor as pgcursor

    monkeypatch.setattr(pgcursor, "_psycopg3", lambda connection: False)
    first = Job.enqueue("noop")
    Job.enqueue_many("noop", [{}] * 2)
    claimed = claim(limit=1)
    assert [j.pk for j in claimed] == [first.pk]
    with CaptureQueriesContext(connection) as queries:
        written, jobs = turn([outcome(claimed[0])], limit=5)
    assert "FOR UPDATE SKIP LOCKED" in sent(queries)[0]
    assert [o.job.pk for o in written] == [first.pk] and len(jobs) == 2
    assert Job.objects.get(pk=first.pk).status == "completed"
    assert JobAttempt.objects.count() == 1


@requires_postgres
def test_a_turn_with_no_outcomes_is_the_claim_alone_on_postgresql():
    """An idle worker's poll: one statement, no BEGIN and COMMIT around it."""
    Job.enqueue("noop")
    with CaptureQueriesContext(connection) as queries:
        written, jobs = turn([], limit=5)
    assert (written, len(jobs)) == ([], 1)
    assert [sql for sql in sent(queries) if sql in ("BEGIN", "COMMIT")] == []
    assert len(sent(queries)) == 1


@requires_postgres
@pytest.mark.django_db(transaction=True)  # closes its connection: no test transaction around
def test_claims_of_every_batch_size_stay_prepared():
    """One prepared claim per LIMIT: a worker of high concurrency keeps them all (psycopg's
    default room of 100 would evict and re-plan them)."""
    connection.close()
    Job.enqueue("noop", delay=3600)  # nothing due: each claim finds nothing
    for limit in range(1, 131):
        assert claim(limit=limit) == []
    claims = [s for s in prepared_statements() if "FOR UPDATE SKIP LOCKED" in s]
    assert len(claims) == 130


def test_a_built_job_is_what_the_model_gives_for_the_same_values():
    """instances.build fills __dict__ directly; it must equal Model(**values) field by field,
    callable defaults called afresh for each instance."""
    from django.utils import timezone

    from django_jobs.models.instances import build

    now = timezone.now()
    values = {"type": "noop", "payload": {"a": 1}, "priority": 10, "run_at": now,
              "created_at": now, "updated_at": now}
    built, made = build(Job, dict(values)), Job(**values)
    fields = [f.attname for f in Job._meta.concrete_fields if f.attname != "public_id"]
    assert {n: getattr(built, n) for n in fields} == {n: getattr(made, n) for n in fields}
    assert built.public_id.startswith("j-") and built.public_id != build(Job, values).public_id
    assert (built._state.adding, built._state.db) == (True, None)
    first, second = build(Job, {"type": "noop"}), build(Job, {"type": "noop"})
    assert first.payload == {} and first.payload is not second.payload  # a dict each


def test_enqueue_builds_through_init_when_something_listens_to_pre_init():
    from django.db.models.signals import pre_init

    seen = []

    def receiver(sender, args, kwargs, **extra):
        seen.append(kwargs.get("type"))

    pre_init.connect(receiver, sender=Job)
    try:
        job = Job.enqueue("noop", {"x": 1})
    finally:
        pre_init.disconnect(receiver, sender=Job)
    assert seen == ["noop"]
    stored = Job.objects.get(pk=job.pk)
    assert (stored.payload, stored.status, stored.public_id) == ({"x": 1}, "pending",
                                                                 job.public_id)


def test_an_enqueued_job_reads_back_as_it_was_built_none_columns_included():
    """The INSERT leaves out the columns whose value is None: they must read back NULL, and the
    rest as given."""
    job = Job.enqueue("noop", {"n": 1}, priority="high", queue="mail")
    stored = Job.objects.get(pk=job.pk)
    for field in Job._meta.concrete_fields:
        assert getattr(stored, field.attname) == getattr(job, field.attname), field.attname
    assert stored.result is None and stored.unique_key is None and stored.lease_token is None


@pytest.mark.parametrize("path", ["finish", "turn"])
def test_a_written_outcome_leaves_plain_values_on_the_job_never_sql_expressions(path,
                                                                             slow_backoff):
    """The finish writes unique_key with an SQL expression; the instance the worker logs and
    signals with must hold plain values, as a fresh read of the row does."""
    Job.enqueue_many("noop", [{}] * 2)
    done, failed = claim(limit=2)
    outcomes = [outcome(done), outcome(failed, kind="failed", error={"type": "E"})]
    written = Job.objects.finish(outcomes) if path == "finish" else turn(outcomes, limit=0)[0]
    assert len(written) == 2
    for result in written:
        stored = Job.objects.get(pk=result.job.pk)
        for field in Job._meta.concrete_fields:
            value = getattr(result.job, field.attname)
            assert not hasattr(value, "resolve_expression"), field.attname
            if field.attname not in ("updated_at", "run_at"):
                assert value == getattr(stored, field.attname), field.attname


@pytest.mark.parametrize("path", ["finish", "turn"])
def test_attempt_rows_keep_the_outcome_times_to_the_microsecond_and_its_cpu_time(path,
                                                                                 slow_backoff):
    """The times travel as integer microseconds (PostgreSQL) or datetimes (ORM): both read back
    exactly, and a failure's retry time too."""
    Job.enqueue_many("noop", [{}] * 2)
    done, failed = claim(limit=2)
    started = timezone.now().replace(microsecond=123457) - timedelta(seconds=2)
    results = [
        AttemptOutcome(job=done, kind="completed", started_at=started,
                       finished_at=started + timedelta(microseconds=999_999), cpu_time=0.25),
        AttemptOutcome(job=failed, kind="failed", started_at=started, finished_at=started,
                       error={"type": "E"}, cpu_time=None),
    ]
    written = Job.objects.finish(results) if path == "finish" else turn(results, limit=0)[0]
    assert len(written) == 2
    first = JobAttempt.objects.get(job_id=done.pk)
    assert (first.started_at, first.finished_at) == (started, started
                                                      + timedelta(microseconds=999_999))
    assert first.cpu_time == 0.25
    second = JobAttempt.objects.get(job_id=failed.pk)
    assert second.cpu_time is None and second.started_at == started
    stored = Job.objects.get(pk=failed.pk)
    assert stored.status == "failed" and stored.run_at == failed.run_at > started


def test_claimed_json_columns_are_decoded_for_the_whole_batch_each_job_its_own():
    payloads = [{"n": 1, "s": "a,b]"}, [1, 2], "text", 7, None, {"nested": {"x": [None]}}]
    Job.enqueue_many("noop", payloads)
    jobs = claim(limit=10)
    assert [job.payload for job in jobs] == [{} if p is None else p for p in payloads]
    assert all(job.result is None and job.error is None and job.progress is None
               for job in jobs)


@requires_postgres
@pytest.mark.parametrize("result", [
    None, "text", '{"not": "parsed"}', "null", 7, 2**53 + 1, 1.5, True, [1, None],
    {"é": "😀", "n": {"x": [], "y": None}},
])
def test_the_finish_statement_writes_what_the_orm_update_writes(result, slow_backoff):
    """The finish statement sends a batch's outcomes as one JSON text, encoded by the C json
    module (``engine/postgres.finish_params``). Every column it writes must read back as the
    ORM's update writes it: the same batch with a snooze in it takes the ORM path."""
    Job.enqueue_many("noop", [{}] * 7, max_attempts=2)
    jobs = claim(limit=7)
    error = {"type": "E", "message": f"{result!r} \u00e9", "details": {"value": result}}

    def batch(three):
        done, failed, canceled = three
        return [outcome(done, result=result, cpu_time=0.5, peak_memory=2**40),
                outcome(failed, kind="failed", error=error),
                outcome(canceled, kind="canceled", error=error)]

    with CaptureQueriesContext(connection) as queries:
        assert len(Job.objects.finish(batch(jobs[:3]))) == 3
    assert len(sent(queries)) == 1  # the statement
    snooze = outcome(jobs[6], kind="snoozed", snooze_seconds=60)
    assert len(Job.objects.finish([*batch(jobs[3:6]), snooze])) == 4  # the ORM's updates
    same = ["status", "result", "error", "attempt", "unique_key", "leased_until", "worker_id",
            "lease_token", "max_attempts", "crashes"]
    for by_statement, by_orm in zip(jobs[:3], jobs[3:6], strict=True):
        first, second = (Job.objects.values(*same).get(pk=j.pk) for j in (by_statement, by_orm))
        assert first == second
        sql_null = [Job.objects.filter(pk=j.pk, result__isnull=True, error__isnull=True).exists()
                    for j in (by_statement, by_orm)]  # SQL NULL, not JSON null: both read None
        assert sql_null[0] == sql_null[1]
        rows = [JobAttempt.objects.values("outcome", "error", "cpu_time", "peak_memory",
                                          "number", "worker_id").get(job_id=j.pk)
                for j in (by_statement, by_orm)]
        assert rows[0] == rows[1]


def test_a_batch_with_a_text_that_is_not_json_is_decoded_one_value_at_a_time():
    """What JSONField.from_db_value does for text it cannot parse: keep the text."""
    from types import SimpleNamespace

    from django_jobs.engine.postgres.rows import load_column, load_json

    rows = [SimpleNamespace(payload=text) for text in ['{"a": 1}', None, "not json", "[2]"]]
    load_column(rows, "payload", load_json, connection)
    assert [row.payload for row in rows] == [{"a": 1}, None, "not json", [2]]


def test_a_claimed_job_is_what_a_queryset_reads_back_field_by_field():
    """The claim builds Jobs by filling __dict__ (``engine/postgres/rows.py``) where ``from_db`` is
    Django's own: each must equal the plain path's ``Job.objects.get``, in every field."""
    Job.enqueue_many("noop", [{"n": 1, "s": "é"}, [1, None], "text", None, 7])
    for job in claim(limit=10):
        stored = Job.objects.get(pk=job.pk)
        for field in Job._meta.concrete_fields:
            assert getattr(job, field.attname) == getattr(stored, field.attname), field.attname
        assert (job._state.adding, job._state.db) == (False, stored._state.db)
