"""``enqueue_many`` on MariaDB and MySQL: ``bulk_create``'s INSERT in one statement whose
per-job values travel as one JSON document.

``bulk_create`` compiles and escapes every value of every row (24 columns a job); here each
value is still the one ``bulk_create`` hands the driver (its field's ``get_db_prep_save``), but
the values all jobs share are sent once, as parameters of the ``SELECT`` list, and those that
differ from job to job are encoded by the C json module into one array, which ``JSON_TABLE``
turns back into rows. A string comes out of ``JSON_TABLE`` as the text it was, and the server
converts it to its column's type as it converts the same string sent as a parameter.

Used by ``MariaDBEngine.enqueue_many`` (``engine/mariadb/engine.py``) only; unique keys and
dependencies keep the ORM's insert. tests/engine/test_mariadb_bulk_insert.py holds it to
``bulk_create`` for every field.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import BooleanField, Field, IntegerField

from django_jobs.models.instances import insert_fields

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models import Field

    from django_jobs.models import Job


def insert_many(jobs: Sequence[Job], using: str, varying: Collection[str] | None = None) -> None:
    """INSERT ``jobs`` in one statement and set their pks, in their order.

    ``varying`` names the attnames whose value may differ from job to job (None: any); every
    other field must hold the same value on every job (its first job's is sent). An
    ``auto_now`` date varies whatever ``varying`` says."""
    if not jobs:
        return
    model = type(jobs[0])
    connection = connections[using]
    fields, per_job = insert_fields(model, varying)
    quote = connection.ops.quote_name
    select, params = _select(fields, per_job, jobs[0], connection)
    rows = [[_sent(f.get_db_prep_save(f.pre_save(job, True), connection)) for f in per_job]
            for job in jobs]
    columns = ", ".join(
        f"{quote(f'c{i}')} {_json_table_type(f)} PATH '$[{i}]'" for i, f in enumerate(per_job)
    )
    table, pk = quote(model._meta.db_table), quote(_column(model._meta.pk))
    sql = (
        f"INSERT INTO {table} ({', '.join(quote(_column(f)) for f in fields)}) "  # noqa: S608
        f"SELECT {', '.join(select)} FROM JSON_TABLE(%s, '$[*]' COLUMNS("
        f"{quote('row')} FOR ORDINALITY{', ' if columns else ''}{columns})) AS j "
        f"ORDER BY j.{quote('row')} RETURNING {pk}"
    )
    params.append(json.dumps(rows, ensure_ascii=False, allow_nan=False))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        returned = cursor.fetchall()
    if len(returned) != len(jobs):
        raise RuntimeError(f"{len(jobs)} jobs inserted, {len(returned)} ids returned")
    for job, (job_pk,) in zip(jobs, returned, strict=True):  # in the order of ``row``
        job.pk = job_pk
        job._state.adding = False
        job._state.db = using


def _select(fields: list[Field], per_job: list[Field], first: Job,
            connection: BaseDatabaseWrapper) -> tuple[list[str], list[Any]]:
    """The SELECT list's items, a ``JSON_TABLE`` column for a value per job and a parameter
    for a value all share (the first job's), and those parameters."""
    quote = connection.ops.quote_name
    select: list[str] = []
    params: list[Any] = []  # what get_db_prep_save gives: the driver's to adapt
    for field in fields:
        if field in per_job:
            select.append(f"j.{quote(f'c{per_job.index(field)}')}")
        else:
            select.append("%s")
            params.append(field.get_db_prep_save(field.pre_save(first, True), connection))
    return select, params


def _column(field: Field | None) -> str:
    if field is None or field.column is None:
        raise ValueError("a field without a column")
    return str(field.column)


def _sent(value: object) -> object:
    """A prepared value as the JSON the document carries: what the driver would send of it
    (True as 1), or its text."""
    if value is None or value.__class__ is int or value.__class__ is str:
        return value
    if isinstance(value, bool | int):
        return int(value)
    return str(value)


def _json_table_type(field: Field) -> str:
    """The type ``JSON_TABLE`` gives a per-job column: integers as integers, all else text."""
    if isinstance(field, IntegerField | BooleanField):
        return "BIGINT"
    return "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
