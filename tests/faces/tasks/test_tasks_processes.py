"""Tasks run by real ``runworker`` processes: results come back through get_result."""

import pytest
from django.conf import settings

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.django_db(transaction=True),
]

if settings.HAS_TASKS_FRAMEWORK:
    from django_jobs.backends.compat import TaskResultStatus
    from tests import tasks as test_tasks


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
