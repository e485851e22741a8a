"""POST /jobs: creating jobs, refusing bad input without creating anything, idempotency."""

from datetime import timedelta
from io import StringIO

import pytest
from django.test import override_settings
from django.utils import timezone

from django_jobs.models import IdempotencyKey, Job
from tests.api_support import Api, make_token
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db


# The scopes of the ``api`` client's token (tests/faces/conftest.py).
API_SCOPES = ("submit", "read")


def test_submit_answers_201_with_the_job_id_and_its_url(api):
    response = api.post("/api/jobs", {"type": "echo", "payload": {"image_id": 12345}})
    assert response.status_code == 201
    body = response.json()
    assert body["job_id"].startswith("j-")
    assert body["url"] == f"http://testserver/api/jobs/{body['job_id']}"
    assert response["Location"] == body["url"]
    job = Job.objects.get(public_id=body["job_id"])
    assert (job.type, job.payload, job.status) == ("echo", {"image_id": 12345}, "pending")


def test_priority_names_and_delay_in_milliseconds_are_applied(api):
    before = timezone.now()
    response = api.post("/api/jobs", {"type": "noop", "priority": "high", "delay": 30000})
    job = Job.objects.get(public_id=response.json()["job_id"])
    assert job.priority == 10
    assert job.run_at >= before + timedelta(seconds=30)
    assert job.run_at <= job.created_at + timedelta(seconds=30, milliseconds=1)


def test_integer_priority_queue_max_attempts_and_callback_url_are_stored(api):
    response = api.post("/api/jobs", {
        "type": "noop", "priority": -42, "queue": "reports", "max_attempts": 7,
        "callback_url": "http://127.0.0.1:9/hook",
    })
    job = Job.objects.get(public_id=response.json()["job_id"])
    assert (job.priority, job.queue, job.max_attempts, job.callback_url) == (
        -42, "reports", 7, "http://127.0.0.1:9/hook")


def test_payload_defaults_to_an_empty_object(api):
    job_id = api.post("/api/jobs", {"type": "noop"}).json()["job_id"]
    assert Job.objects.get(public_id=job_id).payload == {}


BAD_BODIES = [
    # (raw body, the field named in errors)
    ("{not json", "body"),
    ("[1, 2]", "body"),
    ('"a string"', "body"),
    ("", "body"),
    ('{"type": "echo", "payload": NaN}', "body"),
    ('{"payload": {}}', "type"),
    ('{"type": "no_such_type"}', "type"),
    ('{"type": ""}', "type"),
    ('{"type": 5}', "type"),
    ('{"type": "django_jobs.callback", "payload": {"job_id": "j-0"}}', "type"),
    ('{"type": "echo", "colour": "blue"}', "colour"),
    ('{"type": "echo", "priority": "urgent"}', "priority"),
    ('{"type": "echo", "priority": 101}', "priority"),
    ('{"type": "echo", "priority": true}', "priority"),
    ('{"type": "echo", "delay": -1}', "delay"),
    ('{"type": "echo", "delay": 1.5}', "delay"),
    ('{"type": "echo", "delay": "10"}', "delay"),
    ('{"type": "echo", "delay": 10000000000000000000000}', "delay"),
    ('{"type": "echo", "max_attempts": 0}', "max_attempts"),
    ('{"type": "echo", "max_attempts": "3"}', "max_attempts"),
    ('{"type": "echo", "queue": "no spaces"}', "queue"),
    ('{"type": "echo", "callback_url": "ftp://127.0.0.1/x"}', "callback_url"),
    ('{"type": "echo", "callback_url": "http://10.0.0.1/internal"}', "callback_url"),
    ('{"type": "echo", "callback_url": "http://user:pw@127.0.0.1/x"}', "callback_url"),
    ('{"type": "echo", "payload": {"text": "nul \\u0000 here"}}', "payload"),
    ('{"type": "echo", "payload": {"text": "\\ud800"}}', "payload"),
    ('{"type": "echo", "payload": ' + "[" * 100 + "]" * 100 + "}", "payload"),
    ('{"type": "echo", "payload": ' + "[" * 5000 + "]" * 5000 + "}", "body"),  # not parsed
    ('{"type": "echo\\u0000"}', "type"),
    ('{"type": "echo", "queue": "q\\u0000"}', "queue"),
    ('{"type": "echo", "payload": 1e400}', "payload"),
    # Payloads that do not fit a typed handler's arguments (tests/typed_jobs.py).
    ('{"type": "typed_kwargs", "payload": {"order_id": "x"}}', "payload"),
    ('{"type": "typed_kwargs", "payload": {"order_id": 1, "priority": 5}}', "payload"),
    ('{"type": "typed_dataclass", "payload": {"id": 1}}', "payload"),
]


@pytest.mark.parametrize(("raw", "field"), BAD_BODIES)
def test_bad_input_is_a_400_naming_the_field_and_creates_no_job(api, raw, field):
    response = api.post("/api/jobs", raw=raw)
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["errors"], body
    assert body["detail"]
    assert Job.objects.count() == 0


@override_settings(DJANGO_JOBS={"API_MAX_PAYLOAD_BYTES": 1000})
def test_a_body_over_the_size_setting_is_refused(api):
    response = api.post("/api/jobs", {"type": "echo", "payload": {"blob": "x" * 1000}})
    assert response.status_code == 400
    assert "payload" in response.json()["errors"]
    assert Job.objects.count() == 0


