"""Actions over a filter in the admin: "retry, cancel or delete every job this list shows",
counted and confirmed on a page of its own, then run as a job (``features/bulk_actions.py``);
and the list of those actions, with their progress.

The job list's query string is read into the feature's spec: its filters, its date drill-down,
and its search (in the window of newest jobs the list searched, when no period was chosen). A
filter the spec does not know is refused with a message on the list, never dropped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from django_jobs.admin.display import job_link
from django_jobs.admin.requests import StockAnswers
from django_jobs.admin.search import PUBLIC_ID_RE, SEARCH_WINDOW
from django_jobs.features import bulk_actions
from django_jobs.models import BulkAction
from django_jobs.models.newest import window_start
from django_jobs.models.schema import jobs_database

if TYPE_CHECKING:
    from django.http import HttpRequest, QueryDict

PERMISSION = "django_jobs.act_on_filter_job"
# Each verb and the permission it needs besides PERMISSION (the same as its list action's).
VERB_PERMISSIONS = {
    BulkAction.Verb.RETRY: "django_jobs.retry_job",
    BulkAction.Verb.CANCEL: "django_jobs.cancel_job",
    BulkAction.Verb.DELETE: "django_jobs.delete_job",
}
IGNORED = {"o", "p", "e", "all", "_changelist_filters"}  # order, page, errors, show-all
PLAIN = {"status__exact": "status", "type": "type", "queue": "queue", "priority": "priority",
         "has_error": "has_error"}


def allowed_verbs(request: HttpRequest) -> list[str]:
    user = request.user
    if not user.has_perm(PERMISSION):
        return []
    return [verb for verb, perm in VERB_PERMISSIONS.items() if user.has_perm(perm)]


def spec_from(params: QueryDict, *, using: str | None = None) -> dict[str, Any]:
    """The feature's spec for the job list's query string; ``bulk_actions.BadSpec`` naming a
    parameter it cannot follow."""
    spec: dict[str, Any] = {}
    unknown = []
    date: dict[str, int] = {}
    for key in params:
        value = params.get(key, "")
        if key in IGNORED:
            continue
        if key in PLAIN:
            spec[PLAIN[key]] = value
        elif key == "created_at__gte":
            spec["created_from"] = value
        elif key == "created_at__lt":
            spec["created_before"] = value
        elif key in ("created_at__year", "created_at__month", "created_at__day"):
            try:
                date[key.rsplit("__", 1)[1]] = int(value)
            except ValueError:
                raise bulk_actions.BadSpec(f"{key} must be a number") from None
        elif key == "q":
            term = value.strip()
            if PUBLIC_ID_RE.fullmatch(term):
                spec["public_id"] = term
            elif term:
                spec["search"] = term
        else:
            unknown.append(key)
    if unknown:
        raise bulk_actions.BadSpec(f"cannot act over a filter on {', '.join(sorted(unknown))}")
    if date:
        spec.update(period(date))
    elif "search" in spec:
        start = window_start(using or jobs_database(), SEARCH_WINDOW)  # the list searched it
        if start is not None:
            spec["created_from"] = start.isoformat()
    return bulk_actions.clean_spec(spec)


def period(date: dict[str, int]) -> dict[str, str]:
    """The date drill-down's year, month or day as a range in the current time zone."""
    if "year" not in date:
        raise bulk_actions.BadSpec("a month or day without its year")
    year, month, day = date["year"], date.get("month"), date.get("day")
    try:
        start = datetime(year, month or 1, day or 1)
    except ValueError as exc:
        raise bulk_actions.BadSpec(f"no such date: {exc}") from None
    if day:
        end = start + timedelta(days=1)
    elif month:
        end = datetime(year + month // 12, month % 12 + 1, 1)
    else:
        end = datetime(year + 1, 1, 1)
    zone = timezone.get_current_timezone()
    return {"created_from": timezone.make_aware(start, zone).isoformat(),
            "created_before": timezone.make_aware(end, zone).isoformat()}


def bulk_view(model_admin: admin.ModelAdmin, request: HttpRequest):
    """GET: the count of jobs the list's filter matches and the verbs the user may use;
    POST: start the action (frozen there), record it in the admin's history, and show it."""
    verbs = allowed_verbs(request)
    if not verbs:
        raise PermissionDenied
    list_url = reverse("admin:django_jobs_job_changelist", current_app=model_admin.admin_site.name)
    source = request.POST if request.method == "POST" else request.GET
    query = source.get("filters", "") if request.method == "POST" else request.GET.urlencode()
    from django.http import QueryDict

    params = QueryDict(query) if request.method == "POST" else source
    try:
        spec = spec_from(params)
    except bulk_actions.BadSpec as exc:
        model_admin.message_user(request, f"Not started: {exc}.", messages.ERROR)
        return HttpResponseRedirect(f"{list_url}?{query}" if query else list_url)
    if request.method == "POST":
        verb = request.POST.get("verb", "")
        if verb not in verbs:
            raise PermissionDenied
        action = bulk_actions.start(verb, spec, user=request.user.get_username())
        model_admin.log_addition(request, action, [{"added": {}}])
        model_admin.message_user(
            request, f"Started: {action} ({action.matched:,}"
            f"{'+' if action.matched_capped else ''} jobs). It runs as a job; "
            "its progress is on this page.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:django_jobs_bulkaction_change",
                                            args=[action.pk],
                                            current_app=model_admin.admin_site.name))
    matched, capped = bulk_actions.count(spec)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Act on every matching job?",
        "opts": model_admin.model._meta,
        "description": bulk_actions.describe(spec),
        "matched": matched, "capped": capped,
        "verbs": [(verb, BulkAction.Verb(verb).label) for verb in verbs],
        "filters": query, "list_url": f"{list_url}?{query}" if query else list_url,
        "media": model_admin.media,
    }
    return TemplateResponse(request, "django_jobs/admin/bulk_confirmation.html", context)


