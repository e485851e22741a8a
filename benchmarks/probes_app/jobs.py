"""Handlers of ``benchmarks/probes_guarantees.py`` beyond those of ``tests/jobs.py``."""

import os

from django_jobs import current_job, handler

ONE_MB = 1_000_000


@handler("probe_big_result")
def probe_big_result(payload):
    """One ``Execution`` row per run, then a result of about 1 MB."""
    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    return {"blob": "x" * ONE_MB}
