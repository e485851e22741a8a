"""Dead jobs reach Sentry through the real SDK, on sentry-sdk 2.x and 3.x.

A real ``runworker`` subprocess runs the how-to's snippet as written (``tests/settings_sentry.py``)
with its DSN pointing at an HTTP server of this test's, which records the envelopes the SDK
sends, as Sentry's ingest would receive them. The major installed with the ``test`` extra (3.x)
runs as is; the other major (2.x) is installed once per run with pip into a folder put first on
the subprocess's ``PYTHONPATH``, and its test is skipped, saying why, where PyPI is out of reach.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from django_jobs.models import Job
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The releases each major is taken from when it is not the one installed.
MAJORS = {2: "sentry-sdk>=2.76,<3", 3: "sentry-sdk>=3,<4"}
SECRETS = ("4111-payload-secret", "handler-local-secret")


class Ingest(ThreadingHTTPServer):
    """Sentry's ingest endpoint, as far as an SDK sees it: each envelope's items, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), IngestHandler)
        self.items: list[tuple[dict, bytes]] = []
        self.raw: list[bytes] = []

    @property
    def dsn(self) -> str:
        return f"http://public@127.0.0.1:{self.server_address[1]}/1"

    def events(self) -> list[dict]:
        return [json.loads(body) for header, body in self.items if header.get("type") == "event"]


class IngestHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        elif encoding == "br":
            import brotli  # the SDK compresses so only where brotli is installed

            body = brotli.decompress(body)
        assert isinstance(self.server, Ingest)
        self.server.raw.append(body)
        self.server.items.extend(envelope_items(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


def envelope_items(body: bytes) -> list[tuple[dict, bytes]]:
    """The (header, payload) items of a Sentry envelope: a header line, then items each a header
    line and a payload of its ``length`` or up to the next newline."""
    items = []
    position = body.index(b"\n") + 1 if b"\n" in body else len(body)
    while position < len(body):
        end = body.find(b"\n", position)
        end = len(body) if end < 0 else end
        header = json.loads(body[position:end])
        position = end + 1
        if "length" in header:
            payload = body[position:position + header["length"]]
            position += header["length"] + 1
        else:
            end = body.find(b"\n", position)
            end = len(body) if end < 0 else end
            payload, position = body[position:end], end + 1
        items.append((header, payload))
    return items


@pytest.fixture
def ingest():
    server = Ingest()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def installed_major() -> int | None:
    if importlib.util.find_spec("sentry_sdk") is None:
        return None
    import sentry_sdk

    return int(sentry_sdk.VERSION.split(".")[0])


@pytest.fixture(scope="session")
def other_majors(tmp_path_factory) -> dict[int, Path | str]:
    """A folder holding each major that is not installed, or why it could not be had."""
    found: dict[int, Path | str] = {}
    for major, requirement in MAJORS.items():
        if major == installed_major():
            continue
        target = tmp_path_factory.mktemp(f"sentry-sdk-{major}")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(target), requirement], capture_output=True, text=True, timeout=300)
        found[major] = target if done.returncode == 0 else (
            f"pip could not install {requirement} (PyPI out of reach?): "
            f"{done.stderr.strip().splitlines()[-1:]}")
    return found


@pytest.fixture(params=sorted(MAJORS), ids=lambda major: f"sentry-sdk-{major}")
def sdk_env(request, other_majors) -> dict[str, str]:
    """The subprocess's environment for one major of sentry-sdk (``SDK_MAJOR``: which)."""
    major = request.param
    if major == installed_major():
        return {"SDK_MAJOR": str(major)}
    if major not in other_majors:
        pytest.skip("sentry-sdk is not installed (the test extra brings it)")
    where = other_majors[major]
    if isinstance(where, str):
        pytest.skip(where)
    path = os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "SDK_MAJOR": str(major)}


def run_worker(start_worker, ingest, env, *args: str) -> str:
    worker = start_worker("--burst", "--burst-wait", "1", "--queues", "sentry",
                          "--settings=tests.settings_sentry", *args,
                          env={**env, "SENTRY_DSN": ingest.dsn})
    assert worker.wait(timeout=60) == 0, worker.output()
    return worker.output()


