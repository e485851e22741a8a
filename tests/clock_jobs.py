"""Handlers of the clock tests (``tests/fidelity/test_clock.py``)."""

import os
import threading

from django_jobs import current_job, handler


@handler("record_waiting")
def record_waiting(payload):
    """As ``record``: one row per run, then a wait. It waits on an Event rather than in
    ``time.sleep``: under libfaketime with a negative offset and the monotonic clock left
    alone, ``time.sleep`` fails with EINVAL (libfaketime shifts its monotonic deadline)."""
    from tests.models import Execution

    job = current_job()
    Execution.objects.create(job_public_id=job.public_id, pid=os.getpid(), attempt=job.attempt)
    threading.Event().wait(payload.get("wait", 0))
    return {"pid": os.getpid()}
