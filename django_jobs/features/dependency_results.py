"""What a dependent reads of its dependencies: ``dependency_results()``.

    from django_jobs import dependency_results

    @handler("report")
    def report(payload):
        results = dependency_results()     # the running job's dependencies
        rows = results["extract"]          # by name (depends_on={"extract": job, ...})
        rows = results[extract_job]        # by job, its id or its public id

One read of the job's links with their dependencies' status and result (``JobDependency``),
made when it is called. A dependency that did not complete (dead or canceled, for a dependent
whose policy runs it anyway), or that was deleted after it completed (retention keeps it until
its dependents have ended), has no result:
asking for it raises ``DependencyUnavailable`` saying which; ``status(key)`` says what it came
to without raising.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django_jobs.core.states import JobStatus
from django_jobs.exceptions import DependencyUnavailable

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models import Job


@dataclass(frozen=True, slots=True)
class Dependency:
    """One dependency as its dependent sees it. ``job_id`` and ``public_id`` are None once the
    job was deleted; ``status`` is the status it had then (``deleted`` is True)."""

    name: str | None
    job_id: int | None
    public_id: str | None
    status: str
    deleted: bool
    result: JSONValue

    @property
    def key(self) -> str:
        """Its key in ``DependencyResults``: its name, else its public id."""
        return self.name or self.public_id or f"a deleted job ({self.status})"


class DependencyResults(Mapping[object, "JSONValue"]):
    """The results of one job's dependencies, keyed by name (or public id where unnamed);
    looked up by name, public id, primary key or ``Job``."""

    def __init__(self, dependencies: list[Dependency]) -> None:
        self.dependencies = dependencies
        self._by_key: dict[object, Dependency] = {}
        for dependency in dependencies:
            for key in (dependency.job_id, dependency.public_id, dependency.name):
                if key is not None:
                    self._by_key.setdefault(key, dependency)

    def find(self, key: object) -> Dependency:
        """The dependency under ``key`` (a name, public id, primary key or Job); KeyError if
        the job has no such dependency."""
        pk = getattr(key, "pk", None)
        found = self._by_key.get(pk if pk is not None else key)
        if found is None:
            raise KeyError(key)
        return found

    def status(self, key: object) -> str:
        """What the dependency came to: completed, dead, canceled (or any state, for a
        dependency that has not ended)."""
        return self.find(key).status

    def __getitem__(self, key: object) -> JSONValue:
        dependency = self.find(key)
        if dependency.deleted and dependency.status == JobStatus.COMPLETED:
            raise DependencyUnavailable(
                f"dependency {dependency.key!r} completed, but was deleted (pruned) since: "
                f"its result is gone")
        if dependency.status != JobStatus.COMPLETED:
            was = "was" if dependency.deleted else "is"
            raise DependencyUnavailable(
                f"dependency {dependency.key!r} {was} {dependency.status}: it has no result")
        return dependency.result

    def __iter__(self) -> Iterator[object]:
        return iter([dependency.key for dependency in self.dependencies])

    def __len__(self) -> int:
        return len(self.dependencies)

    def __repr__(self) -> str:
        return f"<DependencyResults {[(d.key, d.status) for d in self.dependencies]}>"


def dependencies_of(job: Job) -> DependencyResults:
    """The dependencies of ``job``, in the order they were given, with their results."""
    from django_jobs.models import JobDependency

    rows = (JobDependency.objects.using(job._state.db or JobDependency.objects.db)
            .filter(job_id=job.pk).order_by("pk")
            .values_list("name", "depends_on_id", "depends_on__public_id",
                         "depends_on__status", "deleted_status", "depends_on__result"))
    return DependencyResults([
        Dependency(name=name, job_id=pk, public_id=public_id,
                   status=status if pk is not None else deleted_status,
                   deleted=pk is None, result=result if pk is not None else None)
        for name, pk, public_id, status, deleted_status, result in rows
    ])


def dependency_results(job: Job | None = None) -> DependencyResults:
    """The results of the dependencies of ``job``, by default the job the calling handler
    runs (RuntimeError outside a worker then)."""
    if job is None:
        from django_jobs.core.current import current_job

        job = current_job.get()
        if job is None:
            raise RuntimeError("only a handler run by a worker can do this")
    return dependencies_of(job)
