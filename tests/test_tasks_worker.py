"""Conformance with a real worker: tasks run by django-jobs' Worker, results read back.

Most tests run the real ``Worker`` loop in a thread of this process (``--burst`` mode), so the
task signals can be observed; ``test_runworker_subprocess_*`` start real ``runworker`` processes.
"""

import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone

from django_jobs.models import Job, JobAttempt
from django_jobs.worker import Worker, WorkerOptions

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.django_db(transaction=True),
]

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends import DatabaseBackend
    from django_jobs.backends.compat import (
        TaskResultStatus,
        default_task_backend,
        task_finished,
        task_started,
    )
    from django_jobs.exceptions import JobTimeout, PermanentError
    from tests import tasks as test_tasks
    from tests.jobs import Broken, Fragile


def drain(worker_id="tasks-worker", **options):
    """Run a real Worker in burst mode in a thread until nothing is ready; return jobs run."""
    worker = Worker(WorkerOptions(burst=True, poll_interval=0.05, worker_id=worker_id, **options))
    ran = []

    def target():
        try:
            ran.append(worker.run())
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "worker did not finish"
    return ran[0]


def drain_until_finished(result, rounds=20):
    """Drain (retries wait out their short backoff) until ``result`` is final."""
    for _ in range(rounds):
        drain()
        result.refresh()
        if result.is_finished:
            return result
        Job.objects.filter(public_id=result.id).run_now()
    raise AssertionError(f"{result.id} still {result.status} after {rounds} rounds")


class Recorder:
    """Collects task signals (sent from worker threads) as (signal, id, status, attempts)."""

    def __init__(self):
        self.events = []
        self.results = []
        self.lock = threading.Lock()

    def started(self, sender, task_result, **kwargs):
        self._add("started", sender, task_result)

    def finished(self, sender, task_result, **kwargs):
        self._add("finished", sender, task_result)

    def _add(self, name, sender, result):
        with self.lock:
            self.events.append((name, sender, result.id, result.status, result.attempts))
            self.results.append((name, result))


@pytest.fixture
def signals():
    recorder = Recorder()
    task_started.connect(recorder.started)
    task_finished.connect(recorder.finished)
    yield recorder
    task_started.disconnect(recorder.started)
    task_finished.disconnect(recorder.finished)


def test_sync_and_async_tasks_run_and_return_values_come_back():
    sync = test_tasks.echo_task.enqueue(1, [2, 3], key="v")
    async_ = test_tasks.async_echo_task.enqueue("a", n=1)
    meaning = test_tasks.calculate_meaning_of_life.enqueue()
    assert drain() == 3

    for result in (sync, async_, meaning):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished is True
        assert result.attempts == 1
        assert result.worker_ids == ["tasks-worker"]
        assert result.errors == []
        assert result.enqueued_at <= result.started_at <= result.finished_at
        assert result.last_attempted_at == result.started_at
    assert sync.return_value == {"args": [1, [2, 3]], "kwargs": {"key": "v"}}
    assert async_.return_value == {"async": True, "args": ["a"], "kwargs": {"n": 1}}
    assert default_task_backend.get_result(meaning.id).return_value == 42


def test_the_frameworks_log_lines_follow_the_task(caplog):
    """Django's own signal receivers log enqueued, RUNNING and the final state, with the id."""
    from django_jobs.backends.compat import FRAMEWORK

    logger_name = "django.tasks" if FRAMEWORK == "django.tasks" else "django_tasks"
    caplog.set_level("DEBUG", logger=logger_name)
    result = test_tasks.noop_task.enqueue()
    failed = test_tasks.failing_task_value_error.enqueue()
    Job.objects.filter(public_id=failed.id).update(max_attempts=1)
    drain()
    lines = [r.getMessage() for r in caplog.records if r.name == logger_name]
    mine = [line for line in lines if result.id in line]
    assert len(mine) == 3
    assert "enqueued" in mine[0]
    assert "state=RUNNING" in mine[1]
    assert "state=SUCCESSFUL" in mine[2]
    assert "state=FAILED" in [line for line in lines if failed.id in line][-1]


def test_a_task_returning_none_is_successful_with_none():
    result = test_tasks.noop_task.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value is None


def test_return_values_are_normalised_to_json():
    result = test_tasks.tuple_return_value.enqueue()
    drain()
    assert test_tasks.tuple_return_value.get_result(result.id).return_value == [1, ["two", "three"]]
    assert Job.objects.get(public_id=result.id).result == [1, ["two", "three"]]


def test_a_return_value_json_cannot_hold_fails_the_task_without_retry():
    result = test_tasks.complex_return_value.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1  # permanent: running it again would return the same value
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert issubclass(result.errors[0].exception_class, TypeError)
    assert "Unsupported type" in result.errors[0].traceback


