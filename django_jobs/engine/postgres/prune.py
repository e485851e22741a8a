"""A prune batch on PostgreSQL as one statement after its locking read: the fast path of
``delete_batch``.

Django's delete of a batch of jobs reads the jobs' full rows into model instances (a custom
``on_delete``, ``keep_unmet_dependency``, rules out its fast delete), then sends one statement
per related table and one per hundred jobs, each a round trip: about half of a prune pass's
time, and CPU that a busy site's producers and workers want. Here the batch's ids are selected
and locked (``FOR UPDATE SKIP LOCKED``, oldest first, as the plain path does); then one
statement reads the batch's filter again on those flagged ``has_dependents`` (``staff.batch_again``,
its own snapshot: a job a waiting job came to depend on meanwhile stays) in a ``MATERIALIZED``
common table expression, and every related table's ``on_delete`` work and the jobs' DELETE are
data-modifying expressions of it.

The statement is derived from the model's relations, not written for today's tables, and it
stands in for the plain path only where it does exactly what Django's collector would
(``tests/engine/test_prune_statement.py`` holds the two to each other on generated graphs of
jobs): relations that are ``CASCADE`` to a model nothing else points at, ``SET_NULL``,
``DO_NOTHING`` or ``keep_unmet_dependency``, and no ``pre_delete``/``post_delete`` receivers for
the models deleted. A site whose own model points at jobs with any other ``on_delete``, or
which listens for their deletes, gets the plain path (``plan`` returns None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import connections, models, transaction
from django.db.models.signals import m2m_changed, post_delete, pre_delete

from django_jobs.engine.staff import BATCH_FIELDS, batch_again
from django_jobs.models.dependencies import JobDependency, keep_unmet_dependency

if TYPE_CHECKING:
    from django_jobs.models.managers import JobQuerySet


@dataclass(frozen=True)
class Step:
    """One related table's part: ``kind`` is ``delete`` (CASCADE), ``set_null`` or ``keep``
    (``keep_unmet_dependency``: the link stays, with the job's status in ``deleted_status``);
    ``column`` points at the job; ``cascaded`` are the table's columns that a CASCADE step of
    the same statement deletes by, whose rows an update must leave to that delete."""

    kind: str
    model: type[models.Model]
    column: str
    cascaded: tuple[str, ...] = ()


def listened(model: type[models.Model]) -> bool:
    """Whether deleting ``model``'s rows has receivers Django's collector would call."""
    return any(signal.has_listeners(model) for signal in (pre_delete, post_delete, m2m_changed))


def pointing_at(model: type[models.Model]) -> list:
    """The relations whose rows a delete of ``model``'s rows concerns, as Django's collector
    finds them: hidden ones (``related_name="+"``) included."""
    return [field for field in model._meta.get_fields(include_hidden=True)
            if field.auto_created and not field.concrete
            and (field.one_to_one or field.one_to_many or field.many_to_many)]


def plan(model: type[models.Model]) -> list[Step] | None:
    """The steps deleting ``model``'s rows takes, or None where only Django's collector does
    what the site asked for."""
    if listened(model) or model._meta.parents or any(
            hasattr(field, "bulk_related_objects") for field in model._meta.private_fields):
        return None
    found: list[tuple[str, type[models.Model], str]] = []
    for relation in pointing_at(model):
        related, field, on_delete = relation.related_model, relation.field, relation.on_delete
        if relation.many_to_many or related is model or field.target_field.column != \
                model._meta.pk.column:
            return None
        if on_delete is models.DO_NOTHING:
            continue
        if on_delete is models.CASCADE:
            if pointing_at(related) or listened(related) or related._meta.private_fields:
                return None
            found.append(("delete", related, field.column))
        elif on_delete is models.SET_NULL:
            found.append(("set_null", related, field.column))
        elif on_delete is keep_unmet_dependency and related is JobDependency:
            found.append(("keep", related, field.column))
        else:
            return None
    cascaded: dict[type[models.Model], tuple[str, ...]] = {}
    for kind, related, column in found:
        if kind == "delete":
            cascaded[related] = (*cascaded.get(related, ()), column)
    return [Step(kind, related, column, () if kind == "delete" else cascaded.get(related, ()))
            for kind, related, column in found]


def quote(name: str) -> str:
    """An identifier from a model's meta, quoted for PostgreSQL."""
    return '"' + name.replace('"', '""') + '"'


# The steps' expressions on the ids in ``batch``; every name in them is a quoted identifier
# from a model's meta, never a value.
DELETE = "DELETE FROM {table} AS t WHERE t.{column} IN (SELECT id FROM batch)"
SET_NULL = "UPDATE {table} AS t SET {column} = NULL WHERE t.{column} IN (SELECT id FROM batch)"
KEEP = ("UPDATE {table} AS t SET {status} = j.status, {column} = NULL FROM {jobs} AS j "
        "WHERE j.{pk} = t.{column} AND j.{pk} IN (SELECT id FROM batch)")
# An update leaves a row to the step that deletes it by another column.
LEFT_TO_DELETE = " AND NOT EXISTS (SELECT 1 FROM batch WHERE batch.id = t.{column})"


def part(step: Step, jobs_table: str, pk: str) -> str:
    """The data-modifying expression of one step."""
    names = {"table": quote(step.model._meta.db_table), "column": quote(step.column),
             "jobs": jobs_table, "pk": pk,
             "status": quote(JobDependency._meta.get_field("deleted_status").column or "")}
    template = {"delete": DELETE, "set_null": SET_NULL, "keep": KEEP}[step.kind]
    return template.format(**names) + "".join(
        LEFT_TO_DELETE.format(column=quote(column)) for column in step.cascaded)


def delete_batch(jobs: JobQuerySet, limit: int) -> int | None:
    """Delete up to ``limit`` of ``jobs`` (oldest first, rows another transaction holds
    skipped) and what their relations' ``on_delete`` asks, in one statement after the locking
    read; returns how many jobs went, or None where ``plan`` leaves it to the plain path."""
    steps = plan(jobs.model)
    if steps is None:
        return None
    meta = jobs.model._meta
    jobs_table, pk = quote(meta.db_table), quote(meta.pk.column)
    with transaction.atomic(using=jobs.db):
        batch = jobs.order_by("created_at", "pk").select_for_update(skip_locked=True)
        rows = list(batch.values_list(*BATCH_FIELDS)[:limit])
        if not rows:
            return 0
        select, params = batch_again(jobs, rows).values_list("pk").query.get_compiler(
            using=jobs.db).as_sql()
        parts = "".join(f",\n s{n} AS ({part(step, jobs_table, pk)})"
                        for n, step in enumerate(steps))
        statement = (f"WITH batch(id) AS MATERIALIZED ({select}){parts}\n"  # noqa: S608
                     f"DELETE FROM {jobs_table} WHERE {pk} IN (SELECT id FROM batch)")
        with connections[jobs.db].cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.rowcount
