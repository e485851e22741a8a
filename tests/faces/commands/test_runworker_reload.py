"""``runworker --reload``: a changed Python file restarts the worker under Django's
autoreloader, the jobs it held handed back first; a stop signal to the parent drains the
worker as at a plain ``runworker``; ``--burst`` is refused with it."""

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


class Reloading:
    """A real ``runworker --reload`` parent process, on a settings module in ``tmp_path``."""

    def __init__(self, tmp_path, *args: str) -> None:
        self.watched = tmp_path / "reload_settings.py"
        self.watched.write_text(f"from {settings_module()} import *  # noqa: F403\n")
        self.log = open(tmp_path / "worker.log", "w+")
        env = {**os.environ, "JOBS_DB_NAME": str(_db_name()), "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runworker", "--settings=reload_settings",
             "--reload", *args, *FAST],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def children(self) -> list[int]:
        return [int(pid) for pid in STARTED.findall(self.output())]

    def close(self) -> None:
        """Kill the parent and every child it started (each in a process group of its own)."""
        for pid in [self.proc.pid, *self.children()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def reloading(tmp_path):
    started: list[Reloading] = []

    def start(*args: str) -> Reloading:
        started.append(Reloading(tmp_path, *args))
        return started[-1]

    yield start
    for process in started:
        process.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_changed_file_restarts_the_worker_and_the_running_job_is_handed_back(reloading):
    """A job runs when a watched module (the settings, here) changes: the worker stops as at
    SIGTERM, hands the job back past the shutdown timeout, its attempt not spent, and exits
    with status 3; Django's reloader starts a new worker (a new pid), which runs the job."""
    worker = reloading("--shutdown-timeout", "0.5")
    output = worker.output
    wait_for(lambda: STARTED.search(output()), timeout=60)
    job = Job.enqueue("record", {"sleep": 3})
    wait_for(lambda: Execution.objects.filter(job_public_id=job.public_id).exists(), timeout=60)
    first_pid = Execution.objects.get(job_public_id=job.public_id).pid

    def touched_until_reloading() -> bool:  # the reloader polls each second
        if "changed; stopping to restart" in output():
            return True
        os.utime(worker.watched, (time.time(), time.time() + 1))
        return False

    wait_for(touched_until_reloading, timeout=60, interval=1.0)
    wait_for(lambda: len(STARTED.findall(output())) >= 2, timeout=60)
    pids = worker.children()
    assert pids[0] == first_pid and pids[1] != first_pid, output()
    assert "handed back 1 job(s) still running" in output()
    wait_for(lambda: Job.objects.get(pk=job.pk).status == Job.Status.COMPLETED, timeout=60)
    runs = Execution.objects.filter(job_public_id=job.public_id).order_by("id")
    assert [(run.pid, run.attempt) for run in runs] == [(first_pid, 1), (pids[1], 1)]
    job.refresh_from_db()
    assert job.attempt == 1
    assert list(job.attempts.values_list("outcome", flat=True)) == ["released", "completed"]
    assert worker.proc.poll() is None  # the parent goes on watching


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize(("sleep", "outcomes"), [
    (1, ["completed"]),  # within the shutdown timeout: it finishes
    (30, ["released"]),  # past it: handed back, its attempt not spent
])
def test_a_stop_signal_to_the_parent_drains_the_running_job_and_exits_0(
    reloading, sig, sleep, outcomes
):
    """SIGTERM (or Ctrl-C's SIGINT) sent to the parent only: the parent sends it on to the
    child, which drains as a plain worker does, and both exit with status 0."""
    worker = reloading("--shutdown-timeout", "3")
    wait_for(lambda: STARTED.search(worker.output()), timeout=60)
    job = Job.enqueue("record", {"sleep": sleep})
    wait_for(lambda: Execution.objects.filter(job_public_id=job.public_id).exists(), timeout=60)
    [child] = worker.children()
    worker.proc.send_signal(sig)
    assert worker.proc.wait(timeout=60) == 0, worker.output()
    with pytest.raises(ProcessLookupError):  # reaped by the parent: gone
        os.kill(child, 0)
    assert "stopping; 1 job(s) running" in worker.output()
    job.refresh_from_db()
    assert list(job.attempts.values_list("outcome", flat=True)) == outcomes
    finished = sleep == 1
    assert (job.status, job.attempt) == (("completed", 1) if finished else ("pending", 0))
    assert len(worker.children()) == 1  # no restart after the stop


def _db_name() -> str:
    from django.conf import settings
    return settings.DATABASES["default"]["NAME"]
