"""No write after a handler returns turns its success into a failure or a re-run (real
``runworker`` processes): a large group under a small payload limit calls back once and runs
each job once; a group callback refused after the group was enqueued (the limit lowered since)
leaves the last job completed and the refusal on the group's row, logged once and counted; a
cancel of a group's last job through the API whose callback is refused answers 200; a refused
follow-up leaves the completion and the other follow-up standing, and so does a refused
completion callback."""

import json

import pytest
from django.db.models import Count

from django_jobs import enqueue_group
from django_jobs.models import Job, JobGroup
from tests.api_support import Api, make_token
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--heartbeat", "0.3", "--poll-interval", "0.1", "--concurrency", "4"]


def limited(limit: int) -> dict:
    """A worker's environment with ``MAX_PAYLOAD_BYTES`` at ``limit``."""
    return {"DJANGO_JOBS_TEST_EXTRA": json.dumps({"MAX_PAYLOAD_BYTES": limit})}


def runs_per_job(jobs) -> set[int]:
    ids = list(jobs.values_list("public_id", flat=True))
    return set(Execution.objects.filter(job_public_id__in=ids).values("job_public_id")
               .annotate(n=Count("id")).values_list("n", flat=True))


def metrics() -> dict:
    return Api(make_token("read")).get("/api/metrics/jobs").json()


def failures_by_type() -> dict[str, int]:
    return {t["type"]: t["feature_write_failures"] for t in metrics()["job_types"]}


def test_a_thousand_job_group_under_a_20_kb_limit_calls_back_once_each_job_run_once(
        settings, start_worker):
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "MAX_PAYLOAD_BYTES": 20_000}
    group = enqueue_group("a thousand", [("record", {"n": n}) for n in range(1000)],
                          callback="record", callback_payload={"callback": True})
    workers = [start_worker("--worker-id", f"w{i}", *FAST, env=limited(20_000))
               for i in range(2)]
    done = wait_for(lambda: JobGroup.objects.filter(pk=group.pk, callback_job_id__isnull=False)
                    .first(), timeout=240)
    callback = wait_for(lambda: Job.objects.filter(pk=done.callback_job_id,
                                                   status="completed").first(), timeout=60)
    members = Job.objects.filter(group_id=group.pk)
    assert set(members.values_list("status", flat=True)) == {"completed"}
    assert runs_per_job(members) == {1}
    assert Execution.objects.filter(job_public_id=callback.public_id).count() == 1
    assert callback.payload == {"callback": True, "group": {
        "id": group.public_id, "name": "a thousand", "total": 1000, "completed": 1000,
        "dead": 0, "canceled": 0}}
    assert done.error is None
    for worker in workers:
        assert "not written after job" not in worker.output()


def test_a_callback_refused_at_the_end_leaves_the_last_job_completed_and_the_error_on_the_group(
        start_worker):
    # Enqueued under the default limit; the workers run under a lower one (a deploy since).
    group = enqueue_group("lowered", [("record", {"n": n}) for n in range(3)],
                          callback="record", callback_payload={"pad": "x" * 3000})
    worker = start_worker("--worker-id", "w0", *FAST, env=limited(2000))
    ended = wait_for(lambda: JobGroup.objects.filter(pk=group.pk, finished_at__isnull=False)
                     .first(), timeout=60)
    members = Job.objects.filter(group_id=group.pk)
    wait_for(lambda: set(members.values_list("status", flat=True)) == {"completed"}, timeout=30)
    assert (ended.completed, ended.callback_job_id) == (3, None)
    assert "MAX_PAYLOAD_BYTES" in ended.error["message"]
    assert not Job.objects.filter(type="record", group__isnull=True).exists()  # no callback
    # A while later: nothing ran again, the failure was logged once and counted once.
    wait_for(lambda: Job.objects.filter(worker_id="w0").count() == 3 and
             "not written after job" in worker.output(), timeout=30)
    assert runs_per_job(members) == {1}
    log = worker.output()
    assert log.count("not written after job") == 1, log
    assert "WARNING" in next(line for line in log.splitlines() if "not written after job" in line)
    assert metrics()["feature_write_failures"] == 1


def test_cancelling_the_last_job_whose_callback_is_refused_through_the_api_answers_200(
        settings, start_worker):
    group = enqueue_group("canceled last", [("record", {"n": 0}), ("record", {}, {"delay": 3600})],
                          callback="record", callback_payload={"pad": "x" * 3000})
    _, last = Job.objects.filter(group_id=group.pk).order_by("pk")
    start_worker("--worker-id", "w0", *FAST)
    wait_for(lambda: JobGroup.objects.get(pk=group.pk).completed == 1, timeout=60)
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "MAX_PAYLOAD_BYTES": 2000}
    response = Api(make_token("manage")).post(f"/api/jobs/{last.public_id}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "canceled"
    ended = JobGroup.objects.get(pk=group.pk)
    assert (ended.completed, ended.canceled, ended.callback_job_id) == (1, 1, None)
    assert ended.finished_at is not None and "MAX_PAYLOAD_BYTES" in ended.error["message"]
    assert metrics()["feature_write_failures"] == 1


def test_a_refused_follow_up_leaves_the_completion_and_the_other_follow_up(start_worker):
    dependency = Job.enqueue("echo", {}, delay=3600)
    job = Job.enqueue("follow_ups_one_refused", {"dep": dependency.pk})
    worker = start_worker("--worker-id", "w0", *FAST)
    wait_for(lambda: Job.objects.get(pk=job.pk).status == "completed", timeout=60)
    kept = wait_for(lambda: list(Job.objects.filter(type="echo", payload__kept=True)))
    assert len(kept) == 1
    assert not Job.objects.filter(payload__refused=True).exists()
    assert Execution.objects.filter(job_public_id=job.public_id).count() == 1
    wait_for(lambda: "not written after job" in worker.output(), timeout=10)
    line = next(line for line in worker.output().splitlines() if "not written after job" in line)
    assert "WARNING" in line and job.public_id in line
    # The kept follow-up's completion is counted at the worker's next heartbeat.
    by_type = wait_for(lambda: "echo" in (types := failures_by_type()) and types, timeout=30)
    assert (by_type["follow_ups_one_refused"], by_type["echo"]) == (1, 0)


def test_a_refused_completion_callback_leaves_the_completion(start_worker):
    # A worker whose CALLBACK_MAX_ATTEMPTS the enqueue of a delivery refuses (0)
    job = Job.enqueue("record", {}, callback_url="http://127.0.0.1:9/done")
    plain = Job.enqueue("record", {})
    worker = start_worker("--worker-id", "w0", *FAST, env={
        "DJANGO_JOBS_TEST_EXTRA": json.dumps({"CALLBACK_MAX_ATTEMPTS": 0})})
    wait_for(lambda: set(Job.objects.filter(pk__in=[job.pk, plain.pk])
                         .values_list("status", flat=True)) == {"completed"}, timeout=60)
    wait_for(lambda: "not written after job" in worker.output(), timeout=10)
    assert not Job.objects.filter(type="django_jobs.callback").exists()
    assert runs_per_job(Job.objects.filter(pk__in=[job.pk, plain.pk])) == {1}
    line = next(line for line in worker.output().splitlines() if "not written after job" in line)
    assert "WARNING" in line and "callbacks" in line and job.public_id in line
    assert failures_by_type() == {"record": 1}
