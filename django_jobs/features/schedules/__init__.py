"""Recurring jobs declared in ``DJANGO_JOBS["SCHEDULES"]``, enqueued by any worker.

``config`` reads and checks the setting, ``checks`` is its system check (registered by the
app's ``ready()``), ``models`` holds each schedule's state and one row per occurrence (unique
per schedule and time: the exactly-once guarantee), ``ticker`` enqueues due occurrences on a
worker's heartbeat (the ``Schedules`` feature), ``admin`` lists them with pause and run-now
actions. This file imports nothing: loading the models runs no code of the feature.
"""
