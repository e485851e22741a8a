"""How the rows a PostgreSQL claim returns become ``Job`` instances, as ``Model.from_db``
would make them (tests/engine/test_write_path.py holds the two to each other)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, JSONField
from django.db.models.base import ModelState

from django_jobs.models.instances import plainly_built

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue
    from django_jobs.models import Job

# A field's ``from_db_value``: (the value read, the expression, the connection) -> its value.
Loader = Callable[..., object]


@dataclass(frozen=True, eq=False)
class RowPlan:
    """How a claimed row becomes a Job, worked out once per claim statement: every field's
    name and where its value comes from (a column of the row, or the name of a value the
    claim set), the converters of the columns, and the same by name for the direct build."""

    names: list[str]
    sources: list[int | str]  # a column's position in the row, or a claim value's name
    converters: list[tuple[int, Loader]]
    columns: list[str]
    known: list[str]
    json: list[tuple[str, Loader]]

    @classmethod
    def of(cls, model: type[Job], returned: Sequence[Field]) -> RowPlan:
        position = {f.attname: i for i, f in enumerate(returned)}
        names = [f.attname for f in model._meta.concrete_fields]
        converters = [
            (i, _loader(f)) for i, f in enumerate(returned) if hasattr(f, "from_db_value")
        ]
        columns = [f.attname for f in returned]
        return cls(
            names=names, sources=[position.get(name, name) for name in names],
            converters=converters, columns=columns,
            known=[name for name in names if name not in position],
            json=[(columns[i], to_python) for i, to_python in converters],
        )


def claimed_jobs(
    model: type[Job], rows: Sequence[Sequence[object]], plan: RowPlan,
    values: Mapping[str, object], using: str, connection: BaseDatabaseWrapper,
) -> list[Job]:
    """The claimed rows as Jobs, in claim order (RETURNING keeps no order); ``values`` holds
    what the claim set on every row, by attname."""
    jobs = []
    if plainly_built(model):
        # What ``from_db`` gives, built with two dict updates a row: the values the claim set
        # (the same for every row), then the columns read back; then each JSON column of
        # the batch converted at once (load_column).
        known = {name: values[name] for name in plan.known}
        columns = plan.columns
        for row in rows:
            job = model.__new__(model)
            loaded = job.__dict__
            loaded.update(known)
            loaded.update(zip(columns, row, strict=True))
            state = job._state = ModelState()
            state.adding, state.db = False, using
            jobs.append(job)
        for name, to_python in plan.json:
            load_column(jobs, name, to_python, connection)
    else:
        for row in rows:
            read = list(row)
            for i, to_python in plan.converters:
                read[i] = to_python(read[i], None, connection)
            fields = [
                values[source] if isinstance(source, str) else read[source]
                for source in plan.sources
            ]
            jobs.append(model.from_db(using, plan.names, fields))
    jobs.sort(key=lambda job: (-job.priority, job.run_at, job.id))
    return jobs


def _loader(field: Field) -> Loader:
    """The field's from_db_value; for a plain JSONField (no decoder) the same done directly."""
    if isinstance(field, JSONField) and (
        type(field).from_db_value is JSONField.from_db_value and field.decoder is None
    ):
        return load_json
    return field.from_db_value  # type: ignore[attr-defined]  # only fields that have one


def load_column(jobs: Sequence[Job], name: str, to_python: Loader,
                connection: BaseDatabaseWrapper) -> None:
    """Convert one JSON column of a batch of claimed jobs in place (None stays None).

    With Django's plain JSONField the batch's texts are joined into one JSON array and
    decoded by one ``json.loads``: a call per job cost four times as much (a payload a job)."""
    texts = [job.__dict__[name] for job in jobs]
    present = [text for text in texts if text is not None]
    if not present:
        return
    if to_python is load_json:
        try:
            values = iter(json.loads("[" + ",".join(present) + "]"))
        except (json.JSONDecodeError, TypeError):  # not all JSON text: one at a time
            values = iter([load_json(text, None, connection) for text in present])
    else:
        values = iter([to_python(text, None, connection) for text in present])
    for job, text in zip(jobs, texts, strict=True):
        if text is not None:
            job.__dict__[name] = next(values)


def load_json(value: str | None, expression: object, connection: object) -> JSONValue:
    """``JSONField.from_db_value`` for a column read as text, without its isinstance checks."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
