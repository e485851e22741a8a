"""How the rows a PostgreSQL claim returns become ``Job`` instances: through ``Model.from_db``
with each column converted by its field's ``from_db_value``, as a queryset builds them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import Job


@dataclass(frozen=True, eq=False)
class RowPlan:
    """How a claimed row becomes a Job, worked out once per model: every field's attname and
    where its value comes from (a column of the row by position, or the name of a value the
    claim set), and the converters of the columns that have one."""

    names: list[str]
    sources: list[int | str]
    converters: list[tuple[int, Any]]

    @classmethod
    def of(cls, model: type[Job], returned: Sequence[Any]) -> RowPlan:
        position = {f.attname: i for i, f in enumerate(returned)}
        names = [f.attname for f in model._meta.concrete_fields]
        return cls(
            names=names, sources=[position.get(name, name) for name in names],
            converters=[(i, f.from_db_value) for i, f in enumerate(returned)
                        if hasattr(f, "from_db_value")],
        )


def claimed_jobs(
    model: type[Job], rows: Sequence[Sequence[Any]], plan: RowPlan, values: dict[str, Any],
    using: str, connection: Any,
) -> list[Job]:
    """The claimed rows as Jobs, in claim order (RETURNING keeps no order); ``values`` holds
    what the claim set on every row, by attname."""
    jobs = []
    for row in rows:
        read = list(row)
        for i, to_python in plan.converters:
            read[i] = to_python(read[i], None, connection)
        fields = [values[source] if isinstance(source, str) else read[source]
                  for source in plan.sources]
        jobs.append(model.from_db(using, plan.names, fields))
    jobs.sort(key=lambda job: (-job.priority, job.run_at, job.id))
    return jobs