@pytest.mark.parametrize(("name", "exception", "message"), [
    ("failing_task_value_error", ValueError, "This task failed due to ValueError"),
    ("failing_task_system_exit", SystemExit, "This task failed due to SystemExit"),
])
def test_exceptions_become_task_errors(name, exception, message):
    task = getattr(test_tasks, name)
    result = task.using(priority=1).enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=1)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.is_finished is True
    assert len(result.errors) == 1
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n")
    assert result.enqueued_at <= result.started_at <= result.finished_at


def test_a_complex_exception_is_recorded_whole():
    result = test_tasks.complex_exception.enqueue()
    Job.objects.filter(public_id=result.id).update(max_attempts=1)
    drain()
    result.refresh()
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback


def test_takes_context_gets_the_running_result_and_attempt():
    result = test_tasks.context_snapshot.enqueue()
    own_id = test_tasks.get_task_id.enqueue()
    drain()
    assert default_task_backend.get_result(own_id.id).return_value == own_id.id
    seen = default_task_backend.get_result(result.id).return_value
    assert seen == {
        "is_context": True, "attempt": 1, "id": result.id, "status": "RUNNING",
        "worker_ids": ["tasks-worker"], "job_attempt": 1,
    }


def test_retries_count_attempts_and_keep_every_error(signals):
    result = test_tasks.flaky_task.enqueue(succeed_on=3)
    job = Job.objects.get(public_id=result.id)
    assert job.max_attempts == 4  # from @django_jobs.task(max_attempts=4)
    drain_until_finished(result)

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 3}  # the context saw attempt 3
    assert result.attempts == 3
    assert result.worker_ids == ["tasks-worker"] * 3
    assert [e.exception_class for e in result.errors] == [Fragile, Fragile]
    assert "attempt 1 failed" in result.errors[0].traceback
    assert "attempt 2 failed" in result.errors[1].traceback
    assert result.started_at < result.last_attempted_at <= result.finished_at
    # task_started before every attempt; task_finished once, when the result is final.
    assert [(e[0], e[3], e[4]) for e in signals.events] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("started", TaskResultStatus.RUNNING, 2),
        ("started", TaskResultStatus.RUNNING, 3),
        ("finished", TaskResultStatus.SUCCESSFUL, 3),
    ]
    assert {e[1] for e in signals.events} == {DatabaseBackend}
    assert {e[2] for e in signals.events} == {result.id}


def test_the_result_sent_with_task_finished_is_the_stored_result(signals):
    succeeded = test_tasks.calculate_meaning_of_life.enqueue()
    failed = test_tasks.permanent_task.enqueue()
    retried = test_tasks.flaky_task.enqueue(succeed_on=2)
    drain_until_finished(retried)
    drain()
    for enqueued in (succeeded, failed, retried):
        [sent] = [r for name, r in signals.results if name == "finished" and r.id == enqueued.id]
        assert sent == default_task_backend.get_result(enqueued.id)
    assert [r.status for name, r in signals.results if name == "finished"] == [
        TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL,
    ]


def test_a_task_out_of_attempts_fails_and_sends_task_finished(signals):
    result = test_tasks.flaky_task.enqueue(succeed_on=99)
    drain_until_finished(result)
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 4
    assert len(result.errors) == 4
    assert Job.objects.get(public_id=result.id).status == Job.Status.DEAD
    assert signals.events[-1][0] == "finished"
    assert signals.events[-1][3] == TaskResultStatus.FAILED
    assert [e[0] for e in signals.events].count("finished") == 1


def test_a_failed_attempt_waiting_for_retry_reads_as_ready():
    result = test_tasks.slow_retry_task.enqueue(succeed_on=2)
    drain()
    assert Job.objects.get(public_id=result.id).status == Job.Status.FAILED
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert result.finished_at is None
    assert result.attempts == 1
    assert result.errors[0].exception_class is Fragile
    # get_result (refresh() keeps the task) shows when the retry is due.
    assert test_tasks.slow_retry_task.get_result(result.id).task.run_after > timezone.now()
    drain_until_finished(result)  # run_now() makes the retry due
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.attempts == 2


@pytest.mark.parametrize(("name", "exception"), [
    ("permanent_task", PermanentError),  # PermanentError: never retried
    ("listed_permanent_task", Broken),  # listed in permanent=
    ("retry_only_fragile_task", KeyError),  # not listed in retry_on=
])
def test_permanent_errors_fail_the_task_at_once(name, exception):
    result = getattr(test_tasks, name).enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1
    assert [e.exception_class for e in result.errors] == [exception]


def test_a_task_past_its_timeout_is_stopped_and_fails():
    result = test_tasks.hanging_task.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is JobTimeout


def test_decorator_options_reach_the_job_where_the_framework_passes_them():
    if test_tasks.decorated_with_options is None:
        pytest.skip("Django 6.0's @task takes no extra options; django_jobs.task is used instead")
    result = test_tasks.decorated_with_options.enqueue()
    job = Job.objects.get(public_id=result.id)
    assert (job.max_attempts, job.queue) == (2, "emails")
    drain_until_finished(result)
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2


