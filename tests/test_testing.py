"""django_jobs.testing: jobs run inline inside the test's transaction, as a worker runs them."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import TestCase, override_settings

from django_jobs.models import Job, JobAttempt, QueueState
from django_jobs.signals import job_finished
from django_jobs.testing import WORKER_ID, TooManyJobs, assert_enqueued, enqueued_jobs, run_jobs
from tests.conftest import on_postgres
from tests.models import Execution

SLOW_BACKOFF = {"BACKOFF_BASE": 600.0, "BACKOFF_CAP": 600.0, "BACKOFF_JITTER": False}


class RunJobsTests(TestCase):
    def test_runs_the_due_jobs_in_claim_order_and_records_attempts(self):
        low = Job.enqueue("echo", {"n": 1})
        high = Job.enqueue("echo", {"n": 2}, priority="high")
        ran = run_jobs()
        self.assertEqual([job.pk for job in ran], [high.pk, low.pk])
        self.assertEqual([job.status for job in ran], ["completed", "completed"])
        low.refresh_from_db()
        self.assertEqual((low.status, low.result), ("completed", {"echo": {"n": 1}}))
        attempt = JobAttempt.objects.get(job=low)
        self.assertEqual((attempt.outcome, attempt.worker_id), ("completed", WORKER_ID))
        self.assertEqual(run_jobs(), [])

    def test_leaves_scheduled_jobs_unless_include_delayed(self):
        later = Job.enqueue("echo", {}, delay=timedelta(hours=1))
        self.assertEqual(run_jobs(), [])
        later.refresh_from_db()
        self.assertEqual(later.status, "pending")
        self.assertEqual([job.pk for job in run_jobs(include_delayed=True)], [later.pk])

    @override_settings(DJANGO_JOBS=SLOW_BACKOFF)
    def test_a_failure_waits_out_its_backoff_as_in_production(self):
        job = Job.enqueue("always_fails", {})
        (ran,) = run_jobs()
        self.assertEqual((ran.status, ran.attempt), ("failed", 1))
        self.assertEqual(ran.error["type"], "RuntimeError")
        self.assertGreater(ran.run_at, ran.updated_at + timedelta(seconds=500))
        self.assertEqual(run_jobs(), [])
        job.refresh_from_db()
        self.assertEqual(job.status, "failed")

    @override_settings(DJANGO_JOBS=SLOW_BACKOFF)
    def test_include_delayed_spends_every_attempt_to_dead(self):
        Job.enqueue("always_fails", {})
        ran = run_jobs(include_delayed=True)
        self.assertEqual([(j.status, j.attempt) for j in ran],
                         [("failed", 1), ("failed", 2), ("dead", 3)])

    def test_permanent_errors_go_dead_and_unknown_types_wait_as_on_a_worker(self):
        Job.enqueue("permanent", {})
        unknown = Job.objects.create(type="nobody_handles_this", payload={})
        # A backoff long enough that the handed-back job is not due again in the same call.
        slow = {**settings.DJANGO_JOBS, "BACKOFF_BASE": 60, "BACKOFF_CAP": 60}
        with override_settings(DJANGO_JOBS=slow):
            ran = run_jobs()
        self.assertEqual([job.status for job in ran], ["dead", "pending"])
        unknown.refresh_from_db()
        self.assertEqual((unknown.status, unknown.error["type"]), ("pending", "UnknownJobType"))

    def test_an_unknown_type_goes_dead_at_once_with_no_grace(self):
        unknown = Job.objects.create(type="nobody_handles_this", payload={})
        with override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "UNKNOWN_TYPE_GRACE": 0}):
            self.assertEqual([job.status for job in run_jobs()], ["dead"])
        unknown.refresh_from_db()
        self.assertEqual(unknown.error["type"], "UnknownJobType")

    def test_follow_ups_run_in_the_same_call(self):
        first = Job.enqueue("with_followup", {"then": "echo"})
        ran = run_jobs()
        self.assertEqual([job.type for job in ran], ["with_followup", "echo"])
        self.assertEqual(ran[1].result, {"echo": {"after": first.public_id}})

    def test_a_dependent_runs_once_its_dependency_completed(self):
        first = Job.enqueue("echo", {"n": 1}, priority="low")
        then = Job.enqueue("echo", {"n": 2}, priority="high", depends_on=[first])
        self.assertEqual(enqueued_jobs(status="waiting"), [then])
        self.assertEqual([job.pk for job in run_jobs()], [first.pk, then.pk])

    def test_a_failed_job_leaves_no_follow_up(self):
        run_jobs()
        Job.enqueue("with_followup", {"fail": True})
        self.assertEqual([job.status for job in run_jobs()], ["dead"])
        self.assertEqual(Job.objects.filter(type="echo").count(), 0)

    def test_only_the_queues_asked_for_and_never_a_paused_one(self):
        mail = Job.enqueue("echo", {}, queue="emails")
        other = Job.enqueue("echo", {}, queue="reports")
        QueueState.objects.pause("reports")
        self.assertEqual(run_jobs(queues=["reports"]), [])
        self.assertEqual([job.pk for job in run_jobs()], [mail.pk])
        QueueState.objects.resume("reports")
        self.assertEqual([job.pk for job in run_jobs(queues=["reports"])], [other.pk])

    def test_a_handler_that_snoozes_for_ever_stops_at_max_jobs(self):
        Job.enqueue("snoozer", {"times": 1000, "seconds": 60})
        with self.assertRaisesMessage(TooManyJobs, "ran 5 attempts"):
            run_jobs(include_delayed=True, max_jobs=5)
        self.assertEqual(JobAttempt.objects.filter(outcome="snoozed").count(), 5)
        self.assertEqual(Job.objects.get().status, "pending")

    def test_a_query_error_in_the_handler_leaves_the_test_transaction_usable(self):
        broken = Job.enqueue("bad_query", {})
        after = Job.enqueue("record", {})
        ran = run_jobs()
        self.assertEqual([job.status for job in ran], ["dead", "completed"])
        broken.refresh_from_db()
        self.assertIn("django_jobs_no_such_table", broken.error["message"])
        # PostgreSQL's transaction broke: the failed attempt's writes went with its savepoint.
        # SQLite's did not: its writes stay, as they would under a worker on either database.
        kept = [after.public_id] if on_postgres() else [broken.public_id, after.public_id]
        self.assertEqual(list(Execution.objects.values_list("job_public_id", flat=True)), kept)

    def test_sends_job_finished_for_each_attempt(self):
        seen = []

        def receiver(sender, job, outcome, **kwargs):
            seen.append((job.type, outcome))

        job_finished.connect(receiver)
        self.addCleanup(job_finished.disconnect, receiver)
        Job.enqueue("echo", {})
        Job.enqueue("permanent", {})
        run_jobs()
        self.assertEqual(seen, [("echo", "completed"), ("permanent", "dead")])


class EnqueuedTests(TestCase):
    def test_enqueued_jobs_lists_what_waits_to_run(self):
        a = Job.enqueue("echo", {"n": 1})
        b = Job.enqueue("noop", {}, queue="emails")
        self.assertEqual(enqueued_jobs(), [a, b])
        self.assertEqual(enqueued_jobs("noop"), [b])
        self.assertEqual(enqueued_jobs(queue="default"), [a])
        run_jobs()
        self.assertEqual(enqueued_jobs(), [])

    def test_assert_enqueued_matches_type_payload_and_count(self):
        first = Job.enqueue("echo", {"n": 1})
        Job.enqueue("echo", {"n": 2})
        self.assertEqual(assert_enqueued("echo", {"n": 1}), [first])
        self.assertEqual(len(assert_enqueued("echo", count=2)), 2)
        self.assertEqual(assert_enqueued("noop", count=0), [])

    def test_assert_enqueued_says_what_was_there(self):
        Job.enqueue("echo", {"n": 1})
        with self.assertRaisesMessage(
            AssertionError,
            "expected a job of type 'echo' with payload {'n': 2}, found 0; "
            "enqueued: [('echo', {'n': 1})]",
        ):
            assert_enqueued("echo", {"n": 2})
        with self.assertRaisesMessage(AssertionError, "expected 2 job(s) of type 'echo', found 1"):
            assert_enqueued("echo", count=2)
        with self.assertRaisesMessage(AssertionError, "enqueued: nothing"):
            Job.objects.all().delete()
            assert_enqueued("echo")


def test_the_jobs_fixture_runs_jobs_and_checks_what_was_enqueued(jobs):
    job = Job.enqueue("echo", {"n": 3})
    assert jobs.enqueued("echo") == [job]
    assert jobs.assert_enqueued("echo", {"n": 3}, count=1) == [job]
    assert [(j.pk, j.status) for j in jobs.run()] == [(job.pk, "completed")]
    assert jobs.enqueued() == []


@pytest.mark.django_db(transaction=True)
def test_without_a_test_transaction_handlers_run_as_in_a_worker(jobs):
    """A transactional test: each write commits, and the handler's writes stay."""
    Job.enqueue("record", {})
    Job.enqueue("bad_query", {})
    assert [job.status for job in jobs.run()] == ["completed", "dead"]
    assert Execution.objects.count() == 2
