"""Completion callbacks: a job with a callback_url that ends gets its JSON POSTed, signed,
to a real HTTP server, by a job of the app's own, retried with backoff, to allowed hosts only."""

import hashlib
import hmac
import json
import re
import signal
import time

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from django_jobs import InvalidJob
from django_jobs.features.callbacks import CALLBACK_TYPE, verify
from django_jobs.models import Job
from django_jobs.worker.execution import run_job
from tests.api_support import Api, make_token, run_ready
from tests.callback_receiver import Receiver
from tests.conftest import ROOT, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = settings.DJANGO_JOBS["CALLBACK_SECRET"]


def callback_settings(**changes):
    return override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, **changes})


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def deliveries() -> list[Job]:
    return list(Job.objects.filter(type=CALLBACK_TYPE).order_by("pk"))


def expected_signature(timestamp: str, body: bytes) -> str:
    """Written out here, not imported, so the test checks the documented scheme itself."""
    digest = hmac.new(SECRET.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def test_a_completed_job_posts_its_json_signed_to_the_callback_url(receiver):
    job = Job.enqueue("echo", {"n": 1}, callback_url=receiver.url("/done?ref=7"))
    run_ready()
    [delivery] = deliveries()
    assert delivery.payload == {"job_id": job.public_id, "status": "completed"}
    assert receiver.received == []  # sent by its own job, not inline
    run_ready()
    [request] = receiver.received
    assert request.path == "/done?ref=7"
    body = json.loads(request.body)
    assert body["job_id"] == job.public_id
    assert body["status"] == "completed"
    assert body["result"] == {"echo": {"n": 1}}
    assert [a["outcome"] for a in body["attempts"]] == ["completed"]
    assert body == {**Api(make_token("read")).get(f"/api/jobs/{job.public_id}").json(),
                    "url": f"/api/jobs/{job.public_id}"}
    headers = request.headers
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Jobs-Signature"] == expected_signature(headers["X-Jobs-Timestamp"],
                                                              request.body)
    assert abs(int(headers["X-Jobs-Timestamp"]) - time.time()) < 300
    assert headers["X-Jobs-Event"] == "job.completed"
    assert headers["X-Jobs-Delivery"] == delivery.public_id
    delivery.refresh_from_db()
    assert delivery.status == "completed"
    assert delivery.result == {"status": 200, "event": "job.completed"}


def test_a_dead_job_calls_back_with_the_dead_event(receiver):
    job = Job.enqueue("permanent", callback_url=receiver.url())
    run_ready()
    run_ready()
    [request] = receiver.received
    assert request.headers["X-Jobs-Event"] == "job.dead"
    assert json.loads(request.body)["error"]["type"] == "PermanentError"
    assert json.loads(request.body)["job_id"] == job.public_id


def test_canceling_a_waiting_job_calls_back(receiver):
    job = Job.enqueue("noop", callback_url=receiver.url())
    Api(make_token("manage")).post(f"/api/jobs/{job.public_id}/cancel")
    assert [d.payload["status"] for d in deliveries()] == ["canceled"]
    run_ready()
    assert receiver.received[0].headers["X-Jobs-Event"] == "job.canceled"


@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "ON_CRASH": "fail"})  # lost: dead
def test_a_job_of_a_lost_worker_that_goes_dead_calls_back(receiver):
    job = Job.enqueue("noop", callback_url=receiver.url(), max_attempts=1)
    Job.objects.claim(worker_id="lost", limit=1, lease_seconds=0.001)
    rescued = wait_for(lambda: Job.objects.rescue(), timeout=5)
    assert [j.public_id for j in rescued] == [job.public_id]
    assert [d.payload for d in deliveries()] == [{"job_id": job.public_id, "status": "dead"}]


def test_a_failed_attempt_with_retries_left_does_not_call_back(receiver):
    Job.enqueue("always_fails", callback_url=receiver.url())
    run_ready()
    assert Job.objects.get().status == "failed"
    assert deliveries() == []


def test_jobs_without_a_callback_url_enqueue_nothing():
    Job.enqueue("echo")
    Job.enqueue("noop").cancel()
    run_ready()
    assert deliveries() == []


