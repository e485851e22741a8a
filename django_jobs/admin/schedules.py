"""Admin for recurring schedules: when each runs, its last and next run, pause, run now.

Schedules are declared in settings (``SCHEDULES``) or on their handler (``@periodic``), shown
here read-only beside their state, which this page acts on. Rows appear for every declared
schedule; the actions need the ``run_schedule`` permission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.core.exceptions import ImproperlyConfigured
from django.utils.html import format_html, format_html_join

from django_jobs.admin.display import (
    duration_words,
    job_link,
    status_badge,
    when,
    when_column,
)
from django_jobs.admin.requests import StockAnswers
from django_jobs.core import clock
from django_jobs.features.schedules.config import ScheduleSpec, schedules
from django_jobs.features.schedules.ticker import run_now, set_paused
from django_jobs.models.schedules import Schedule

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import HttpRequest, HttpResponse



def _specs() -> dict[str, ScheduleSpec]:
    try:
        return schedules()
    except ImproperlyConfigured:
        return {}


@admin.register(Schedule)
class ScheduleAdmin(StockAnswers, admin.ModelAdmin):
    # What fits 1280 px beside the filter and the sidebar; the rest is on each schedule's page.
    list_display = ("name", "job_type", "when", "state", "next_run", "last_run",
                    "last_job_link")
    # No filter column: a site has a handful of schedules, and the paused ones say so.
    search_fields = ("name",)
    readonly_fields = ("name", "job_type", "when", "misfire", "state", "declared_in",
                       "last_occurrence_shown", "last_run", "next_run", "last_job_link",
                       "recent_occurrences")
    fields = readonly_fields
    last_run = staticmethod(when_column("last_run_at", "last run"))
    next_run = staticmethod(when_column("next_run_at", "next run"))
    last_occurrence_shown = staticmethod(when_column("last_occurrence", "last occurrence"))
    actions = ("pause", "resume", "run_now_action")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, object] | None = None
                        ) -> HttpResponse:
        specs = _specs()
        now = clock.now(Schedule.objects.db)
        Schedule.objects.bulk_create(
            [Schedule(name=name, next_run_at=spec.next_after(now), created_at=now,
                      updated_at=now) for name, spec in specs.items()],
            ignore_conflicts=True,
        )
        return super().changelist_view(request, extra_context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return False

    def has_run_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_jobs.run_schedule")

    # Columns.

    @admin.display(description="type")
    def job_type(self, obj: Schedule) -> str:
        spec = _specs().get(obj.name)
        return spec.type if spec else "-"

    @admin.display(description="runs")
    def when(self, obj: Schedule) -> str:
        spec = _specs().get(obj.name)
        if spec is None:
            return "-"
        if spec.every is not None:
            return f"every {duration_words(spec.every)}"
        return f"{spec.cron} ({spec.timezone})"

    @admin.display(description="after downtime")
    def misfire(self, obj: Schedule) -> str:
        spec = _specs().get(obj.name)
        return spec.misfire if spec else "-"

    @admin.display(description="state", ordering="paused")
    def state(self, obj: Schedule) -> str:
        """"paused" as a pill (a paused schedule enqueues nothing), "active" otherwise, and
        "no longer declared" for a schedule neither the settings nor a handler declare now."""
        if obj.name not in _specs():
            return "no longer declared"
        if obj.paused:
            return status_badge("paused", "paused")
        return "active"

    @admin.display(description="declared in")
    def declared_in(self, obj: Schedule) -> str:
        """settings or @periodic; "-" for a schedule no longer declared (its history kept)."""
        spec = _specs().get(obj.name)
        return spec.declared_in if spec else "- (no longer declared)"

    @admin.display(description="last job")
    def last_job_link(self, obj: Schedule) -> str:
        return job_link(obj.last_job_id, f"job {obj.last_job_id}")

    @admin.display(description="recent occurrences")
    def recent_occurrences(self, obj: Schedule) -> str:
        rows = obj.occurrences.order_by("-at")[:20]
        return format_html("<ul>{}</ul>", format_html_join(
            "", "<li>{} {} {}</li>",
            ((when(o.at), "(run now)" if o.manual else "", job_link(o.job_id, "job"))
             for o in rows),
        ))

    # Actions.

    @admin.action(description="Pause selected schedules", permissions=["run"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        count = set_paused(list(queryset.values_list("name", flat=True)), True)
        self.message_user(request, f"{count} schedule(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume selected schedules (skipping what fell due meanwhile)",
                  permissions=["run"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        count = set_paused(list(queryset.values_list("name", flat=True)), False)
        self.message_user(request, f"{count} schedule(s) resumed.", messages.SUCCESS)

    @admin.action(description="Run selected schedules now", permissions=["run"])
    def run_now_action(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        specs = _specs()
        names = [n for n in queryset.values_list("name", flat=True) if n in specs]
        skipped = queryset.count() - len(names)
        for name in names:
            job = run_now(name)
            if job is not None:
                self.message_user(request, f"{name}: enqueued {job.public_id}.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} schedule(s) are no longer declared.",
                              messages.WARNING)