def test_a_dead_job_is_one_event_with_the_job_and_no_payload_or_locals(
    start_worker, ingest, sdk_env
):
    job = Job.enqueue("leaky", {"card": SECRETS[0]}, queue="sentry")
    other = Job.enqueue("noop", queue="sentry")
    output = run_worker(start_worker, ingest, sdk_env)
    job.refresh_from_db()
    other.refresh_from_db()
    assert (job.status, job.attempt, other.status) == ("dead", 2, "completed"), output
    events = ingest.events()
    # One event: the dead job's, not its retried failure, not the completed job, and not the
    # worker's ERROR record of it again through the logging integration.
    assert len(events) == 1, [e.get("message") or e.get("logentry") for e in events]
    [event] = events
    assert event["sdk"]["version"].split(".")[0] == sdk_env["SDK_MAJOR"]
    assert event["level"] == "error"
    tags = event["tags"]
    tags = dict(tags) if isinstance(tags, list) else tags
    assert {k: tags[k] for k in ("job_type", "job_queue", "job_id", "job_attempt",
                                 "job_outcome")} == {
        "job_type": "leaky", "job_queue": "sentry", "job_id": job.public_id,
        "job_attempt": "2", "job_outcome": "dead"}
    context = event["contexts"]["job"]
    assert (context["id"], context["attempt"], context["max_attempts"]) == (job.public_id, 2, 2)
    assert "payload" not in context
    [exception] = event["exception"]["values"]
    assert exception["type"] == "RuntimeError"
    frames = exception["stacktrace"]["frames"]
    assert frames[-1]["function"] == "leaky"
    assert all("vars" not in frame for frame in frames)
    # Nothing the SDK sent holds the payload's value or the handler's local secret.
    sent = b"".join(ingest.raw)
    assert not [secret for secret in SECRETS if secret.encode() in sent]


def test_payload_and_every_failure_when_the_settings_say_so(start_worker, ingest, sdk_env):
    job = Job.enqueue("leaky", {"card": SECRETS[0]}, queue="sentry")
    extra = json.dumps({"ERROR_TRACKER_PAYLOAD": True,
                        "LOG_LEVELS": {"failed": "ERROR", "dead": "CRITICAL"}})
    run_worker(start_worker, ingest, {**sdk_env, "DJANGO_JOBS_TEST_EXTRA": extra})
    events = sorted(ingest.events(), key=lambda e: e["contexts"]["job"]["attempt"])
    assert [(e["contexts"]["job"]["outcome"], e["level"]) for e in events] == [
        ("failed", "error"), ("dead", "fatal")]
    assert all(e["contexts"]["job"]["payload"] == {"card": SECRETS[0]} for e in events)
    assert events[-1]["tags"]["job_id"] == job.public_id


def test_a_job_rescued_as_dead_after_its_worker_was_killed_is_an_event(
    start_worker, ingest, sdk_env, tmp_path
):
    """A crash ends the job (``MAX_CRASHES`` 1): the worker that rescues it has no exception,
    and sends a message naming the job."""
    marker = tmp_path / "started"
    job = Job.enqueue("slow", {"seconds": 60, "marker": str(marker)}, queue="sentry")
    env = {**sdk_env, "SENTRY_DSN": ingest.dsn,
           "DJANGO_JOBS_TEST_EXTRA": json.dumps({"MAX_CRASHES": 1})}
    fast = ["--lease", "1", "--heartbeat", "0.2", "--poll-interval", "0.1", "--queues", "sentry",
            "--settings=tests.settings_sentry"]
    first = start_worker(*fast, env=env)
    wait_for(marker.exists, timeout=30)
    first.signal(signal.SIGKILL)
    first.wait()
    rescuer = start_worker(*fast, env=env)
    event = wait_for(lambda: next(iter(ingest.events()), None), timeout=30)
    rescuer.signal(signal.SIGTERM)
    rescuer.wait()
    job.refresh_from_db()
    assert job.status == "dead"
    assert event["tags"]["job_id"] == job.public_id and event["tags"]["job_outcome"] == "dead"
    assert "exception" not in event
    message = event.get("logentry", {}).get("message") or event.get("message")
    assert message.startswith(f"job dead: {job.public_id} slow attempt 1: Quarantined: "), message
    assert len(ingest.events()) == 1
