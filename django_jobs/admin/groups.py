"""Admin for groups of jobs: each group's progress from the counts kept on its row (no read
of the jobs table for the list), its jobs on its page, and its callback job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from django_jobs.admin import job_graph
from django_jobs.admin.display import job_link, when_column
from django_jobs.admin.requests import StockAnswers
from django_jobs.models import Job, JobGroup, JobGroupMember

if TYPE_CHECKING:
    from django.http import HttpRequest

JOBS_SHOWN = 50  # jobs a group's page names, in the order they were enqueued


def group_link(group_id: int) -> str:
    """The group's page (for the job page's "group" field)."""
    group = JobGroup.objects.filter(pk=group_id).only("public_id", "name").first()
    if group is None:
        return "a deleted group"
    try:
        url = reverse("admin:django_jobs_jobgroup_change", args=[group_id])
    except NoReverseMatch:
        return str(group)
    return format_html('<a href="{}">{}</a> {}', url, group.public_id, group.name)


@admin.register(JobGroup)
class JobGroupAdmin(StockAnswers, admin.ModelAdmin):
    # What fits 1280 px beside the sidebar (progress says ended of total); the group's page
    # has every count and its callback.
    list_display = ("public_id", "name", "progress", "dead", "canceled", "remaining", "created",
                    "finished", "error_message")
    search_fields = ("=public_id", "name")
    ordering = ("-created_at",)
    readonly_fields = ("public_id", "name", "progress", "total", "completed", "dead",
                       "canceled", "remaining", "created", "finished", "callback_type",
                       "callback_payload", "callback_options", "callback", "error_message",
                       "jobs", "graph")
    fields = readonly_fields
    created = staticmethod(when_column("created_at", "created"))
    finished = staticmethod(when_column("finished_at", "finished"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: JobGroup | None = None) -> bool:
        return False

    @admin.display(description="progress")
    def progress(self, group: JobGroup) -> str:
        """Ended of total, as a bar: from the group's counters."""
        if not group.total:
            return "-"
        percent = round(100 * group.ended / group.total)
        return format_html('<progress max="{}" value="{}"></progress> {} of {} ({}%)',
                           group.total, group.ended, group.ended, group.total, percent)

    @admin.display(description="remaining")
    def remaining(self, group: JobGroup) -> int:
        return group.remaining

    @admin.display(description="callback job")
    def callback(self, group: JobGroup) -> str:
        if group.callback_job_id is None:
            return f"{group.callback_type}, once all have ended"
        return job_link(group.callback_job_id, f"{group.callback_type} (enqueued)")

    @admin.display(description="error")
    def error_message(self, group: JobGroup) -> str:
        """Why a write of the group's after one of its jobs ended was not made (its callback)."""
        error = group.error if isinstance(group.error, dict) else {}
        return str(error.get("message") or "-")

    @admin.display(description="jobs")
    def jobs(self, group: JobGroup) -> str:
        """The first jobs of the group with their status, read by id through its members."""
        ids = list(JobGroupMember.objects.filter(group=group).order_by("job_id")
                   .values_list("job_id", flat=True)[:JOBS_SHOWN + 1])
        found = {pk: (public_id, status) for pk, public_id, status in
                 Job.objects.filter(pk__in=ids[:JOBS_SHOWN])
                 .values_list("pk", "public_id", "status")}
        items = [
            format_html("{} ({})", job_link(pk, found[pk][0]),
                        Job.Status(found[pk][1]).label)
            if pk in found else format_html("a deleted job ({})", pk)
            for pk in ids[:JOBS_SHOWN]
        ]
        if len(ids) > JOBS_SHOWN:
            items.append(format_html("and {} more", group.total - JOBS_SHOWN))
        return format_html_join(mark_safe(", "), "{}", ((item,) for item in items)) or "-"

    @admin.display(description="graph")
    def graph(self, group: JobGroup) -> str:
        """The group's jobs and its callback as a graph of their states."""
        picture = job_graph.group_jobs(group)
        return "-" if picture is None else picture.svg()
