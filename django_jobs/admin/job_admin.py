"""The job list and the read-only job page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import PAGE_VAR
from django.db.models import QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Substr
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from django_jobs.admin import actions, display, job_graph, search
from django_jobs.admin.attempts import AttemptInline
from django_jobs.admin.edit_payload import EditPayloadMixin
from django_jobs.admin.filters import (
    HasErrorFilter,
    PriorityFilter,
    QueueFilter,
    StatusFilter,
    TypeFilter,
)
from django_jobs.admin.first_page import newest_first
from django_jobs.admin.page_database import list_database
from django_jobs.admin.paginator import EstimatedCountPaginator
from django_jobs.admin.requests import StockAnswers
from django_jobs.admin.views import JobViewsMixin
from django_jobs.core.states import PROCESSING, READY_STATES, DependencyPolicy
from django_jobs.exceptions import JobConflict
from django_jobs.models import Job, JobDependency

OLDER_THAN = "created_at__lt"  # the created filter's upper bound (DateFieldListFilter)
HEAVY_FIELDS = ("payload", "result", "error")
ERROR_STATES = (Job.Status.FAILED, Job.Status.DEAD)
ERROR_LINE_CHARS = 300  # of the message, read for the list's error column
WAITS_ON_SHOWN = 20  # dependencies the job page names

# What the job's times are, beside its attempts' (which are each handler's own).
TIMES_NOTE = ("The job's times are the database's: its last claim by a worker and the writing "
              "of its outcome. Each attempt's, below, are its handler's own start and end on "
              "the worker's host: the difference is the hand-over to the handler and the write.")
# The job page's sections and their fields, every one read-only.
DETAIL_SECTIONS: list[tuple[str | None, tuple[str, ...]]] = [
    (None, (
        "public_id", "type", "status_badge", "queue", "priority_label", "attempts",
        "next_run", "progress_display", "worker_id", "callback_url", "waits_on",
        "if_a_dependency_fails", "group_display",
    )),
    ("Times", (
        "created_precise", "updated_precise", "run_at_precise", "started_precise",
        "finished_precise", "took", "leased_precise",
    )),
    ("Payload", ("payload_json",)),
    ("Result", ("result_json",)),
    ("Error", ("error_details",)),
    ("Workflow steps", ("workflow_steps",)),
]


def older_query(changelist: Any) -> str | None:
    """The query string of the jobs older than the last one of the list's last reachable
    page (``EstimatedCountPaginator.pages_stop``): the list's filters, and ``created_at``
    before that job's. None on any other page, or where the list is not newest first."""
    paginator, rows = changelist.paginator, changelist.result_list
    if not (getattr(paginator, "pages_stop", False) and rows
            and changelist.page_num >= paginator.num_pages
            and newest_first(changelist.queryset)):
        return None
    return changelist.get_query_string(
        {OLDER_THAN: rows[len(rows) - 1].created_at.isoformat()}, [PAGE_VAR, OLDER_THAN])


def lists_errors(request: HttpRequest) -> bool:
    """Whether the list asked for is of failed or dead jobs, or of jobs with an error: its
    rows then show their error."""
    return (request.GET.get("status__exact") in ERROR_STATES
            or request.GET.get("has_error") == "yes")


