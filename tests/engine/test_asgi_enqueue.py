"""``Job.aenqueue`` from async views under a real ASGI server (uvicorn, a subprocess serving
tests/asgi.py on the test database), hit over HTTP: the jobs are in the database once the
response is out, and a request whose transaction rolls back leaves none.

"The caller's transaction" for an async view is the one open on the request's thread for
synchronous code: Django runs each request's ``sync_to_async`` calls (and the async ORM's,
and ``aenqueue``) on one thread, so an atomic block opened there holds the jobs enqueued
before it closes (docs/howto-async-enqueue.md)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest
from django.conf import settings

from django_jobs.models import Job
from tests.conftest import ROOT, settings_module, wait_for
from tests.ports import free_port

pytest.importorskip("uvicorn")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class Server:
    """``uvicorn tests.asgi:application`` on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        env = {**os.environ, "JOBS_DB_NAME": str(settings.DATABASES["default"]["NAME"]),
               "DJANGO_SETTINGS_MODULE": settings_module(), "PYTHONUNBUFFERED": "1"}
        self.log = open(ROOT / "tests" / "artifacts" / f"uvicorn-{time.time_ns()}.log", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "tests.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--lifespan", "off", "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        wait_for(self._listening, timeout=60)

    def _listening(self) -> bool:
        assert self.proc.poll() is None, self.output()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def get(self, path: str, **params: object) -> tuple[int, dict]:
        url = f"http://127.0.0.1:{self.port}{path}?{urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def server():
    started = Server()
    yield started
    started.stop()


def test_aenqueue_in_an_async_view_writes_the_job_before_the_response(server):
    status, body = server.get("/async-enqueue/", n=7)
    assert status == 200, server.output()
    job = Job.objects.get(public_id=body["id"])
    assert job.payload == {"n": 7} and job.status == Job.Status.PENDING


@pytest.mark.parametrize("way", ["function", "block"])
def test_a_job_enqueued_in_the_requests_transaction_commits_or_rolls_back_with_it(server, way):
    """``function``: the unit of work as one sync function in ``transaction.atomic``, run
    with ``sync_to_async``. ``block``: ``aenqueue`` awaited inside an atomic block opened and
    closed with ``sync_to_async``. Either way a rollback takes the job with it."""
    status, body = server.get("/async-enqueue-atomic/", n=1, way=way, fail=1)
    assert (status, body) == (409, {"detail": "rolled back"}), server.output()
    assert not Job.objects.exists()
    status, body = server.get("/async-enqueue-atomic/", n=2, way=way)
    assert status == 200, server.output()
    assert [(j.public_id, j.payload) for j in Job.objects.all()] == [
        (body["id"], {"n": 2, "way": way})]


def test_concurrent_requests_each_keep_their_own_transaction(server):
    """Requests served at once: the rolled-back ones leave nothing, the others their job."""
    from concurrent.futures import ThreadPoolExecutor

    requests = [(n, way, n % 2) for n in range(12) for way in ("function", "block")]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(
            lambda r: server.get("/async-enqueue-atomic/", n=r[0], way=r[1], fail=r[2]),
            requests))
    assert [status for status, _ in answers] == [409 if fail else 200 for _, _, fail in requests]
    kept = sorted((j.payload["n"], j.payload["way"]) for j in Job.objects.all())
    assert kept == sorted((n, way) for n, way, fail in requests if not fail)
