"""Ready rows taken with ``FOR UPDATE SKIP LOCKED``: a claim's candidates when they are read
before the claim writes them (claim admission). Each engine picks its read
(``lock_candidates``): ``locked`` on the ORM, ``locked_in_order`` on PostgreSQL; MariaDB has
``engine/mariadb/schema.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


def locked(queryset: QuerySet[M], count: int) -> list[M]:
    """The first ``count`` rows of ``queryset``, locked, skipping rows other claimers hold."""
    return list(queryset.select_for_update(skip_locked=True)[:count])


def locked_in_order(queryset: QuerySet[M], count: int) -> list[M]:
    """``locked`` with PostgreSQL's statement (``locked_sql``), or the ORM's if the statement
    is not the one expected."""
    statement = locked_sql(queryset, count)
    if statement is None:
        return locked(queryset, count)
    return list(queryset.model._default_manager.db_manager(queryset.db).raw(*statement))


def locked_sql(queryset: QuerySet[M], count: int) -> tuple[str, Sequence[object]] | None:
    """``locked``'s statement for PostgreSQL, its LIMIT written ``LIMIT (SELECT n)`` as the
    plain claim's is (``engine/postgres/statements.py``, ``CLAIM``): the planner then walks the
    ready index in order whatever its statistics say, where ``LIMIT n`` with an estimate of n ready
    rows or fewer (a table never analyzed, or analyzed before a burst) sorts every ready row. None
    if the
    ORM's statement does not end as expected."""
    rows = queryset.select_for_update(skip_locked=True)[:count]
    sql, params = rows.query.get_compiler(queryset.db).as_sql()
    tail = f" LIMIT {int(count)} FOR UPDATE SKIP LOCKED"
    if not sql.endswith(tail):
        return None
    return f"{sql[: -len(tail)]} LIMIT (SELECT {int(count)}) FOR UPDATE SKIP LOCKED", params
