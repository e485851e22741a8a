"""A handler with a schedule declared on it (``@periodic``), for the worker that runs it."""

from django_jobs import handler, periodic


@periodic(every=1, payload={"from": "periodic"})
@handler("periodic_tick", max_attempts=1)
def periodic_tick(payload):
    return payload
