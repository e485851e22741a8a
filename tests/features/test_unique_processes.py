"""Unique jobs across real processes: separate interpreters, each with its own connection,
enqueue one key at once and get one job."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from django_jobs.models import Job
from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Run by each process with ``manage.py shell -c``: connect, say so, wait for the start file,
# then enqueue the key in a transaction that reads once more before it commits, and print the
# job's id and whether it was a duplicate.
ENQUEUE = """
import os, pathlib, time
from django.db import connection, transaction
from django_jobs.models import Job
gate = pathlib.Path(os.environ["GATE"])
connection.ensure_connection()
(gate.parent / f"ready-{os.getpid()}").touch()
while not gate.exists():
    time.sleep(0.005)
with transaction.atomic():
    job = Job.enqueue("echo", {"pid": os.getpid()}, unique_key="race")
    Job.objects.filter(pk=job.pk).exists()
print("job", job.pk, job.duplicate)
"""


def test_concurrent_enqueuers_in_separate_processes_make_one_job(tmp_path: Path):
    count = 6
    gate = tmp_path / "go"
    env = {**os.environ, "JOBS_DB_NAME": str(settings.DATABASES["default"]["NAME"]),
           "GATE": str(gate), "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "django", "shell", "--settings=tests.settings", "-c", ENQUEUE],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for _ in range(count)
    ]
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == count, timeout=120)
        gate.touch()
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0] * count, outputs
    lines = [line.split() for out in outputs for line in out.splitlines()
             if line.startswith("job ")]
    assert len(lines) == count, outputs
    assert len({pk for _, pk, _ in lines}) == 1  # every process got the same job
    assert sorted(duplicate for _, _, duplicate in lines) == ["False"] + ["True"] * (count - 1)
    (job,) = Job.objects.filter(type="echo")
    assert str(job.pk) == lines[0][1] and job.unique_key == "1110100|echo:race"
