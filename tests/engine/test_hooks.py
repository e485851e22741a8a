"""The feature hooks (django_jobs/engine/hooks.py): a feature added here joins the engine's verbs on
the real database, in their transactions, beside the features the app registers."""

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.engine import hooks
from django_jobs.models import Job
from django_jobs.worker.heartbeat import Periodic
from tests.helpers import claim, run_burst

pytestmark = pytest.mark.django_db(transaction=True)
S = Job.Status


@pytest.fixture
def add_feature():
    added = []

    def add(feature):
        added.append(hooks.register(feature))
        return feature

    yield add
    for feature in added:
        hooks.unregister(feature)


def completed(job):
    now = timezone.now()
    return AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)


def test_the_app_registers_its_features_in_the_order_their_hooks_run():
    assert [feature.name for feature in hooks.registered()] == [
        "callbacks", "follow-ups", "dependencies", "groups", "unique and dependencies", "limits",
        "crash counting", "schedules", "retention", "workflow-waits",
    ]


def step_names(periodic):
    """The steps' names, the horizon's left out where the database reads none (PostgreSQL's
    alone does)."""
    names = [type(step).__name__ for step in periodic.steps()]
    assert ("HorizonWatch" in names) == (connection.vendor == "postgresql")
    return [name for name in names if name != "HorizonWatch"]


def test_a_heartbeat_runs_the_schedules_pruning_the_release_of_waiting_jobs_then_the_horizon():
    schedules = {"tick": {"type": "noop", "every": 60}}
    with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "SCHEDULES": schedules}):
        periodic = Periodic()
        # Pruning from the second heartbeat: its first pass falls at a random point of an interval
        assert step_names(periodic) == ["Ticker", "ReleaseWaiting"]
        periodic("w1")
        assert step_names(periodic) == ["Ticker", "AutoPruner", "ReleaseWaiting"]


def test_a_feature_nothing_configures_has_no_step_and_joins_no_claim():
    assert "SCHEDULES" not in settings.DJANGO_JOBS  # no schedule: no Ticker
    periodic = Periodic()
    periodic("w1")
    assert step_names(periodic) == ["AutoPruner", "ReleaseWaiting"]
    with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "PRUNE_INTERVAL": 0}):
        assert step_names(periodic) == ["ReleaseWaiting"]  # read at each beat
    assert not hooks.limits_claims()  # no registered type has limits


def test_a_feature_with_marks_sees_only_the_ends_of_jobs_that_carry_one(add_feature):
    seen = []

    class Tagged(hooks.Feature):
        marks = ("callback_url",)

        def after_finish(self, manager, written, now):
            seen.append([outcome.job.pk for outcome in written])

        def ended(self, jobs, using):
            seen.append([job.pk for job in jobs])

    add_feature(Tagged())
    plain = Job.enqueue("echo", {})
    (claimed,) = claim()
    Job.objects.finish_and_claim([completed(claimed)], worker_id="w1", limit=0, lease_seconds=30)
    assert Job.objects.filter(pk=plain.pk).cancel() == 0 and seen == []
    assert not hooks.joins_finish(claimed)
    hooked = Job.enqueue("echo", {}, callback_url="http://127.0.0.1:9/done")
    (claimed,) = claim()
    assert hooks.joins_finish(claimed)
    Job.objects.finish_and_claim([completed(claimed)], worker_id="w1", limit=0, lease_seconds=30)
    waiting = Job.enqueue("echo", {}, callback_url="http://127.0.0.1:9/done")
    Job.objects.filter(pk__in=[plain.pk, waiting.pk]).cancel()
    assert seen == [[hooked.pk], [waiting.pk]]


def test_a_feature_reads_the_option_it_declares_and_takes_over_the_insert(add_feature):
    with pytest.raises(TypeError, match="label"):
        Job.objects.enqueue("echo", {}, label="x")  # no such option

    asked = []

    class Labels(hooks.Feature):
        enqueue_reads = ("queue",)

        def enqueue_insert(self, type, options):
            asked.append(options.queue)
            if options.queue != "labelled":
                return None

            def insert(manager, jobs):
                for job in jobs:
                    job.payload = {**job.payload, "label": job.queue}
                created = manager.bulk_create(jobs)
                for job in created:
                    job.duplicate = False
                return created

            return insert

    add_feature(Labels())
    one = Job.objects.enqueue("echo", {"n": 1}, queue="labelled")
    many = Job.objects.enqueue_many("echo", [{"n": 2}, {"n": 3}], queue="labelled")
    other = Job.enqueue("echo", {"n": 4}, queue="other")
    plain = Job.enqueue("echo", {"n": 5})
    stored = dict(Job.objects.values_list("pk", "payload"))
    assert stored[one.pk] == {"n": 1, "label": "labelled"}
    assert [stored[job.pk] for job in many] == [{"n": 2, "label": "labelled"},
                                                {"n": 3, "label": "labelled"}]
    assert stored[other.pk] == {"n": 4} and stored[plain.pk] == {"n": 5}
    assert asked == ["labelled", "labelled", "other"]  # not asked without the option


