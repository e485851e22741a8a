"""Recurring jobs declared in ``DJANGO_JOBS["SCHEDULES"]``, enqueued by any worker.

``config`` reads and checks the setting, ``models`` holds each schedule's state and one row per
occurrence (unique per schedule and time: the exactly-once guarantee), ``ticker`` enqueues due
occurrences on a worker's heartbeat, ``admin`` lists them with pause and run-now actions.
"""

from . import checks  # noqa: F401  (registers the system check of the SCHEDULES setting)
