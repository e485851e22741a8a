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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from django.db import connections
from django.db.models import Model, QuerySet

if TYPE_CHECKING:
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLWrapper

# Rows counted exactly before the estimate is taken instead.
COUNT_CAP = 10_000


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


def planner_estimate(queryset: QuerySet[Model]) -> Estimate | None:
    """What the planner expects of ``queryset``, or None where there is no planner estimate."""
    vendor = connections[queryset.db].vendor
    if vendor == "postgresql":
        import json

        plan = json.loads(queryset.order_by().explain(format="json"))[0]["Plan"]
        return Estimate(rows=int(plan["Plan Rows"]), cost=float(plan["Total Cost"]))
    if vendor == "mysql":
        return mariadb_estimate(queryset)
    return None


def mariadb_estimate(queryset: QuerySet[Model]) -> Estimate:
    """MariaDB's estimate: per table of the plan, rows read and the share expected to match."""
    connection = cast("MySQLWrapper", connections[queryset.db])  # vendor is mysql here
    sql, params = queryset.order_by().query.sql_with_params()
    # MariaDB gives ``filtered`` with EXTENDED (MySQL 8 always, and has no EXTENDED). Tabular
    # output, as MariaDB's JSON plan quotes conditions it copies from the query unescaped.
    extended = " EXTENDED" if connection.mysql_is_mariadb else ""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN{extended} {sql}", params)
        names = [column[0] for column in cursor.description]
        tables = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
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