def test_two_features_taking_over_one_insert_is_an_error(add_feature):
    class Mine(hooks.Feature):
        enqueue_reads = ("unique_key",)

        def enqueue_insert(self, type, options):
            return lambda manager, jobs: jobs

    add_feature(Mine())
    with pytest.raises(RuntimeError, match="two features take over the insert"):
        Job.enqueue("echo", {}, unique_key="k")  # unique keys take it over too
    assert not Job.objects.exists()


def test_after_finish_runs_in_the_finish_transaction_with_what_was_written(add_feature):
    seen = []

    class Audit(hooks.Feature):
        def joins_finish(self, job):
            return job.type == "echo"

        def after_finish(self, manager, written, now):
            for outcome in written:
                seen.append((outcome.job.pk, outcome.kind, outcome.job.status))
                manager.enqueue("noop", {"after": outcome.job.pk})

    add_feature(Audit())
    job = Job.enqueue("echo", {})
    (claimed,) = claim()
    written, _ = Job.objects.finish_and_claim(
        [completed(claimed)], worker_id="w1", limit=0, lease_seconds=30)
    assert [outcome.job.pk for outcome in written] == [job.pk]
    assert seen == [(job.pk, S.COMPLETED, S.COMPLETED)]
    assert Job.objects.filter(type="noop", payload__after=job.pk).count() == 1


def test_a_hook_that_raises_rolls_the_finish_back(add_feature):
    class Broken(hooks.Feature):
        def joins_finish(self, job):
            return True

        def after_finish(self, manager, written, now):
            manager.enqueue("noop", {})
            raise RuntimeError("the feature failed")

    add_feature(Broken())
    job = Job.enqueue("echo", {})
    (claimed,) = claim()
    with pytest.raises(RuntimeError, match="the feature failed"):
        Job.objects.finish_and_claim([completed(claimed)], worker_id="w1", limit=1,
                                     lease_seconds=30)
    job.refresh_from_db()
    assert job.status == S.PROCESSING
    assert not Job.objects.filter(type="noop").exists()


def test_a_turn_that_a_feature_joins_opens_no_savepoint(add_feature):
    seen = []

    class Audit(hooks.Feature):
        def joins_finish(self, job):
            return True

        def after_finish(self, manager, written, now):
            seen.extend(outcome.job.pk for outcome in written)

    add_feature(Audit())
    first, second = Job.enqueue("echo", {}), Job.enqueue("echo", {})
    (claimed,) = claim(limit=1)
    with CaptureQueriesContext(connection) as queries:
        written, jobs = Job.objects.finish_and_claim(
            [completed(claimed)], worker_id="w1", limit=1, lease_seconds=30)
    assert [o.job.pk for o in written] == seen == [first.pk]
    assert [j.pk for j in jobs] == [second.pk]
    statements = [q["sql"].upper() for q in queries.captured_queries]
    assert not [sql for sql in statements if "SAVEPOINT" in sql]


def test_a_feature_late_in_turn_runs_after_the_turns_claim_and_its_error_puts_all_back(
        add_feature):
    seen = []

    class Late(hooks.Feature):
        late_in_turn = True  # as groups: its lock held for its own statement and the commit

        def joins_finish(self, job):
            return True

        def after_finish(self, manager, written, now):
            seen.append(sorted(manager.filter(status=S.PROCESSING).values_list("pk", flat=True)))
            if len(seen) == 2:
                raise RuntimeError("the late feature failed")

    add_feature(Late())
    first, second, third = (Job.enqueue("echo", {}) for _ in range(3))
    (claimed,) = claim(limit=1)
    written, jobs = Job.objects.finish_and_claim(
        [completed(claimed)], worker_id="w1", limit=1, lease_seconds=30)
    assert [o.job.pk for o in written] == [first.pk] and [j.pk for j in jobs] == [second.pk]
    assert seen == [[second.pk]]  # the claim had taken the second, the first was finished
    outcome = completed(jobs[0])
    with pytest.raises(RuntimeError, match="the late feature failed"):
        Job.objects.finish_and_claim([outcome], worker_id="w1", limit=1, lease_seconds=30)
    assert seen[1] == [third.pk]
    # All rolled back, and the outcome and its job as they were before the turn
    assert (outcome.kind, outcome.job.status) == ("completed", S.PROCESSING)
    assert dict(Job.objects.values_list("pk", "status")) == {
        first.pk: S.COMPLETED, second.pk: S.PROCESSING, third.pk: S.PENDING}
    written, _ = Job.objects.finish_and_claim([outcome], worker_id="w1", limit=0,
                                              lease_seconds=30)
    assert [o.job.pk for o in written] == [second.pk]


