"""``runworker --reload``: a changed Python file restarts the worker under Django's
autoreloader, the jobs it held handed back first; ``--burst`` is refused with it."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from django_jobs.models import Job
from tests.conftest import ROOT, settings_module, wait_for
from tests.faces.commands.test_command_line import manage
from tests.models import Execution

FAST = ["--lease", "5", "--heartbeat", "0.3", "--poll-interval", "0.1"]
STARTED = re.compile(r"worker \S+-(\d+)-\w+: started; queues")


def test_reload_with_burst_prints_usage_and_one_line():
    result = manage("runworker", "--burst", "--reload")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ") and "Traceback" not in result.stderr
    assert "argument --reload: not allowed with argument --burst" in result.stderr.splitlines()[-1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_changed_file_restarts_the_worker_and_the_running_job_is_handed_back(tmp_path):
    """A job runs when a watched module (the settings, here) changes: the worker stops as at
    SIGTERM, hands the job back past the shutdown timeout, its attempt not spent, and exits
    with status 3; Django's reloader starts a new worker (a new pid), which runs the job."""
    watched = tmp_path / "reload_settings.py"
    watched.write_text(f"from {settings_module()} import *  # noqa: F403\n")
    log = open(tmp_path / "worker.log", "w+")
    env = {**os.environ, "JOBS_DB_NAME": str(_db_name()), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=reload_settings", "--reload",
         "--shutdown-timeout", "0.5", *FAST],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )

    def output() -> str:
        log.flush()
        log.seek(0)
        return log.read()

    try:
        wait_for(lambda: STARTED.search(output()), timeout=60)
        job = Job.enqueue("record", {"sleep": 3})
        wait_for(lambda: Execution.objects.filter(job_public_id=job.public_id).exists(),
                 timeout=60)
        first_pid = Execution.objects.get(job_public_id=job.public_id).pid

        def touched_until_reloading() -> bool:  # the reloader polls each second
            if "changed; stopping to restart" in output():
                return True
            os.utime(watched, (time.time(), time.time() + 1))
            return False

        wait_for(touched_until_reloading, timeout=60, interval=1.0)
        wait_for(lambda: len(STARTED.findall(output())) >= 2, timeout=60)
        pids = [int(pid) for pid in STARTED.findall(output())]
        assert pids[0] == first_pid and pids[1] != first_pid, output()
        assert "handed back 1 job(s) still running" in output()
        wait_for(lambda: Job.objects.get(pk=job.pk).status == Job.Status.COMPLETED, timeout=60)
        runs = Execution.objects.filter(job_public_id=job.public_id).order_by("id")
        assert [(run.pid, run.attempt) for run in runs] == [(first_pid, 1), (pids[1], 1)]
        job.refresh_from_db()
        assert job.attempt == 1
        assert list(job.attempts.values_list("outcome", flat=True)) == ["released", "completed"]
        assert proc.poll() is None  # the parent goes on watching
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        log.close()


def _db_name() -> str:
    from django.conf import settings
    return settings.DATABASES["default"]["NAME"]
