"""A paginator that never counts a huge table exactly.

``COUNT(*)`` reads every matching row: a full scan of a million-row jobs table on every page
view. So first ask the database's planner (``EXPLAIN``, which reads table and index statistics,
not the table) how many rows it expects and how much reading them would take. Only when both
are small is the exact count taken, and then it is cheap: the dead jobs through the status
index, a single job found by its id. Otherwise the page shows the planner's estimate and says
so. SQLite has no such estimate and counts exactly.

PostgreSQL's plan gives rows and a cost. MariaDB's (``EXPLAIN EXTENDED``) gives, per table,
the rows its plan reads and the percentage of them it expects to pass the conditions: the rows
read stand in for the cost there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, cast

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Model, QuerySet

if TYPE_CHECKING:
    from django.db.backends.mysql.base import DatabaseWrapper as MySQLWrapper

# Count exactly below this many expected rows (or, on MariaDB, rows read)...
EXACT_BELOW_ROWS = 20_000
# ...if PostgreSQL's planner also expects reading them to cost less than this (in its cost
# units: a sequential page read is 1.0; a seq scan of a 1M-row jobs table is around 50,000).
EXACT_BELOW_COST = 10_000.0


@dataclass(frozen=True)
class Estimate:
    rows: int  # rows the query is expected to return
    cost: float = 0.0  # PostgreSQL's cost of returning them
    read: int = 0  # rows MariaDB's plan reads to return them

    def too_large(self, below_rows: int = EXACT_BELOW_ROWS,
                  below_cost: float = EXACT_BELOW_COST) -> bool:
        """Whether an exact count would read too much, so the estimate is shown instead."""
        return self.rows >= below_rows or self.read >= below_rows or self.cost >= below_cost


def planner_estimate(queryset: QuerySet[Model]) -> Estimate | None:
    """What the planner expects of ``queryset``, or None where there is no planner estimate."""
    vendor = connections[queryset.db].vendor
    if vendor == "postgresql":
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


class EstimatedCountPaginator(Paginator):
    """Exact counts when they are cheap, the planner's estimate when they are not."""

    exact_below_rows = EXACT_BELOW_ROWS
    exact_below_cost = EXACT_BELOW_COST
    count_is_estimate = False

    @cached_property
    def count(self) -> int:
        queryset = cast("QuerySet[Model]", self.object_list)  # the admin pages querysets
        estimate = planner_estimate(queryset)
        if estimate is not None and estimate.too_large(self.exact_below_rows,
                                                       self.exact_below_cost):
            self.count_is_estimate = True
            return estimate.rows
        return queryset.count()
