"""A paginator that never counts a huge table exactly.

``COUNT(*)`` reads every matching row: on PostgreSQL that is a full scan of a million-row jobs
table on every page view. Instead, ask the planner how many rows it expects (``EXPLAIN``, which
reads ``pg_class.reltuples`` and the column statistics, not the table). Only when the planner
expects fewer than ``exact_below`` rows is the exact count worth taking, and then it is cheap.
Other databases have no such estimate and count exactly.
"""

from __future__ import annotations

import json
from functools import cached_property

from django.core.paginator import Paginator
from django.db import connections

EXACT_BELOW = 20_000


def planner_estimate(queryset) -> int | None:  # type: ignore[no-untyped-def]
    """The rows PostgreSQL's planner expects ``queryset`` to return, or None elsewhere."""
    if connections[queryset.db].vendor != "postgresql":
        return None
    plan = json.loads(queryset.order_by().explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


class EstimatedCountPaginator(Paginator):
    """Exact counts for small results, the planner's estimate for large ones."""

    exact_below = EXACT_BELOW

    @cached_property
    def count(self) -> int:
        estimate = planner_estimate(self.object_list)
        if estimate is not None and estimate >= self.exact_below:
            self.count_is_estimate = True
            return estimate
        self.count_is_estimate = False
        return self.object_list.count()

    count_is_estimate = False