def test_the_callback_is_enqueued_in_the_transaction_that_ends_the_job(receiver):
    job = Job.enqueue("echo", callback_url=receiver.url())
    [claimed] = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    outcome = run_job(claimed)

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        Job.objects.finish([outcome])
        assert len(deliveries()) == 1
        raise Undo
    assert deliveries() == []
    job.refresh_from_db()
    assert job.status == "processing"


def test_a_receiver_error_is_retried_with_backoff_under_the_same_delivery_id(receiver):
    receiver.answers = [500]
    Job.enqueue("echo", callback_url=receiver.url())
    run_ready()
    run_ready()
    [delivery] = deliveries()
    assert delivery.status == "failed"
    assert "HTTP 500" in delivery.error["message"]
    assert delivery.run_at > delivery.updated_at  # waits for its backoff
    Job.objects.filter(pk=delivery.pk).run_now()
    run_ready()
    delivery.refresh_from_db()
    assert delivery.status == "completed"
    first, second = receiver.received
    assert first.headers["X-Jobs-Delivery"] == second.headers["X-Jobs-Delivery"]
    assert first.body == second.body


def test_a_receiver_that_never_answers_2xx_leaves_the_delivery_dead(receiver):
    receiver.answers = [503, 503]
    with callback_settings(CALLBACK_MAX_ATTEMPTS=2, CALLBACK_BACKOFF=[0]):
        Job.enqueue("echo", callback_url=receiver.url())
        run_ready()
        run_ready()
        run_ready()
    [delivery] = deliveries()
    assert delivery.status == "dead"
    assert delivery.attempt == 2
    assert len(receiver.received) == 2


def test_an_unreachable_receiver_is_retried(receiver):
    Job.enqueue("echo", callback_url="http://127.0.0.1:9/closed-port")
    run_ready()
    run_ready()
    [delivery] = deliveries()
    assert delivery.status == "failed"
    assert "could not reach" in delivery.error["message"]


def test_redirects_are_not_followed(receiver):
    receiver.answers = [(302, receiver.url("/elsewhere"))]
    Job.enqueue("echo", callback_url=receiver.url("/first"))
    run_ready()
    run_ready()
    assert [r.path for r in receiver.received] == ["/first"]
    assert deliveries()[0].status == "failed"
    assert "HTTP 302" in deliveries()[0].error["message"]


def test_a_host_no_longer_allowed_at_delivery_time_is_not_called(receiver):
    Job.enqueue("echo", callback_url=receiver.url())
    run_ready()
    with callback_settings(CALLBACK_ALLOWED_HOSTS=["hooks.example.com"]):
        run_ready()
    assert receiver.received == []
    [delivery] = deliveries()
    assert delivery.status == "dead"
    assert "not allowed" in delivery.error["message"]


@pytest.mark.parametrize("url", ["http://localhost/x", "http://10.1.2.3/x",
                                 "http://169.254.169.254/latest/meta-data", "file:///etc/passwd"])
def test_only_allowed_hosts_may_be_named(url):
    with pytest.raises(InvalidJob) as caught:
        Job.enqueue("echo", callback_url=url)
    assert "callback_url" in caught.value.message_dict
    response = Api(make_token("submit")).post("/api/jobs", {"type": "echo", "callback_url": url})
    assert response.status_code == 400
    assert "callback_url" in response.json()["errors"]
    assert Job.objects.count() == 0


def test_subdomain_patterns_work_like_allowed_hosts():
    with callback_settings(CALLBACK_ALLOWED_HOSTS=[".example.com"]):
        assert Job.enqueue("echo", callback_url="https://hooks.example.com/x").callback_url
        with pytest.raises(InvalidJob):
            Job.enqueue("echo", callback_url="https://example.com.evil.net/x")


def test_without_a_secret_callbacks_are_refused():
    with callback_settings(CALLBACK_SECRET=""), pytest.raises(InvalidJob) as caught:
        Job.enqueue("echo", callback_url="http://127.0.0.1/x")
    assert "CALLBACK_SECRET" in caught.value.message_dict["callback_url"][0]


