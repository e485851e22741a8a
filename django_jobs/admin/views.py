"""The admin pages beyond list and detail: buttons on the job page, the overview, pauses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from django_jobs.admin import actions, charts, live, overview_figures
from django_jobs.admin.page_database import list_database, looking, replica_note
from django_jobs.admin.requests import job_pk
from django_jobs.core.states import CANCELED, DEAD, FAILED, PENDING, PROCESSING, READY_STATES
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job, QueueState

# The mixins below are only ever mixed into ``JobAdmin``; the type checker reads them as the
# ModelAdmin they extend.
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin[Job]
else:
    _AdminBase = object

# verb: (permission check, what it does, statuses where its button shows)
OBJECT_VERBS = {
    "retry": ("has_retry_permission", actions.retry_result, (DEAD, FAILED, CANCELED)),
    "cancel": ("has_cancel_permission", actions.cancel_result, (PENDING, FAILED, PROCESSING)),
    "run_now": ("has_run_now_permission", actions.run_now_result, READY_STATES),
}


def verb_label(verb: str, job: Job) -> str:
    """A verb's button: a running job's cancel asks its worker."""
    if verb == "cancel" and job.status == PROCESSING:
        return "Ask worker to cancel"
    return {"retry": "Retry", "cancel": "Cancel", "run_now": "Run now"}[verb]


class JobViewsMixin(_AdminBase):
    """URLs and views added to ``JobAdmin``; kept apart so each file reads on its own."""

    if TYPE_CHECKING:  # from EditPayloadMixin, beside it in JobAdmin
        def has_edit_payload_permission(self, request: HttpRequest) -> bool: ...

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("overview/", wrap(self.overview_view), name="django_jobs_job_overview"),
            path("live/", wrap(self.live_view), name="django_jobs_job_live"),
            path("bulk/", wrap(self.bulk_view), name="django_jobs_job_bulk"),
            path("overview/queues/", wrap(require_POST(self.queue_view)),
                 name="django_jobs_job_queue"),
            path("<path:object_id>/do/<str:verb>/", wrap(require_POST(self.verb_view)),
                 name="django_jobs_job_verb"),
            *super().get_urls(),
        ]

    def url(self, name: str, *args: object) -> str:
        """Reverse one of this admin's URLs on the site it is mounted on."""
        return reverse(f"admin:django_jobs_job_{name}", args=args,
                       current_app=self.admin_site.name)

    # The job page's buttons.

    def verb_view(self, request: HttpRequest, object_id: str, verb: str):
        if verb not in OBJECT_VERBS:
            raise Http404(f"no such action: {verb}")
        check, run, _ = OBJECT_VERBS[verb]
        if not getattr(self, check)(request):
            raise PermissionDenied
        job = get_job_or_404(object_id)
        _, text, ok = run(Job.objects.filter(pk=job.pk))
        self.message_user(request, capfirst(text), messages.SUCCESS if ok else messages.WARNING)
        return HttpResponseRedirect(self.url("change", job.pk))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        pk = job_pk(object_id)
        job = None if pk is None else (
            Job.objects.filter(pk=pk).only("status", "cancel_requested").first())
        if job is not None:
            extra["job_buttons"] = self.job_buttons(request, job)
            extra.update(live.page_context(self.url("live"), "job", job.pk))
        return super().change_view(request, object_id, form_url, extra)

    def job_buttons(self, request: HttpRequest, job: Job) -> list[dict[str, str]]:
        buttons = [{"verb": verb, "label": verb_label(verb, job),
                    "url": self.url("verb", job.pk, verb)}
                   for verb in OBJECT_VERBS if self.offers_verb(request, verb, job)]
        if job.status == DEAD and self.has_edit_payload_permission(request):
            buttons.append({"verb": "edit_payload", "label": "Edit payload and retry",
                            "url": self.url("edit_payload", job.pk), "method": "get"})
        return buttons

    def offers_verb(self, request: HttpRequest, verb: str, job: Job) -> bool:
        """Whether the job's page offers ``verb``: the job is in a state it applies to, the
        user may use it, and a running job was not already asked to cancel."""
        check, _, statuses = OBJECT_VERBS[verb]
        if job.status not in statuses or not getattr(self, check)(request):
            return False
        return not (verb == "cancel" and job.status == PROCESSING and job.cancel_requested)

    # The list: a strip of the numbers that matter above it.

    def changelist_view(self, request, extra_context=None):
        def page():
            extra = {"summary": overview_figures.summary(using=list_database(request)),
                     "replica_note": replica_note(request),
                     **live.page_context(self.url("live"), "list"),
                     "bulk_url": bulk_link(request), **(extra_context or {})}
            return super(JobViewsMixin, self).changelist_view(request, extra)

        return looking(request, page)

    # The overview page and queue pauses.

    def bulk_view(self, request: HttpRequest):
        """Retry, cancel or delete every job the list's filter matches (``admin/bulk.py``)."""
        from django_jobs.admin import bulk

        return bulk.bulk_view(self, request)

    def live_view(self, request: HttpRequest):
        """The live pages' version (``admin/live.py``), for users who may view jobs."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return live.live_view(request)

    def overview_view(self, request: HttpRequest):
        if not self.has_view_permission(request):
            raise PermissionDenied
        request.current_app = self.admin_site.name
        return looking(request, lambda: self.overview_page(request))

    def overview_page(self, request: HttpRequest):
        context = {
            **self.admin_site.each_context(request),
            "title": "Jobs overview",
            "opts": self.model._meta,
            "can_pause": can_pause(request),
            "media": self.media,
            **overview_figures.overview(using=list_database(request)),
            # the finished jobs, from their counts
            **charts.context(request.GET, using=list_database(request)),
            "replica_note": replica_note(request),
            **live.page_context(self.url("live"), "overview"),
        }
        return TemplateResponse(request, "django_jobs/admin/overview.html", context)

    def queue_view(self, request: HttpRequest):
        if not can_pause(request):
            raise PermissionDenied
        name, op = request.POST.get("queue", ""), request.POST.get("op", "")
        if op not in ("pause", "resume"):
            raise Http404("op must be pause or resume")
        try:
            changed = getattr(QueueState.objects, op)(name)
        except InvalidJob as exc:
            self.message_user(request, f"Cannot {op} that queue: {'; '.join(exc.messages)}",
                              messages.ERROR)
        else:
            done = {"pause": "paused", "resume": "resumed"}[op]
            text = f"Queue {name} {done}." if changed else f"Queue {name} was already {done}."
            self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
        return HttpResponseRedirect(self.url("overview"))


def bulk_link(request: HttpRequest) -> str:
    from django_jobs.admin import bulk

    return bulk.list_link(request)


def get_job_or_404(object_id: str) -> Job:
    """The job with this primary key; 404 for a missing job or a malformed id."""
    pk = job_pk(object_id)
    if pk is None:
        raise Http404("no such job")
    return get_object_or_404(Job, pk=pk)


def can_pause(request: HttpRequest) -> bool:
    return request.user.has_perm("django_jobs.change_queuestate")
