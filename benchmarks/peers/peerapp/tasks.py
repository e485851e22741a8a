"""django-tasks-db's task (a Django Tasks task) and django-q2's function."""

from django_tasks import task

from benchmarks.peers import probe


@task()
def noop(n: int, probe_: bool = False) -> None:
    probe.run(n, probe_)


def q_noop(n: int, probe_: bool = False) -> None:
    probe.run(n, probe_)