def test_a_finish_in_the_callers_transaction_is_a_savepoint_the_caller_goes_on_after(
        add_feature):
    class Broken(hooks.Feature):
        def joins_finish(self, job):
            return True

        def after_finish(self, manager, written, now):
            raise RuntimeError("the feature failed")

    add_feature(Broken())
    job = Job.enqueue("echo", {})
    (claimed,) = claim()
    now = timezone.now()
    snoozed = AttemptOutcome(job=claimed, kind="snoozed", started_at=now, finished_at=now,
                             snooze_seconds=60)  # the ORM's finish on every database
    with transaction.atomic():
        with pytest.raises(RuntimeError, match="the feature failed"):
            Job.objects.finish([snoozed])
        Job.enqueue("noop", {})  # the caller's transaction goes on
    job.refresh_from_db()
    assert job.status == S.PROCESSING
    assert Job.objects.filter(type="noop").count() == 1


def test_a_feature_that_admits_nothing_leaves_every_job_ready(add_feature):
    class Closed(hooks.Feature):
        def limits_claims(self):
            return True

        def admit(self, manager, jobs, ready, limit, now):
            return []

        def claim_without_row_locks(self, manager, ready, claim, limit, now):
            return []

    jobs = Job.objects.enqueue_many("echo", [{}, {}])
    add_feature(Closed())
    assert claim() == []
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)) \
        == {S.PENDING}
    hooks.unregister(hooks.registered()[-1])
    assert len(claim()) == 2  # the same jobs, once no feature refuses them


def test_ended_gets_the_jobs_a_feature_held_for_the_cancel_as_canceled(add_feature):
    ended = []

    class Watch(hooks.Feature):
        def hold_for_cancel(self, cancelable):
            return list(cancelable.filter(type="echo"))

        def ended(self, jobs, using):
            ended.extend((job.pk, job.status) for job in jobs)

    add_feature(Watch())
    echo = Job.enqueue("echo", {})
    other = Job.enqueue("noop", {})
    assert Job.objects.filter(pk__in=[echo.pk, other.pk]).cancel() == 2
    assert ended == [(echo.pk, S.CANCELED)]


def test_a_features_periodic_step_runs_on_a_workers_heartbeat_until_it_is_unregistered(
        add_feature):
    beats = []

    class Beat(hooks.Feature):
        def periodic_steps(self):
            return [beats.append]

    feature = add_feature(Beat())
    run_burst(worker_id="w-beat")  # a burst worker beats once before its first claim
    assert beats and set(beats) == {"w-beat"}
    hooks.unregister(feature)
    seen = len(beats)
    run_burst(worker_id="w-beat")
    assert len(beats) == seen


def test_a_worker_makes_a_features_steps_once_and_keeps_them_between_heartbeats(add_feature):
    made = []

    class Counter:
        def __init__(self):
            self.beats = 0
            made.append(self)

        def __call__(self, worker_id):
            self.beats += 1

    class Counting(hooks.Feature):
        def periodic_steps(self):
            return [Counter()]

    add_feature(Counting())
    one, other = Periodic(), Periodic()
    one("w1")
    one("w1")
    other("w2")
    assert [counter.beats for counter in made] == [2, 1]


def test_a_failing_step_is_logged_and_the_heartbeat_goes_on(add_feature, caplog):
    ran = []

    def broken(worker_id):
        raise ValueError("bad setting")

    class Steps(hooks.Feature):
        def periodic_steps(self):
            return [broken, ran.append]

    add_feature(Steps())
    Periodic()("w1")
    assert ran == ["w1"]
    assert "worker w1: broken failed" in caplog.text
