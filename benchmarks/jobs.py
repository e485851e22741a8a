"""The handler the benchmark drains: it does nothing, so only the queue's own cost is measured."""

from django_jobs import handler


@handler("bench.noop")
def noop(payload):
    return None
