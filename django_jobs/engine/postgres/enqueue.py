"""``enqueue`` and ``enqueue_many`` on PostgreSQL, one round trip each (the statements are
``sql.insert_sql`` and ``sql.insert_many_sql``): the fast path of the enqueue.

``PostgresInserts`` gives ``PostgresEngine`` (``engine/postgres/engine.py``) its ``insert`` and
``insert_many``, which the enqueue verbs (``engine/verbs.py``) call when no unique key or
dependency needs more than an INSERT; other databases, and those cases, take ``save()`` and
``bulk_create``. Each value is written as those would write it (tests/engine/test_write_path.py,
tests/fidelity/test_fidelity.py and tests/engine/test_bulk_insert.py hold them to it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING

from django.db import connections, transaction
from django.db.models import (
    NOT_PROVIDED,
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    IntegerField,
)
from django.db.models.signals import post_save, pre_save

from django_jobs.engine.postgres.cursor import run
from django_jobs.engine.postgres.statements import insert_many_sql, insert_sql, quote
from django_jobs.models.instances import insert_fields, plain_pre_save, varying

if TYPE_CHECKING:
    from django.db.models import Field

    from django_jobs.models import Job


class PostgresInserts:
    """The INSERTs of ``PostgresEngine``'s enqueue verbs, on the engine's database."""

    db: str

    def insert(self, job: Job) -> None:
        """``insert`` with what ``save()`` adds: pre/post_save for any receivers, and a failed
        INSERT marking the caller's atomic block for rollback."""
        sender, using = type(job), self.db
        if pre_save.has_listeners(sender):
            pre_save.send(sender=sender, instance=job, raw=False, using=using,
                          update_fields=None)
        with transaction.mark_for_rollback_on_error(using):
            insert(job, using)
        if post_save.has_listeners(sender):
            post_save.send(sender=sender, instance=job, created=True, update_fields=None,
                           raw=False, using=using)

    def insert_many(self, jobs: list[Job], shared: dict[str, object]) -> list[Job]:
        """``bulk_create``'s INSERT, the values all jobs share sent once."""
        if jobs:
            with transaction.mark_for_rollback_on_error(self.db):
                insert_many(jobs, self.db, varying(type(jobs[0]), shared=shared))
        return jobs


def insert(job: Job, using: str) -> None:
    """INSERT one new job and set its pk: what ``save(force_insert=True)`` does, with the
    statement and the way to read each field's value worked out once per database.

    Each value goes through its field's ``get_db_prep_save``, as in ``save()``, unless it is of
    the one class the field sends to psycopg unchanged (``_sent_as_is``): a JSON field's value
    always does, so a string payload is stored as a JSON string, never parsed as JSON text.
    Columns whose value is None are left out of the statement when they have no database
    default (they are NULL all the same): a new job has eight of them, and a statement per set
    of columns sent (in practice one or two) is prepared once."""
    connection = connections[using]
    fields = _INSERT_FIELDS.get(using)
    if fields is None:
        fields = _INSERT_FIELDS[using] = _insert_fields(type(job))
    values = job.__dict__
    columns = []
    params = []
    for name, field, plain, column, omit_none, as_is in fields:
        # pre_save is a plain read for every field but an auto_now date
        value = values[name] if plain and name in values else field.pre_save(job, True)
        if value is None:
            if omit_none:
                continue
        elif value.__class__ is not as_is or (
                as_is is datetime and getattr(value, "tzinfo", None) is None):
            value = field.get_db_prep_save(value, connection)
        columns.append(column)
        params.append(value)
    job.pk = run(connection, insert_sql(type(job), tuple(columns)), params)[0][0]
    job._state.adding = False
    job._state.db = using


# The fields whose get_db_prep_save returns a value of one class unchanged on PostgreSQL (an
# aware datetime, for a DateTimeField), with that class; tests/fidelity/test_fidelity.py holds every
# field of Job to it. Integer fields are among them though Django wraps the int to name its
# size (psycopg's Int2 for a SmallIntegerField): the INSERT casts it to the column's type all
# the same. A subclass that overrides one of the three methods is not among them.
SENT_AS_IS: tuple[tuple[type[Field], type], ...] = (
    (BooleanField, bool), (IntegerField, int), (DateTimeField, datetime), (CharField, str),
)
_PREP_METHODS = ("get_prep_value", "get_db_prep_value", "get_db_prep_save")


def _sent_as_is(field: Field) -> type | None:
    """The class of value ``field`` sends to the database as it is, or None (JSON, UUID...)."""
    for base, value_class in SENT_AS_IS:
        if isinstance(field, base) and all(
            getattr(type(field), method) is getattr(base, method) for method in _PREP_METHODS
        ):
            return value_class
    return None


def _insert_fields(model: type[Job]) -> list[tuple[str, Field, bool, str, bool, type | None]]:
    """Each column's attname, field, whether pre_save is a plain read, quoted name, whether a
    None may be left out (no database default would then fill it), and the class of value it
    sends as it is."""
    return [
        (f.attname, f, plain_pre_save(f), quote(f.column),
         getattr(f, "db_default", NOT_PROVIDED) is NOT_PROVIDED, _sent_as_is(f))
        for f in model._meta.concrete_fields if not f.primary_key
    ]


_INSERT_FIELDS: dict[str, list[tuple[str, Field, bool, str, bool, type | None]]] = {}


def insert_many(jobs: Sequence[Job], using: str, varying: Collection[str] | None = None) -> None:
    """INSERT many new jobs in one statement and set their pks (``bulk_create`` without its
    per-value compile and quoting): the rows travel as one JSON array, encoded by the C json
    module, that PostgreSQL turns into rows of the table with ``jsonb_populate_recordset``.

    ``varying`` names the attnames whose value may differ from job to job (None: any). Every
    other field must hold the same value on every job: it is sent once, as the base record
    whose values fill the columns a row of the array leaves out. An ``auto_now`` date varies
    whatever ``varying`` says, as its ``pre_save`` gives each job its own time."""
    if not jobs:
        return
    model = type(jobs[0])
    connection = connections[using]
    fields, per_job = insert_fields(model, varying)
    shared = [f for f in fields if f not in per_job]
    first = jobs[0]
    base = {f.column: _plain(f.pre_save(first, True)) for f in shared}
    rows = [{f.column: _plain(f.pre_save(job, True)) for f in per_job} for job in jobs]
    params = (json.dumps(base, allow_nan=False), json.dumps(rows, allow_nan=False))
    returned = run(connection, insert_many_sql(model, fields), params)
    pks = dict((public_id, pk) for pk, public_id in returned)
    for job in jobs:  # matched on public_id, not on the order rows come back in
        job.pk = pks[job.public_id]
        job._state.adding = False
        job._state.db = using


def _plain(value: object) -> object:
    """A field value as JSON: JSON fields' values as they are, times, dates and UUIDs as
    text."""
    if isinstance(value, date):  # a datetime too
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
