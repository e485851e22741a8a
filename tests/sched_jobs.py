"""Fixture handlers for scheduling, unique jobs, limits, timeouts, snooze and progress tests.

Imported from ``tests/jobs.py`` so the worker's autodiscovery registers them.
"""

import time

from django_jobs import Unique, handler


@handler("timeout_blocking", timeout=0.3, max_attempts=1)
def timeout_blocking(payload):
    """Blocks in one C call (``time.sleep``) far past its timeout: it cannot be interrupted."""
    time.sleep(payload.get("seconds", 60))


@handler("unique_customer", unique=Unique(fields=("customer_id",)))
def unique_customer(payload):
    """At most one unfinished job per customer, by the handler's rule."""
    return {"customer": payload["customer_id"]}