def test_higher_priority_tasks_run_first():
    low = test_tasks.noop_task.using(priority=-50).enqueue()
    high = test_tasks.noop_task.using(priority=100).enqueue()
    normal = test_tasks.noop_task.enqueue()
    drain(concurrency=1)
    order = list(JobAttempt.objects.order_by("id").values_list("job__public_id", flat=True))
    assert order == [high.id, normal.id, low.id]


def test_a_deferred_task_does_not_run_before_run_after():
    later = test_tasks.noop_task.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    past = test_tasks.noop_task.using(run_after=timezone.now() - timedelta(minutes=1)).enqueue()
    assert drain() == 1
    later.refresh()
    past.refresh()
    assert later.status == TaskResultStatus.READY
    assert later.attempts == 0
    assert past.status == TaskResultStatus.SUCCESSFUL


def test_a_worker_serving_other_queues_leaves_the_task_alone():
    result = test_tasks.send_welcome.enqueue(5)
    assert drain(queues=["default"]) == 0
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert drain(queues=["emails"]) == 1
    result.refresh()
    assert result.return_value == {"sent_to": 5}


def test_a_canceled_task_reads_as_failed():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).cancel()
    assert drain() == 0
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 0


def test_a_malformed_payload_fails_the_job_permanently():
    result = test_tasks.noop_task.enqueue()
    Job.objects.filter(public_id=result.id).update(payload=["not", "an", "object"])
    drain()
    job = Job.objects.get(public_id=result.id)
    assert job.status == Job.Status.DEAD
    assert job.attempt == 1
    assert "payload" in job.error["message"]


def test_task_jobs_run_beside_plain_jobs():
    plain = Job.enqueue("echo", {"x": 1})
    result = test_tasks.calculate_meaning_of_life.enqueue()
    assert drain() == 2
    plain.refresh_from_db()
    assert plain.result == {"echo": {"x": 1}}
    assert test_tasks.calculate_meaning_of_life.get_result(result.id).return_value == 42


@pytest.mark.slow
def test_runworker_subprocess_runs_tasks_and_results_come_back(start_worker, tmp_path):
    marker = tmp_path / "marker.txt"
    written = test_tasks.write_marker.enqueue(str(marker), "hello")
    sync = test_tasks.echo_task.enqueue(1, b="two")
    async_ = test_tasks.async_echo_task.enqueue(3)
    context = test_tasks.context_snapshot.enqueue()
    worker = start_worker("--burst", "--worker-id", "tasks-subprocess", "--concurrency", "2")
    assert worker.wait(timeout=120) == 0, worker.output()

    assert marker.read_text() == "hello"
    assert test_tasks.write_marker.get_result(written.id).return_value == "hello"
    assert test_tasks.echo_task.get_result(sync.id).return_value == {
        "args": [1], "kwargs": {"b": "two"}
    }
    assert test_tasks.async_echo_task.get_result(async_.id).return_value["async"] is True
    seen = test_tasks.context_snapshot.get_result(context.id)
    assert seen.status == TaskResultStatus.SUCCESSFUL
    assert seen.worker_ids == ["tasks-subprocess"]
    assert seen.return_value["attempt"] == 1
    assert seen.return_value["worker_ids"] == ["tasks-subprocess"]


@pytest.mark.slow
def test_runworker_subprocess_retries_a_task_until_it_succeeds(start_worker):
    result = test_tasks.flaky_task.enqueue(succeed_on=2)
    worker = start_worker("--queues", "default", "--worker-id", "tasks-retry")

    def finished():
        result.refresh()
        return result.is_finished

    from tests.conftest import wait_for

    wait_for(finished, timeout=60)
    worker.signal(15)
    assert worker.wait(timeout=60) == 0, worker.output()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2}
    assert result.worker_ids == ["tasks-retry", "tasks-retry"]


@pytest.mark.slow
def test_a_task_whose_worker_is_killed_is_rescued_and_run_again(start_worker, tmp_path):
    import signal

    from django_jobs.exceptions import WorkerLost
    from tests.conftest import wait_for

    marker = tmp_path / "started"
    result = test_tasks.stalls_on_first_attempt.enqueue(str(marker))
    fast = ("--lease", "2", "--heartbeat", "0.5", "--poll-interval", "0.2")
    first = start_worker("--worker-id", "first", *fast)
    wait_for(marker.exists, timeout=60)
    first.signal(signal.SIGKILL)
    first.wait(timeout=30)
    second = start_worker("--worker-id", "second", *fast)

    def finished():
        result.refresh()
        return result.is_finished

    wait_for(finished, timeout=60)
    second.signal(signal.SIGTERM)
    assert second.wait(timeout=60) == 0, second.output()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2}
    assert result.worker_ids == ["first", "second"]
    assert [e.exception_class for e in result.errors] == [WorkerLost]