class JobAdmin(StockAnswers, EditPayloadMixin, JobViewsMixin, admin.ModelAdmin):
    list_display = [
        "public_id", "type", "status_badge", "queue", "priority_label", "attempts",
        "next_run", "created", "updated", "took",
    ]
    # The columns of a list of failed or dead jobs: the error after the status; no next run
    # for the dead.
    error_list_display = [
        "public_id", "type", "status_badge", "error_line", "queue", "attempts",
        "next_run", "created", "took",
    ]
    list_filter = [
        ("status", StatusFilter), TypeFilter, QueueFilter, PriorityFilter,
        ("created_at", admin.DateFieldListFilter), HasErrorFilter,
    ]
    search_fields = ["=public_id", "type", "error__message", "payload"]
    search_help_text = "A public id (j-...) finds that job; other words match the type, the " \
        "error message or the payload text of the newest jobs, or of the period chosen below."
    # Jobs a free-text search reads when no period is chosen (admin/search.py).
    search_window = search.SEARCH_WINDOW
    ordering = ["-created_at"]
    # Only orders an index can serve: any other order sorts the whole table for one page.
    sortable_by = ["created"]
    date_hierarchy = "created_at"
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    list_max_show_all = 500
    actions = [actions.retry_jobs, actions.cancel_jobs, actions.run_jobs_now,
               actions.delete_jobs]
    inlines = [AttemptInline]
    fieldsets = [
        (name, {"fields": names, "description": TIMES_NOTE} if name == "Times"
         else {"fields": names}) for name, names in DETAIL_SECTIONS
    ]
    readonly_fields = [*(name for _, names in DETAIL_SECTIONS for name in names), "related_jobs"]
    change_list_template = "django_jobs/admin/job_change_list.html"
    change_form_template = "django_jobs/admin/job_change_form.html"
    delete_confirmation_template = "django_jobs/admin/job_delete_confirmation.html"

    class Media:
        css = {"all": ["django_jobs/admin.css"]}

    # Reading.

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name == "django_jobs_job_changelist":
            # The list never shows them; a GET of it reads the replica, if the site has one.
            qs = qs.defer(*HEAVY_FIELDS).using(list_database(request))
            if lists_errors(request):  # the error's type and the start of its message only
                qs = qs.annotate(error_type=KT("error__type"), error_start=Substr(
                    KT("error__message"), 1, ERROR_LINE_CHARS))
        return qs

    def get_list_display(self, request: HttpRequest) -> Any:
        if not lists_errors(request):
            return self.list_display
        columns = list(self.error_list_display)
        if request.GET.get("status__exact") == Job.Status.DEAD:
            columns.remove("next_run")
        return columns

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The stock change list, with the start of the window its list was read in, if a
        search or a rare filter bounded it (``search.window_of``): the drill-down's span."""
        changelist = super().get_changelist_instance(request)
        changelist.window_start = search.window_of(request)  # type: ignore[attr-defined]
        changelist.older_query = older_query(changelist)  # type: ignore[attr-defined]
        return changelist

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if search.PUBLIC_ID_RE.fullmatch(term):
            return queryset.filter(public_id=term), False  # the unique index, no scan
        if not term:
            return queryset, False
        queryset, start = search.bounded(request, queryset, self.search_window)
        if start is not None:
            search.note_window(request, start)
            self.message_user(request, (
                f"Searched the newest {self.search_window:,} jobs, created since "
                f"{display.when(start)}. To search older jobs, choose a period "
                f"in the date drill-down above the list."), messages.INFO)
        return super().get_search_results(request, queryset, search_term)

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """The job page's sections: a failed or dead job's starts with its error (why is what
        triage reads first); a picture of its related jobs (its dependency chain or its
        group) follows the main section, for a job that has any; a workflow's steps only on a
        workflow's page."""
        from django_jobs.features.workflows.registry import is_workflow

        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is None or not is_workflow(obj.type):
            fieldsets = [(name, options) for name, options in fieldsets
                         if name != "Workflow steps"]
        if obj is not None and job_graph.related(obj) is not None:
            fieldsets = [*fieldsets[:1], ("Related jobs", {"fields": ("related_jobs",)}),
                         *fieldsets[1:]]
        if obj is None or obj.status not in ERROR_STATES or not obj.error:
            return fieldsets
        return ([entry for entry in fieldsets if entry[0] == "Error"]
                + [entry for entry in fieldsets if entry[0] != "Error"])

    @admin.display(description="graph")
    def related_jobs(self, job: Job):
        picture = job_graph.related(job)
        return display.EMPTY if picture is None else picture.svg()

    # Permissions: nobody edits a job by hand; each verb has its own permission.

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.status == Job.Status.PROCESSING:
            return False
        return super().has_delete_permission(request, obj)

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("django_jobs.retry_job")

    def has_cancel_permission(self, request) -> bool:
        return request.user.has_perm("django_jobs.cancel_job")

    def has_run_now_permission(self, request) -> bool:
        return request.user.has_perm("django_jobs.change_job")

    def get_actions(self, request, action_location=None):
        # ``action_location`` exists from Django 6.1 (actions on the change form); pass it on
        # only where it exists.
        extra = {} if action_location is None else {"action_location": action_location}
        found = super().get_actions(request, **extra)
        found.pop("delete_selected", None)  # ours counts instead of listing every row
        return found

    def delete_model(self, request, obj) -> None:
        """Delete the job unless a worker holds it or a waiting job depends on it; what
        happened is said by ``response_delete``."""
        try:
            actions.deletable(Job.objects.filter(pk=obj.pk)).discard()
        except JobConflict:
            request._django_jobs_kept = actions.CONFLICT
            return
        status = Job.objects.filter(pk=obj.pk).values_list("status", flat=True).first()
        if status is not None:  # a worker claimed it, or a dependent was enqueued, first
            reason = "held" if status != PROCESSING else PROCESSING
            request._django_jobs_kept = f"not deleted: {actions.SKIP_REASONS['delete'][reason]}"

    def response_delete(self, request, obj_display, obj_id):
        kept = getattr(request, "_django_jobs_kept", None)
        if kept is None:
            return super().response_delete(request, obj_display, obj_id)
        self.message_user(request, f"{obj_display}: {kept}", messages.WARNING)
        return HttpResponseRedirect(reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj_id],
            current_app=self.admin_site.name))

    def get_deleted_objects(self, objs, request):
        """As Django's, with the waiting jobs that depend on a job that has not completed as
        protected objects: the page then refuses the delete, as for ``on_delete=PROTECT``
        (deleted, the dependency would never complete, and they would wait for ever)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        jobs = Job.objects.filter(pk__in=[obj.pk for obj in objs])
        waiting = actions.waiting_dependents(jobs).order_by("pk")
        for job in waiting[:actions.WAITING_SHOWN]:
            url = reverse("admin:django_jobs_job_change", args=[job.pk],
                          current_app=self.admin_site.name)
            protected.append(format_html('Waiting job: <a href="{}">{}</a> {}', url,
                                         job.public_id, job.type))
        return deleted, counts, perms_needed, protected

    def delete_view(self, request, object_id, extra_context=None):
        # The confirmation page names the waiting jobs the deletion would leave waiting.
        job = self.get_object(request, unquote(object_id))
        if job is not None:
            extra_context = {**(extra_context or {}),
                             **actions.dependents_context(Job.objects.filter(pk=job.pk))}
        return super().delete_view(request, object_id, extra_context)

    # Columns.

    @admin.display(description="error")
    def error_line(self, job: Job) -> str:
        if hasattr(job, "error_type"):  # the list's annotations (get_queryset)
            return display.error_line(job.error_type, getattr(job, "error_start", None))
        error = job.error if isinstance(job.error, dict) else {}
        return display.error_line(error.get("type"), error.get("message"))

    @admin.display(description="status", ordering="status")
    def status_badge(self, job: Job):
        badge = display.status_badge(
            job.status, job.get_status_display(),
            cancel_requested=job.cancel_requested and job.status == Job.Status.PROCESSING,
        )
        if job.status == Job.Status.PROCESSING and job.progress:
            return format_html("{} {}", badge, display.progress(
                job.progress_fraction, job.progress_message))
        return badge

    @admin.display(description="progress")
    def progress_display(self, job: Job) -> str:
        return display.progress(job.progress_fraction, job.progress_message)

    @admin.display(description="priority")
    def priority_label(self, job: Job) -> str:
        from django_jobs.core.validation import priority_label

        return priority_label(job.priority)

    @admin.display(description="attempts")
    def attempts(self, job: Job) -> str:
        crashes = f", {job.crashes} crash(es) of its worker" if job.crashes else ""
        return f"{job.attempt} of {job.max_attempts}{crashes}"

    @admin.display(description="next run")
    def next_run(self, job: Job) -> str:
        return display.when(job.run_at) if job.status in READY_STATES else display.EMPTY

    @admin.display(description="created", ordering="created_at")
    def created(self, job: Job) -> str:
        return display.when(job.created_at)

    @admin.display(description="updated")
    def updated(self, job: Job) -> str:
        return display.when(job.updated_at)

    @admin.display(description="created")
    def created_precise(self, job: Job) -> str:
        return display.when(job.created_at, precise=True)

    @admin.display(description="updated")
    def updated_precise(self, job: Job) -> str:
        return display.when(job.updated_at, precise=True)

    @admin.display(description="run at")
    def run_at_precise(self, job: Job) -> str:
        return display.when(job.run_at, precise=True)

    @admin.display(description="claimed by its worker")
    def started_precise(self, job: Job) -> str:
        return display.when(job.started_at, precise=True)

    @admin.display(description="outcome written")
    def finished_precise(self, job: Job) -> str:
        return display.when(job.finished_at, precise=True)

    @admin.display(description="lease held until")
    def leased_precise(self, job: Job) -> str:
        return display.when(job.leased_until, precise=True)

    @admin.display(description="claim to outcome")
    def took(self, job: Job) -> str:
        return display.duration(job.duration)

    @admin.display(description="payload")
    def payload_json(self, job: Job):
        return display.pretty_json(job.payload)

    @admin.display(description="result")
    def result_json(self, job: Job):
        return display.pretty_json(job.result)

    @admin.display(description="error")
    def error_details(self, job: Job):
        return display.error_block(job.error)

    @admin.display(description="group")
    def group_display(self, job: Job):
        """The group the job belongs to, linked to its page (its progress)."""
        if job.group_id is None:
            return display.EMPTY
        from django_jobs.admin.groups import group_link

        return group_link(job.group_id)

    @admin.display(description="steps")
    def workflow_steps(self, job: Job):
        """A workflow's history, in order (``admin/workflow_steps.py``)."""
        from django_jobs.admin.workflow_steps import steps_table

        return steps_table(job)

    @admin.display(description="if a dependency fails")
    def if_a_dependency_fails(self, job: Job):
        """The job's policy for a dependency that goes dead or is canceled (only a job with
        dependencies has one)."""
        if not job.on_dependency_failure and job.status != Job.Status.WAITING and not \
                JobDependency.objects.filter(job=job).exists():
            return display.EMPTY
        return DependencyPolicy(job.on_dependency_failure or DependencyPolicy.WAIT).label

    @admin.display(description="waits on")
    def waits_on(self, job: Job):
        """The jobs this one depends on (with their names) and their status; a deleted
        dependency is named as such (one deleted before it completed keeps this job waiting)."""
        links = list(JobDependency.objects.filter(job=job).select_related("depends_on")
                     .only("deleted_status", "name", "depends_on__public_id",
                           "depends_on__status")
                     .order_by("pk")[:WAITS_ON_SHOWN + 1])
        if not links:
            return display.EMPTY
        items = [
            format_html("{}{}", f"{link.name}: " if link.name else "", (
                format_html("a deleted job (it was {})",
                            link.get_deleted_status_display() or "?")
                if link.depends_on is None else format_html(
                    '<a href="{}">{}</a> ({})',
                    reverse("admin:django_jobs_job_change", args=[link.depends_on.pk],
                            current_app=self.admin_site.name),
                    link.depends_on.public_id, link.depends_on.get_status_display())))
            for link in links[:WAITS_ON_SHOWN]
        ]
        if len(links) > WAITS_ON_SHOWN:
            items.append(format_html("{}", "and more"))
        return format_html_join(mark_safe(", "), "{}", ((item,) for item in items))
