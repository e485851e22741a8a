"""Links between jobs: a job runs only after the jobs it depends on have completed."""

from __future__ import annotations

from django.db import models
from django.db.models import Field, QuerySet
from django.db.models.deletion import Collector

from django_jobs.core.states import JobStatus
from django_jobs.models.managers import RoutedManager


def keep_unmet_dependency(collector: Collector, field: Field, sub_objs: QuerySet[JobDependency],
                          using: str) -> None:
    """``on_delete`` of ``JobDependency.depends_on``: deleting a job keeps each of its links,
    with no ``depends_on`` and the status the job had in ``deleted_status``. A link whose job
    had completed stays met (it released its dependents, or counts as done for those still
    waiting on others) and tells ``dependency_results()`` that the result was deleted with the
    job; one whose job had not completed keeps its dependent waiting. Only the collector is
    told: nothing is written until the delete runs (the admin collects to show what a delete
    would do)."""
    rows = list(sub_objs.values_list("pk", "depends_on__status"))
    by_status: dict[str, list[JobDependency]] = {}
    for pk, status in rows:
        by_status.setdefault(status, []).append(JobDependency(pk=pk))
    deleted_status = JobDependency._meta.get_field("deleted_status")
    for status, links in by_status.items():
        collector.add_field_update(deleted_status, status, links)
        collector.add_field_update(field, None, links)


keep_unmet_dependency.lazy_sub_objs = True  # type: ignore[attr-defined]  # one read, not two


class JobDependency(models.Model):
    """``job`` runs only after ``depends_on`` has completed (``features/dependencies.py`` writes and
    reads these rows); ``name`` is the dependency's name in ``dependency_results()``, when it
    was given one (``depends_on={"name": job}``).

    A link whose job was deleted stays, with ``depends_on`` empty and the status that job had
    in ``deleted_status`` (``keep_unmet_dependency``): met if it had completed (its result is
    gone), otherwise a dependency that will never complete, which keeps its dependent waiting.
    """

    job = models.ForeignKey("django_jobs.Job", on_delete=models.CASCADE,
                            related_name="dependencies")
    depends_on = models.ForeignKey("django_jobs.Job", on_delete=keep_unmet_dependency,
                                   null=True, blank=True, related_name="dependents")
    # The status of the job ``depends_on`` was when it was deleted; empty while it exists.
    deleted_status = models.CharField(max_length=16, choices=JobStatus.choices, blank=True,
                                      default="")
    # NULL: a dependency given in a list, without a name (nullable: adding it rewrites no row).
    name = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001

    objects = RoutedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "depends_on"],
                                               name="django_jobs_dependency_once")]

    def __str__(self) -> str:
        if self.depends_on_id is None:
            return f"{self.job_id} after a deleted job ({self.deleted_status})"
        return f"{self.job_id} after {self.depends_on_id}"
