"""django-jobs' handler."""

from django_jobs import handler

from benchmarks.peers import probe


@handler("peers.noop")
def noop(payload: dict) -> None:
    probe.run(payload["n"], payload.get("probe", False))
