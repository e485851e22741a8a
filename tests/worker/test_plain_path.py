"""A burst that runs one plain job (no unique key, group, dependency, callback or follow-up;
no limits, schedules or other feature configured to join the claim) runs code of few
django_jobs modules: none of the features', none of another database's. A real ``runworker
--burst`` process, profiled by ``tests/worker/profiled_burst.py`` from its start to its exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from django_jobs.models import Job
from tests.conftest import ROOT, settings_module

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The modules of django_jobs whose code such a burst runs, at most, by database (vendor): the
# worker's, the engine's for that database, core's, the models', the command and the checks
# it runs before it starts. The worker's parts (the producer, the executor, the watchman) are
# modules of their own; what only a feature, a trace, a suspect, a failed write, an async job,
# systemd or a waiting worker's listener needs is not imported.
BOUND = {"postgresql": 52, "sqlite": 44, "mysql": 46}


def profiled_burst() -> list[str]:
    env = {**os.environ, "JOBS_DB_NAME": str(settings.DATABASES["default"]["NAME"]),
           "DJANGO_SETTINGS_MODULE": settings_module(), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.worker.profiled_burst", "--poll-interval", "30",
         "--heartbeat", "30", "--lease", "300"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_burst_of_one_plain_job_enters_no_feature_and_few_modules():
    job = Job.enqueue("echo", {"n": 1})
    modules = profiled_burst()
    assert Job.objects.get(pk=job.pk).status == Job.Status.COMPLETED
    assert "django_jobs.worker.loop" in modules  # the count saw the worker's run
    not_plain = ["tracing", "span_ends", "suspects", "isolation", "slot_loop", "async_jobs",
                 "systemd"]
    assert [name for name in modules if name.rsplit(".", 1)[-1] in not_plain] == []
    assert "django_jobs.engine.postgres.listener" not in modules  # a burst waits for no enqueue
    assert [name for name in modules if name.startswith("django_jobs.features")] == []
    if connection.vendor != "mysql":  # MariaDB's code (its schema, for one) stays out
        assert [name for name in modules if name.startswith("django_jobs.engine.mariadb")] == []
    assert len(modules) <= BOUND[connection.vendor], "\n".join(modules)
