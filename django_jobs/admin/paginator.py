"""A paginator that never counts a huge table exactly.

``COUNT(*)`` reads every matching row: on PostgreSQL, a full scan of a million-row jobs table on
every page view. So first ask the planner (``EXPLAIN``, which reads ``pg_class.reltuples`` and
the column statistics, not the table) how many rows it expects and what reading them would cost.
Only when both are small is the exact count taken, and then it is cheap: the dead jobs through
the status index, a single job found by its id. Otherwise the page shows the planner's estimate
and says so. Other databases have no such estimate and count exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet

# Count exactly below this many expected rows...
EXACT_BELOW_ROWS = 20_000
# ...if the planner also expects reading them to cost less than this (in its cost units: a
# sequential page read is 1.0; a seq scan of a 1M-row jobs table is around 50,000).
EXACT_BELOW_COST = 10_000.0


@dataclass(frozen=True)
class Estimate:
    rows: int
    cost: float


def planner_estimate(queryset: QuerySet[Any]) -> Estimate | None:
    """What PostgreSQL's planner expects of ``queryset``, or None on other databases."""
    if connections[queryset.db].vendor != "postgresql":
        return None
    plan = json.loads(queryset.order_by().explain(format="json"))[0]["Plan"]
    return Estimate(rows=int(plan["Plan Rows"]), cost=float(plan["Total Cost"]))


class EstimatedCountPaginator(Paginator):
    """Exact counts when they are cheap, the planner's estimate when they are not."""

    exact_below_rows = EXACT_BELOW_ROWS
    exact_below_cost = EXACT_BELOW_COST
    count_is_estimate = False

    @cached_property
    def count(self) -> int:
        queryset = cast("QuerySet[Any]", self.object_list)  # the admin pages querysets
        estimate = planner_estimate(queryset)
        if estimate is not None and (
            estimate.rows >= self.exact_below_rows or estimate.cost >= self.exact_below_cost
        ):
            self.count_is_estimate = True
            return estimate.rows
        return queryset.count()
