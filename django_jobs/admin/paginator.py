"""A paginator that never counts a huge table exactly.

``COUNT(*)`` reads every matching row: a full scan of a million-row jobs table on every page
view. So first ask the database's planner (``EXPLAIN``, which reads table and index statistics,
not the table) how many rows it expects and how much reading them would take. Only when both
are small is the exact count taken, and then it is cheap: the dead jobs through the status
index, a single job found by its id. Otherwise the page shows the planner's estimate and says
so. SQLite has no such estimate and counts exactly.

Page numbers reach the newest ``deepest_rows`` jobs of the list only. A page further down is
read by skipping every row before it (``OFFSET``), which costs as many rows as it skips:
at ten million jobs the last page read them all, for seconds. So the pages stop there (the
last page link leads to the last page that is quick to read, a higher number serves it), and
that page links to the jobs older than its last one (``older_query``), a page that starts at
that time through the ``created_at`` index, as quick as the first.

PostgreSQL's plan gives rows and a cost. MariaDB's (``EXPLAIN EXTENDED``) gives, per table,
the rows its plan reads and the percentage of them it expects to pass the conditions: the rows
read stand in for the cost there.
"""

from __future__ import annotations

from functools import cached_property
from typing import cast

from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet

from django_jobs.admin.first_page import first_page
from django_jobs.models.counts import Estimate, mariadb_estimate, planner_estimate
from django_jobs.models.newest import NEWEST_WINDOW

__all__ = ["DEEPEST_ROWS", "EXACT_BELOW_COST", "EXACT_BELOW_ROWS", "Estimate",
           "EstimatedCountPaginator",
           "mariadb_estimate", "planner_estimate"]

# Count exactly below this many expected rows (or, on MariaDB, rows read)...
EXACT_BELOW_ROWS = 20_000
# ...if PostgreSQL's planner also expects reading them to cost less than this (in its cost
# units: a sequential page read is 1.0; a seq scan of a 1M-row jobs table is around 50,000).
EXACT_BELOW_COST = 10_000.0
# The newest rows of a list its page numbers reach (200 pages of 50).
DEEPEST_ROWS = 10_000


class EstimatedCountPaginator(Paginator):
    """Exact counts when they are cheap, the planner's estimate when they are not."""

    exact_below_rows = EXACT_BELOW_ROWS
    exact_below_cost = EXACT_BELOW_COST
    first_page_window = NEWEST_WINDOW
    deepest_rows = DEEPEST_ROWS
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

    @cached_property
    def num_pages(self) -> int:
        return min(super().num_pages, self.reachable_pages)

    @property
    def reachable_pages(self) -> int:
        """The page numbers that are quick to read: the newest ``deepest_rows`` rows."""
        return max(1, -(-self.deepest_rows // self.per_page))

    @property
    def pages_stop(self) -> bool:
        """Whether the list holds more rows than its page numbers reach."""
        return self.count > self.reachable_pages * self.per_page + self.orphans

    def validate_number(self, number: int | float | str) -> int:
        """As Django's; a number past the reachable pages of a longer list is its last one."""
        try:
            wanted = int(number)
        except (TypeError, ValueError):
            return super().validate_number(number)
        if wanted > self.num_pages and self.pages_stop:
            return self.num_pages
        return super().validate_number(number)

    def page(self, number: int | str) -> Page:
        """The first of several pages read among the newest jobs where they fill it
        (``first_page``); any other page as Django reads it."""
        number = self.validate_number(number)
        if number == 1 and self.count > self.per_page + self.orphans:
            queryset = cast("QuerySet[Model]", self.object_list)
            found = first_page(queryset, self.per_page, self.first_page_window)
            if found is not None:
                return Page(found, number, self)
        return super().page(number)
