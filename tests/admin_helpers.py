"""Rows and users for the admin tests.

Jobs in every state are written directly as fixture rows (the states a worker would leave them
in); what the tests check is what the admin shows and what its actions do to them.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Permission, User
from django.utils import timezone

from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job, JobAttempt

TRACEBACK = 'Traceback (most recent call last):\n  File "jobs.py", line 3, in send\nSMTPError: 550'


def make_job(status: str = "pending", **fields) -> Job:
    now = timezone.now()
    defaults = {"type": "echo", "payload": {"to": "ada@example.com"}, "status": status}
    if status in ("dead", "failed", "canceled"):
        defaults["error"] = error_dict(
            type="SMTPError", message="mailbox unavailable", traceback=TRACEBACK,
            details={"code": 550},
        )
        defaults["attempt"] = 3 if status == "dead" else 1
    if status in ("completed", "dead", "canceled"):
        defaults.update(started_at=now - timedelta(seconds=2), finished_at=now)
    if status == "processing":
        defaults.update(attempt=1, started_at=now, worker_id="w-1",
                        leased_until=now + timedelta(seconds=30))
    defaults.update(fields)
    return Job.objects.create(**defaults)


def add_attempt(job: Job, outcome: str = "failed", **fields) -> JobAttempt:
    now = timezone.now()
    defaults = {
        "job": job, "number": job.attempt or 1, "worker_id": "host-123-abc",
        "started_at": now - timedelta(seconds=1), "finished_at": now, "outcome": outcome,
        "error": job.error, "cpu_time": 0.25, "peak_memory": 50 * 1024 * 1024,
    }
    defaults.update(fields)
    return JobAttempt.objects.create(**defaults)


def staff(username: str, *codenames: str, superuser: bool = False) -> User:
    user = User.objects.create_user(
        username, password="pw", is_staff=True, is_superuser=superuser
    )
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def job_url(job: Job, what: str = "change") -> str:
    from django.urls import reverse

    return reverse(f"admin:django_jobs_job_{what}", args=[job.pk])
