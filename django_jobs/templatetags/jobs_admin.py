"""A date drill-down for the job list that never scans the table.

Django's ``{% date_hierarchy %}`` lists the years, months or days that hold rows with
``SELECT DISTINCT date_trunc(...)``: a full scan of a million-row jobs table on every page view.
This one asks only for the first and last ``created_at`` (two index lookups) and offers every
period between them; a period without jobs simply shows an empty list.
"""

from __future__ import annotations

import calendar
import datetime
from typing import Any

from django import template
from django.db.models import Max, Min
from django.utils import formats, timezone
from django.utils.text import capfirst

register = template.Library()


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@register.inclusion_tag("admin/date_hierarchy.html")
def jobs_date_hierarchy(cl) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    name = cl.date_hierarchy
    fields = {part: f"{name}__{part}" for part in ("year", "month", "day")}
    year, month, day = (_int(cl.params.get(fields[p])) for p in ("year", "month", "day"))
    verbose = cl.model._meta.get_field(name).verbose_name

    def link(filters: dict[str, int]) -> str:
        return cl.get_query_string(filters, [f"{name}__"])

    base = {"show": True, "field_name": verbose}
    if year and month and day:
        chosen = datetime.date(year, month, day)
        return {**base,
                "back": {"link": link({fields["year"]: year, fields["month"]: month}),
                         "title": capfirst(formats.date_format(chosen, "YEAR_MONTH_FORMAT"))},
                "choices": [{"title": capfirst(formats.date_format(chosen, "MONTH_DAY_FORMAT"))}]}
    if not (year or month):
        span = cl.queryset.order_by().aggregate(first=Min(name), last=Max(name))
        if not span["first"]:
            return {"show": False}
        first, last = (timezone.localtime(span[k]) for k in ("first", "last"))
        if first.year != last.year:
            return {**base, "choices": [
                {"link": link({fields["year"]: y}), "title": str(y)}
                for y in range(first.year, last.year + 1)
            ]}
        year = first.year
        if first.month == last.month:
            month = first.month
    if year and month:
        days = calendar.monthrange(year, month)[1]
        return {**base,
                "back": {"link": link({fields["year"]: year}), "title": str(year)},
                "choices": [
                    {"link": link({fields["year"]: year, fields["month"]: month,
                                   fields["day"]: d}),
                     "title": capfirst(formats.date_format(datetime.date(year, month, d),
                                                           "MONTH_DAY_FORMAT"))}
                    for d in range(1, days + 1)
                ]}
    return {**base,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {"link": link({fields["year"]: year, fields["month"]: m}),
                 "title": capfirst(formats.date_format(datetime.date(year, m, 1),
                                                       "YEAR_MONTH_FORMAT"))}
                for m in range(1, 13)
            ]}
