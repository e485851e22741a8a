"""A date drill-down for the job list that never scans the table.

Django's ``{% date_hierarchy %}`` lists the years, months or days that hold rows with
``SELECT DISTINCT date_trunc(...)``: a full scan of a million-row jobs table on every page view.
This one asks only for the first and last ``created_at`` (``date_span``) and offers every period
between them; a period without jobs shows an empty list.
"""

from __future__ import annotations

import calendar
import datetime
from typing import Any

import django
from django import template
from django.db.models import Max, Min
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.text import capfirst

register = template.Library()


@register.filter
def since(value: datetime.datetime | None) -> str:
    """How long ago, as ``850 ms``, ``12.3 s``, ``4 min 05 s`` or ``2 h 03 min``."""
    from django_jobs.admin.display import age

    return age(value)


@register.filter
def when(value: datetime.datetime | None) -> str:
    """``2026-11-30 09:41:07 UTC``: the admin's one date format (``display.when``)."""
    from django_jobs.admin.display import when as shown

    return shown(value)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@register.inclusion_tag("admin/date_hierarchy.html")
def jobs_date_hierarchy(cl: Any) -> dict[str, Any]:
    drill = _DateDrill(cl)
    chosen = drill.chosen_day()
    if chosen is not None:
        return drill.one_day(chosen)
    span = date_span(cl)
    if not span["first"]:  # nothing in this period: offer the way back only
        return drill.back_only() if drill.year else {"show": False}
    first, last = _local(span["first"]), _local(span["last"])
    if not drill.year and first.year != last.year:
        return drill.years(first.year, last.year)
    year, month = drill.period(first, last)
    return drill.days(year, month, first, last) if month else drill.months(year, first, last)


def _local(value: datetime.datetime) -> datetime.datetime:
    """``value`` in the zone the year/month/day lookups filter in: the current one with
    USE_TZ, the value as stored (in TIME_ZONE) without."""
    return timezone.localtime(value) if timezone.is_aware(value) else value


class _DateDrill:
    """The drill-down of one change list: the period it shows (the year, month and day in its
    query string) and the choices each level offers."""

    def __init__(self, cl: Any) -> None:
        self.cl = cl
        self.name = cl.date_hierarchy
        self.fields = {part: f"{self.name}__{part}" for part in ("year", "month", "day")}
        self.year, self.month, self.day = (_int(cl.params.get(self.fields[p]))
                                           for p in ("year", "month", "day"))
        verbose = cl.model._meta.get_field(self.name).verbose_name
        self.base = {"show": True, "field_name": verbose}

    def chosen_day(self) -> datetime.date | None:
        if self.year and self.month and self.day:
            return datetime.date(self.year, self.month, self.day)
        return None

    def period(self, first: datetime.date, last: datetime.date) -> tuple[int, int | None]:
        """The year and month whose days or months to offer: those chosen, else the span's
        own where the first and the last job share it."""
        year = self.year or first.year
        month = self.month or (first.month if first.month == last.month else None)
        return year, month

    def link(self, *period: int) -> str:
        """The list's query string for the period (year, then month, then day)."""
        filters = dict(zip((self.fields[p] for p in ("year", "month", "day")), period,
                           strict=False))
        return self.cl.get_query_string(filters, [f"{self.name}__"])

    def one_day(self, chosen: datetime.date) -> dict[str, Any]:
        return {**self.base,
                "back": {"link": self.link(chosen.year, chosen.month),
                         "title": _formatted(chosen, "YEAR_MONTH_FORMAT")},
                "choices": [{"title": _formatted(chosen, "MONTH_DAY_FORMAT")}]}

    def back_only(self) -> dict[str, Any]:
        return {**self.base, "back": {"link": self.link(), "title": "All dates"}, "choices": []}

    def years(self, first: int, last: int) -> dict[str, Any]:
        return {**self.base, "choices": [{"link": self.link(y), "title": str(y)}
                                         for y in range(first, last + 1)]}

    def months(self, year: int, first: datetime.date, last: datetime.date) -> dict[str, Any]:
        """The months of ``year`` between the first and the last job."""
        months = range(first.month if first.year == year else 1,
                       (last.month if last.year == year else 12) + 1)
        return {**self.base,
                "back": {"link": self.link(), "title": "All dates"},
                "choices": [{"link": self.link(year, m),
                             "title": _formatted(datetime.date(year, m, 1), "YEAR_MONTH_FORMAT")}
                            for m in months]}

    def days(self, year: int, month: int, first: datetime.date,
             last: datetime.date) -> dict[str, Any]:
        """The days of the month: between the first and the last job if both are in it."""
        if (first.year, first.month) == (last.year, last.month):
            days = range(first.day, last.day + 1)
        else:
            days = range(1, calendar.monthrange(year, month)[1] + 1)
        return {**self.base,
                "back": {"link": self.link(year), "title": str(year)},
                "choices": [{"link": self.link(year, month, d),
                             "title": _formatted(datetime.date(year, month, d),
                                                 "MONTH_DAY_FORMAT")}
                            for d in days]}


def _formatted(date: datetime.date, format_name: str) -> str:
    return capfirst(formats.date_format(date, format_name))


def date_span(cl: Any) -> dict[str, Any]:
    """The first and last value of the drill-down's field, of the filtered list when that is
    cheap, else of the whole table.

    ``MIN``/``MAX`` of the filtered list reads the ends of an index only when the filter is on
    that index (a status, a date range); a filter no index serves (a type, a queue, a search)
    makes them read every matching row, a second or more at a million rows. The paginator has
    already asked the planner: when it counted exactly, the list is small and its ends are
    cheap; when it showed an estimate, the span of the whole table is taken (the ends of the
    ``created_at`` index), and the drill-down may offer periods that hold no job of the filter.
    A list read among the newest jobs (a search, a rare type or queue) spans that window, from
    its start to the newest job: its own ends would be read from every row of the window.
    """
    name = cl.date_hierarchy
    start = getattr(cl, "window_start", None)
    if start is not None:
        return {"first": start,
                "last": cl.root_queryset.order_by().aggregate(last=Max(name))["last"]}
    rows = cl.root_queryset if getattr(cl.paginator, "count_is_estimate", False) else cl.queryset
    return rows.order_by().aggregate(first=Min(name), last=Max(name))


# The stock admin's breadcrumbs markup: an <ol> of <li> from Django 6.1 (styled as
# ``ol.breadcrumbs``), a <div> with &rsaquo; separators before (styled as ``div.breadcrumbs``).
BREADCRUMBS_TEMPLATE = (
    "django_jobs/admin/breadcrumbs_ol.html" if django.VERSION >= (6, 1)
    else "django_jobs/admin/breadcrumbs_div.html"
)


@register.inclusion_tag(BREADCRUMBS_TEMPLATE)
def jobs_breadcrumbs(opts: Any, current: str, obj: Any = None) -> dict[str, Any]:
    """Home, the app, the model's list, the object if given, then ``current``: the trail the
    stock change form shows, in the markup of the running Django."""
    crumbs = [
        (opts.app_config.verbose_name,
         reverse("admin:app_list", kwargs={"app_label": opts.app_label})),
        (capfirst(opts.verbose_name_plural),
         reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")),
    ]
    if obj is not None:
        crumbs.append((getattr(obj, "public_id", str(obj)),
                       reverse(f"admin:{opts.app_label}_{opts.model_name}_change",
                               args=[obj.pk])))
    return {"crumbs": crumbs, "current": current}
