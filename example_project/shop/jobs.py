"""The example site's handlers; django-jobs imports every app's jobs.py at start-up."""

import hashlib
import time

from django_jobs import PermanentError, current_job, handler


@handler("email_send", max_attempts=5)
def send_email(payload):
    if not payload.get("to"):
        raise PermanentError("no recipient address")  # straight to dead, no retry
    time.sleep(0.05)  # talking to the mail server
    return {"sent_to": payload["to"], "template": payload.get("template", "plain")}


@handler("image_resize", timeout=30)
def resize_image(payload):
    width, height = payload["width"], payload["height"]
    return {"image_id": payload["image_id"], "width": width, "height": height,
            "format": payload.get("format", "webp")}


@handler("report_generate", queue="reports")
def generate_report(payload):
    digest = hashlib.sha256(repr(sorted(payload.items())).encode()).hexdigest()[:12]
    return {"report": f"reports/{payload['name']}-{digest}.csv", "rows": payload.get("rows", 0)}


@handler("flaky", max_attempts=4)
def flaky(payload):
    """Fails on its first two attempts, then succeeds: shows retry with backoff."""
    job = current_job()
    if job.attempt <= 2:
        raise ConnectionError(f"upstream timed out (attempt {job.attempt})")
    return {"succeeded_on_attempt": job.attempt}


@handler("broken", max_attempts=3)
def broken(payload):
    """Always raises: shows a job going dead with its error and traceback."""
    raise ValueError(f"cannot parse invoice {payload.get('invoice')!r}")
