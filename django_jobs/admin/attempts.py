"""Every attempt of a job, read-only, inline on the job page."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from django_jobs.admin import display
from django_jobs.models import JobAttempt

# Every column of the inline, each read-only.
ATTEMPT_COLUMNS = (
    "number", "worker_id", "started", "finished", "took", "outcome_badge",
    "error_cell", "cpu", "memory",
)


class AttemptInline(admin.TabularInline):
    model = JobAttempt
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = "attempts"
    fields = ATTEMPT_COLUMNS
    readonly_fields = ATTEMPT_COLUMNS
    ordering = ["started_at", "id"]

    class Media:
        js = ["django_jobs/attempts.js"]

    # Seeing a job means seeing its attempts: no separate JobAttempt permission is asked for.
    def get_queryset(self, request):
        # Each row shows the attempt's str(), which names its job: fetch the job once per
        # row in the same query, without its payload and result.
        return super().get_queryset(request).select_related("job").defer(
            "job__payload", "job__result", "job__error", "job__progress"
        )

    def has_view_permission(self, request, obj=None):
        user = request.user
        return user.has_perm("django_jobs.view_job") or user.has_perm("django_jobs.change_job")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="handler started")
    def started(self, attempt: JobAttempt) -> str:
        return display.when(attempt.started_at, precise=True)

    @admin.display(description="handler ended")
    def finished(self, attempt: JobAttempt) -> str:
        return display.when(attempt.finished_at, precise=True)

    @admin.display(description="handler ran")
    def took(self, attempt: JobAttempt) -> str:
        return display.duration(attempt.duration)

    @admin.display(description="outcome")
    def outcome_badge(self, attempt: JobAttempt):
        return display.status_badge(attempt.outcome, attempt.get_outcome_display())

    @admin.display(description="error")
    def error_cell(self, attempt: JobAttempt):
        if not attempt.error:
            return display.EMPTY
        tb = attempt.error.get("traceback") if isinstance(attempt.error, dict) else ""
        if not tb:
            return display.error_summary(attempt.error)
        return format_html(
            '<details><summary>{}</summary><pre class="dj-jobs-traceback">{}</pre></details>',
            display.error_summary(attempt.error), tb,
        )

    @admin.display(description="CPU time")
    def cpu(self, attempt: JobAttempt) -> str:
        return display.EMPTY if attempt.cpu_time is None else f"{attempt.cpu_time:.3f} s"

    @admin.display(description="peak memory")
    def memory(self, attempt: JobAttempt) -> str:
        return display.size(attempt.peak_memory)