def test_a_job_retried_before_its_callback_went_out_is_not_reported_twice(receiver):
    job = Job.enqueue("permanent", callback_url=receiver.url())
    run_ready()
    job.retry()
    run_ready(limit=1)  # the callback (older run_at) runs first, sees the job pending again
    assert receiver.received == []
    skipped = Job.objects.get(type=CALLBACK_TYPE)
    assert skipped.result == {"skipped": "the job is pending again"}


def test_the_verify_helper_accepts_real_deliveries_and_refuses_tampering(receiver):
    Job.enqueue("echo", callback_url=receiver.url())
    run_ready()
    run_ready()
    [request] = receiver.received
    stamp, signature = request.headers["X-Jobs-Timestamp"], request.headers["X-Jobs-Signature"]
    assert verify(request.body, stamp, signature, SECRET)
    assert not verify(request.body + b" ", stamp, signature, SECRET)
    assert not verify(request.body, stamp, signature, "another secret")
    assert not verify(request.body, stamp, signature, SECRET, now=int(stamp) + 301)
    assert not verify(request.body, "not a number", signature, SECRET)


@pytest.mark.slow
def test_a_real_worker_runs_the_job_and_delivers_its_callback(receiver, start_worker):
    api = Api(make_token("submit", "read"))
    job_id = api.post("/api/jobs", {"type": "echo", "payload": {"via": "worker"},
                                    "callback_url": receiver.url("/e2e")}).json()["job_id"]
    worker = start_worker("--burst")
    assert worker.wait(timeout=60) == 0, worker.output()
    wait_for(lambda: receiver.received, timeout=30)
    [request] = receiver.received
    assert json.loads(request.body)["job_id"] == job_id
    assert json.loads(request.body)["result"] == {"echo": {"via": "worker"}}
    assert request.headers["X-Jobs-Signature"] == expected_signature(
        request.headers["X-Jobs-Timestamp"], request.body)
    assert Job.objects.get(type=CALLBACK_TYPE).status == "completed"


def test_the_verification_snippet_in_the_how_to_accepts_a_real_delivery(receiver):
    """The docs' snippet is run as written, so the documented scheme cannot drift."""
    page = (ROOT / "docs" / "howto-verify-callbacks.md").read_text()
    [snippet] = [block for block in re.findall(r"```python\n(.*?)```", page, re.S)
                 if "def verify_callback" in block]
    namespace: dict = {}
    exec(snippet, namespace)
    verify_callback = namespace["verify_callback"]
    Job.enqueue("echo", callback_url=receiver.url())
    run_ready()
    run_ready()
    [request] = receiver.received
    stamp, signature = request.headers["X-Jobs-Timestamp"], request.headers["X-Jobs-Signature"]
    assert verify_callback(request.body, stamp, signature, SECRET)
    assert not verify_callback(request.body.replace(b"echo", b"ech0"), stamp, signature, SECRET)
    assert not verify_callback(request.body, str(int(stamp) - 301), signature, SECRET)


@pytest.mark.slow
@pytest.mark.parametrize("slow", ["slow", "async_slow"])
def test_a_running_job_canceled_through_the_api_calls_back_when_the_worker_stops_it(
    receiver, start_worker, slow
):
    api = Api(make_token("submit", "read", "manage"))
    job_id = api.post("/api/jobs", {"type": slow, "payload": {"seconds": 60},
                                    "callback_url": receiver.url()}).json()["job_id"]
    worker = start_worker("--heartbeat", "0.2", "--lease", "5")
    wait_for(lambda: Job.objects.get(public_id=job_id).status == "processing")
    assert api.post(f"/api/jobs/{job_id}/cancel").status_code == 202
    wait_for(lambda: receiver.received, timeout=30)
    [request] = receiver.received
    assert request.headers["X-Jobs-Event"] == "job.canceled"
    body = json.loads(request.body)
    assert (body["job_id"], body["status"]) == (job_id, "canceled")
    assert body["attempts"][-1]["outcome"] == "canceled"
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output()
