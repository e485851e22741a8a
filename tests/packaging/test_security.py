"""Security properties that cut across modules: the admin escapes what jobs carry, and no
secret (an API token, CALLBACK_SECRET, a callback's signature) reaches a log line."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.urls import reverse

from django_jobs.features.callbacks import CALLBACK_TYPE
from django_jobs.models import Job
from tests.admin_helpers import add_attempt, job_url, make_job, staff
from tests.api_support import ALL_SCOPES, Api, make_token
from tests.callback_receiver import Receiver
from tests.conftest import wait_for

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
SECRET = settings.DJANGO_JOBS["CALLBACK_SECRET"]


@pytest.mark.django_db
def test_the_admin_escapes_a_script_in_payload_result_error_and_traceback():
    """Every place a job's own data shows (list columns, change page, attempts) and a search
    term the list echoes are escaped: the raw HTML holds the escaped text, never the tag."""
    make_job("failed", type=XSS, queue=XSS)  # the list shows type and queue
    job = make_job(
        "dead", type="echo", payload={"note": XSS, XSS: 1}, result={"html": XSS},
        error={"type": XSS, "message": XSS, "traceback": f"Traceback\n{XSS}",
               "details": {"why": XSS}},
    )
    add_attempt(job, "dead", error=job.error)
    client = Client()
    client.force_login(staff("root", superuser=True))
    changelist = reverse("admin:django_jobs_job_changelist")
    for url in (job_url(job), changelist, changelist + "?q=%3Cscript%3Ealert(1)%3C/script%3E"):
        html = client.get(url).content.decode()
        assert XSS not in html, url
        assert ESCAPED in html, url


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_no_token_secret_or_signature_reaches_a_log_line(caplog, receiver, start_worker):
    """Everything logged in-process (at DEBUG, SQL included) during authenticated API calls,
    and a real worker's log at -v 3 while it delivers a callback that fails once and then
    succeeds, hold neither the token, nor CALLBACK_SECRET, nor the signature sent."""
    token = make_token(*ALL_SCOPES)
    api = Api(token)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django")  # Django keeps its own at INFO
    connection.force_debug_cursor = True  # log every SQL statement too
    try:
        job_id = api.post("/api/jobs", {"type": "echo", "callback_url": receiver.url()},
                          headers={"Idempotency-Key": "k-1"}).json()["job_id"]
        api.get(f"/api/jobs/{job_id}")
        api.get("/api/jobs", status="pending")
        Api(token + "x").get("/api/jobs")  # a wrong token that shares the real one's start
    finally:
        connection.force_debug_cursor = False
    assert any("django_jobs" in r.getMessage() for r in caplog.records)  # SQL was logged
    receiver.answers = [500]
    output = []
    for run in range(2):  # the first delivery fails and is retried by the second burst
        if run:
            wait_for(lambda: Job.objects.ready().filter(type=CALLBACK_TYPE).exists())
        worker = start_worker("--burst", "-v", "3")
        assert worker.wait(timeout=60) == 0, worker.output()
        output.append(worker.output())
    assert len(receiver.received) == 2
    signatures = [r.headers["X-Jobs-Signature"] for r in receiver.received]
    logged = "\n".join([caplog.text, *output])
    assert "job failed" in output[0]  # the failed delivery was logged
    for secret in (token, token[len("djj_"):], SECRET, *signatures,
                   *(s.removeprefix("sha256=") for s in signatures)):
        assert secret not in logged
