"""django-jobs' handler."""

from benchmarks.peers import probe
from django_jobs import handler


@handler("peers.noop")
def noop(payload: dict) -> None:
    probe.run(payload["n"], payload.get("probe", False))
