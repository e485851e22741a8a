"""``runworker --burst`` as a real process, on every database: it exits when nothing it could
run is ready, counting the dependents and a group's callback its own last finishes released;
a job due later is waited for only within ``--burst-wait``."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from django_jobs import enqueue_group
from django_jobs.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
S = Job.Status
# A poll far off: a burst worker that waited for it would wait, not exit.
OPTIONS = ["--burst", "--poll-interval", "30", "--heartbeat", "30", "--lease", "300"]


def burst(start_worker, *options: str) -> None:
    worker = start_worker(*OPTIONS, *options)
    assert worker.wait(timeout=120) == 0, worker.output()


def statuses(jobs) -> list[str]:
    return [Job.objects.get(pk=job.pk).status for job in jobs]


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_burst_runs_a_whole_chain_its_own_finishes_release(start_worker, concurrency):
    chain = [Job.enqueue("echo", {"n": 0})]
    for n in range(1, 4):
        chain.append(Job.enqueue("echo", {"n": n}, depends_on=[chain[-1]]))
    burst(start_worker, "--concurrency", concurrency)
    assert statuses(chain) == [S.COMPLETED] * 4


def test_a_burst_runs_the_callback_its_groups_last_job_enqueued(start_worker):
    group = enqueue_group("burst", [("echo", {"n": n}, {}) for n in range(3)], callback="echo")
    burst(start_worker, "--concurrency", "2")
    group.refresh_from_db()
    callbacks = Job.objects.filter(pk=group.callback_job_id)
    assert [job.status for job in callbacks] == [S.COMPLETED]


def test_burst_wait_waits_for_a_job_due_within_it_and_not_for_one_due_later(start_worker):
    soon = Job.enqueue("echo", delay=2)
    later = Job.enqueue("echo", delay=600)
    burst(start_worker, "--burst-wait", "20")  # exits: the poll (30 s) would not end it
    assert statuses([soon, later]) == [S.COMPLETED, S.PENDING]


def test_burst_wait_without_burst_is_refused():
    with pytest.raises(CommandError, match="--burst-wait needs --burst"):
        call_command("runworker", "--burst-wait", "5")


def test_a_negative_burst_wait_is_refused():
    with pytest.raises(CommandError, match="argument --burst-wait: must be"):
        call_command("runworker", "--burst", "--burst-wait", "-1")