@admin.register(BulkAction)
class BulkActionAdmin(StockAnswers, admin.ModelAdmin):
    list_display = ("__str__", "verb", "progress", "matched_display", "changed", "skipped",
                    "created_by", "created_at", "finished_at", "job")
    ordering = ("-created_at",)
    readonly_fields = ("verb", "description", "spec", "progress", "matched_display", "changed",
                       "skipped", "created_by", "created_at", "finished_at", "job")
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: BulkAction | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: BulkAction | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: BulkAction | None = None) -> bool:
        return request.user.has_perm(PERMISSION) or super().has_view_permission(request, obj)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    @admin.display(description="matched")
    def matched_display(self, action: BulkAction) -> str:
        if action.matched is None:
            return "-"
        return f"more than {action.matched:,}" if action.matched_capped else f"{action.matched:,}"

    @admin.display(description="progress")
    def progress(self, action: BulkAction) -> str:
        done = action.changed + action.skipped
        if action.finished_at is not None:
            return f"done: {done:,} jobs"
        if not action.matched:
            return "waiting for a worker" if not done else f"{done:,} jobs"
        total = max(action.matched, done)
        return format_html('<progress max="{}" value="{}"></progress> {} of {}{}', total, done,
                           f"{done:,}", f"{total:,}", "+" if action.matched_capped else "")

    @admin.display(description="job")
    def job(self, action: BulkAction) -> str:
        return job_link(action.job_id, "the action's job") if action.job_id else "-"


def list_link(request: HttpRequest) -> str:
    """The job list's "act on every matching job" link, for users who may; else empty."""
    if not allowed_verbs(request):
        return ""
    url = reverse("admin:django_jobs_job_bulk")
    params = request.GET.copy()
    for key in ("p", "o"):
        params.pop(key, None)
    query = params.urlencode()
    return f"{url}?{query}" if query else url
