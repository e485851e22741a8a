"""Counts of jobs that never read a large part of the table: exact up to a cap, the planner's
estimate above it.

``COUNT(*)`` reads every matching row. The planner (``EXPLAIN``, which reads table and index
statistics, not the table) tells how many rows a query is expected to return and how much
reading them would cost, at the price of a plan. ``capped_count`` counts at most ``cap + 1``
rows (``SELECT COUNT(*) FROM (... LIMIT cap + 1)``): through an index that holds the rows (a
status through the status or the lease index), or densely among the newest (completed jobs,
most of the table), that is a short read. Past the cap it gives the planner's estimate and
says so. SQLite has no estimate and counts exactly.

PostgreSQL's plan gives rows and a cost. MariaDB's (``EXPLAIN EXTENDED``) gives, per table,
the rows its plan reads and the percentage of them it expects to pass the conditions: the rows
read stand in for the cost there.

PostgreSQL plans these ``EXPLAIN`` statements with JIT compilation off (``without_jit``). A plan
whose cost passes ``jit_above_cost`` (100,000 by default: any estimate of a few hundred
thousand rows) is compiled when the executor starts, which ``EXPLAIN`` does without running
anything; on the partitioned table that is one compiled scan per partition, 10 ms or more of
the 12 ms such an estimate took at ten million jobs, for a plan that is never run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django.db import connections, transaction
from django.db.models import Model, QuerySet

if TYPE_CHECKING:
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLWrapper

# Rows counted exactly before the estimate is taken instead.
COUNT_CAP = 10_000
# Of several counts taken at once (``capped_counts``), one the planner expects this many rows of
# or more is not counted at all: ten times the cap, so statistics off by a factor of ten still
# leave it above the cap, where the figure would be the estimate anyway.
ESTIMATE_FROM = 100_000


@dataclass(frozen=True)
class Estimate:
    rows: int  # rows the query is expected to return
    cost: float = 0.0  # PostgreSQL's cost of returning them
    read: int = 0  # rows MariaDB's plan reads to return them

    def too_large(self, below_rows: int, below_cost: float) -> bool:
        """Whether an exact count would read too much, so the estimate is shown instead."""
        return self.rows >= below_rows or self.read >= below_rows or self.cost >= below_cost


@dataclass(frozen=True)
class Count:
    rows: int
    estimated: bool  # the planner's figure, shown as "about"


@contextmanager
def without_jit(using: str) -> Iterator[None]:
    """PostgreSQL's JIT compilation off for the statements inside; nothing on other databases.

    ``SET LOCAL``, in a transaction: the caller's, where the setting is put back as it was
    after the statements inside (a failed one leaves that to the transaction's rollback), or
    one of its own, which its commit ends. A session ``SET`` would outlive the statements on a
    pooled server connection (PgBouncer's transaction pooling hands each statement outside a
    transaction to any server connection)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        yield
        return
    joined = connection.in_atomic_block
    with transaction.atomic(using=using, savepoint=False):
        with connection.cursor() as cursor:
            if joined:  # put back after; a transaction of its own ends with the setting
                cursor.execute("SHOW jit")
                previous = cursor.fetchone()[0]
            cursor.execute("SET LOCAL jit = off")
        yield
        if joined:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('jit', %s, true)", [previous])


def postgres_plan(queryset: QuerySet[Model, Any]) -> dict[str, Any]:
    """PostgreSQL's plan of ``queryset`` (``EXPLAIN (FORMAT JSON)``, not run), its top node."""
    import json

    with without_jit(queryset.db):
        return cast("dict[str, Any]", json.loads(queryset.explain(format="json"))[0]["Plan"])


def planner_estimate(queryset: QuerySet[Model]) -> Estimate | None:
    """What the planner expects of ``queryset``, or None where there is no planner estimate."""
    vendor = connections[queryset.db].vendor
    if vendor == "postgresql":
        plan = postgres_plan(queryset.order_by())
        return Estimate(rows=int(plan["Plan Rows"]), cost=float(plan["Total Cost"]))
    if vendor == "mysql":
        return mariadb_estimate(queryset)
    return None


def mariadb_estimate(queryset: QuerySet[Model]) -> Estimate:
    """MariaDB's estimate: per table of the plan, rows read and the share expected to match."""
    return _mariadb_estimates(queryset.order_by())[0]


def _mariadb_estimates(queryset: QuerySet[Model, Any]) -> list[Estimate]:
    """MariaDB's estimate of each SELECT of ``queryset`` (one, or the branches of a UNION), in
    the order of the plan's select ids."""
    connection = cast("MySQLWrapper", connections[queryset.db])  # vendor is mysql here
    sql, params = queryset.query.sql_with_params()
    # MariaDB gives ``filtered`` with EXTENDED (MySQL 8 always, and has no EXTENDED). Tabular
    # output, as MariaDB's JSON plan quotes conditions it copies from the query unescaped.
    extended = " EXTENDED" if connection.mysql_is_mariadb else ""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN{extended} {sql}", params)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    selects: dict[object, list[dict]] = {}
    for row in rows:
        if row.get("id") is not None:  # not the UNION's own result
            selects.setdefault(row["id"], []).append(row)
    return [_mariadb_select(tables) for tables in selects.values()]


def _mariadb_select(tables: list[dict]) -> Estimate:
    read, expected = 0, 1.0
    for table in tables:
        if table.get("rows") is None:  # no table read: "Impossible WHERE" and the like
            expected = 0.0
            continue
        rows = int(str(table["rows"]).split()[0])  # "12 (5%)" with a rowid filter
        read += rows
        expected *= rows * float(table.get("filtered") or 100) / 100
    return Estimate(rows=round(expected), read=read)


def capped_count(queryset: QuerySet[Model], cap: int = COUNT_CAP) -> Count:
    """The rows of ``queryset``: exact up to ``cap``; above it the planner's estimate (never
    less than ``cap + 1``, which are known to be there), or on SQLite the exact count."""
    counted = queryset.order_by()[: cap + 1].count()
    if counted <= cap:
        return Count(counted, estimated=False)
    estimate = planner_estimate(queryset)
    if estimate is None:
        return Count(queryset.order_by().count(), estimated=False)
    return Count(max(estimate.rows, cap + 1), estimated=True)


def planner_estimates(querysets: Sequence[QuerySet[Model]]) -> list[Estimate | None]:
    """``planner_estimate`` of each of ``querysets`` (all on one database) from one plan: that
    of their ``UNION ALL``, whose branches the planner estimates as it would each alone."""
    if len(querysets) < 2 or connections[querysets[0].db].vendor not in ("postgresql", "mysql"):
        return [planner_estimate(queryset) for queryset in querysets]
    first, *others = [queryset.order_by().values("pk") for queryset in querysets]
    union = first.union(*others, all=True)
    if connections[first.db].vendor == "mysql":
        found: list[Estimate | None] = list(_mariadb_estimates(union))
    else:
        plan = postgres_plan(union)
        found = [Estimate(rows=int(branch["Plan Rows"]), cost=float(branch["Total Cost"]))
                 for branch in plan.get("Plans", ())]  # the Append's, in the branches' order
    if len(found) != len(querysets):  # a plan of another shape: one plan each
        return [planner_estimate(queryset) for queryset in querysets]
    return found


def capped_counts(querysets: Mapping[str, QuerySet[Model]], cap: int = COUNT_CAP,
                  estimate_from: int = ESTIMATE_FROM) -> dict[str, Count]:
    """``capped_count`` of each of ``querysets`` (all on one database), with one plan for all of
    them: one the planner expects ``estimate_from`` rows of or more is given as the estimate
    and not counted; the others are counted up to ``cap``, as ``capped_count`` does."""
    estimates = planner_estimates(list(querysets.values()))
    counts: dict[str, Count] = {}
    for (name, queryset), estimate in zip(querysets.items(), estimates, strict=True):
        if estimate is not None and estimate.rows >= max(estimate_from, cap + 1):
            counts[name] = Count(estimate.rows, estimated=True)
            continue
        counted = queryset.order_by()[: cap + 1].count()
        if counted <= cap:
            counts[name] = Count(counted, estimated=False)
        elif estimate is None:
            counts[name] = Count(queryset.order_by().count(), estimated=False)
        else:
            counts[name] = Count(max(estimate.rows, cap + 1), estimated=True)
    return counts