def test_the_default_size_limit_is_64_kib(api):
    near = {"type": "echo", "payload": {"blob": "x" * (65536 - 100)}}
    assert api.post("/api/jobs", near).status_code == 201
    over = {"type": "echo", "payload": {"blob": "x" * 65536}}
    assert api.post("/api/jobs", over).status_code == 400
    assert Job.objects.count() == 1


def test_a_body_that_is_not_json_by_content_type_is_415(api):
    response = api.post("/api/jobs", raw="type=echo",
                        content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["errors"] == {"body": "must be application/json"}
    assert Job.objects.count() == 0


# Idempotency-Key.


def test_the_same_key_and_body_return_the_first_job_with_200(api):
    body = {"type": "echo", "payload": {"n": 1}, "priority": "low"}
    first = api.post("/api/jobs", body, headers={"Idempotency-Key": "order-17"})
    again = api.post("/api/jobs", {"priority": "low", "payload": {"n": 1}, "type": "echo"},
                     headers={"Idempotency-Key": "order-17"})
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1


def test_the_same_key_with_another_body_is_409(api):
    api.post("/api/jobs", {"type": "echo", "payload": {"n": 1}}, headers={"Idempotency-Key": "k"})
    response = api.post("/api/jobs", {"type": "echo", "payload": {"n": 2}},
                        headers={"Idempotency-Key": "k"})
    assert response.status_code == 409
    assert "Idempotency-Key" in response.json()["errors"]
    assert Job.objects.count() == 1


def test_keys_belong_to_one_caller(api):
    other = Api(make_token("submit"))
    body = {"type": "echo"}
    a = api.post("/api/jobs", body, headers={"Idempotency-Key": "shared"}).json()["job_id"]
    b = other.post("/api/jobs", body, headers={"Idempotency-Key": "shared"}).json()["job_id"]
    assert a != b


def test_an_expired_key_is_forgotten(api):
    body = {"type": "echo"}
    first = api.post("/api/jobs", body, headers={"Idempotency-Key": "old"}).json()["job_id"]
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = api.post("/api/jobs", body, headers={"Idempotency-Key": "old"})
    assert again.status_code == 201
    assert again.json()["job_id"] != first
    assert IdempotencyKey.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_replay_after_the_job_was_pruned_answers_the_first_job_and_makes_none(api):
    """The key lives its ``IDEMPOTENCY_TTL`` whatever becomes of its job: pruned, the job
    leaves the key, and a replay answers what the first request did."""
    from django.core.management import call_command

    from tests.features.test_control import run_once

    body = {"type": "echo", "payload": {"n": 1}}
    first = api.post("/api/jobs", body, headers={"Idempotency-Key": "order-18"})
    run_once(Job.objects.get(public_id=first.json()["job_id"]))
    call_command("prunejobs", "--completed", "0", stdout=StringIO())
    assert not Job.objects.exists()
    again = api.post("/api/jobs", body, headers={"Idempotency-Key": "order-18"})
    assert again.status_code == 200
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert not Job.objects.exists()
    key = IdempotencyKey.objects.get()
    assert key.job_id is None and key.job_public_id == first.json()["job_id"]
    # Another body with the key is still refused.
    other = api.post("/api/jobs", {"type": "echo"}, headers={"Idempotency-Key": "order-18"})
    assert other.status_code == 409


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_replay_after_a_worker_ran_and_pruned_the_job_makes_no_second_job(api, start_worker):
    body = {"type": "echo", "payload": {"n": 2}}
    first = api.post("/api/jobs", body, headers={"Idempotency-Key": "order-19"})
    # Completed jobs kept a second: pruned by the workers' batched delete.
    extra = '{"PRUNE_INTERVAL": 0.2, "RETENTION": {"completed": 1}}'
    worker = start_worker("--heartbeat", "0.1", "--lease", "5",
                          env={"DJANGO_JOBS_TEST_EXTRA": extra})
    wait_for(lambda: not Job.objects.exists(), timeout=60)  # run, then pruned
    assert "Traceback" not in worker.output()
    again = api.post("/api/jobs", body, headers={"Idempotency-Key": "order-19"})
    assert (again.status_code, again.json()) == (200, first.json())
    assert not Job.objects.exists()


@override_settings(DJANGO_JOBS={"IDEMPOTENCY_TTL": 60})
def test_the_ttl_setting_sets_the_expiry(api):
    api.post("/api/jobs", {"type": "echo"}, headers={"Idempotency-Key": "ttl"})
    key = IdempotencyKey.objects.get()
    assert key.expires_at - key.created_at == timedelta(seconds=60)


def test_a_rejected_body_stores_no_key(api):
    api.post("/api/jobs", {"type": "nope"}, headers={"Idempotency-Key": "x"})
    assert IdempotencyKey.objects.count() == 0
    again = api.post("/api/jobs", {"type": "echo"}, headers={"Idempotency-Key": "x"})
    assert again.status_code == 201


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "é"])
def test_a_malformed_key_is_400(api, key):
    response = api.post("/api/jobs", {"type": "echo"}, headers={"Idempotency-Key": key})
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["errors"]
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_make_one_job(live_server):
    """Eight threads send the same keyed request at once: one job, and all get its id."""
    import threading

    import requests

    token = make_token("submit")
    barrier = threading.Barrier(8)
    answers: list = []

    def send() -> None:
        barrier.wait()
        answers.append(requests.post(
            f"{live_server.url}/api/jobs", json={"type": "echo", "payload": {"n": 1}},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "race"},
            timeout=60,
        ))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Job.objects.count() == 1
    job_id = Job.objects.get().public_id
    assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
    assert {a.json()["job_id"] for a in answers} == {job_id}
