"""The one edit the admin allows: correct a dead job's payload and retry it, logged.

A job dies of bad input as often as of bad code: a typo in an address, an id that was renamed.
Then the fix is the payload. The edit is its own page and its own permission pair (retry and
change), it only applies to dead jobs, and it is recorded in the admin's history of the job
with the keys that changed (never their values, which may be secret) and in the
``django_jobs.admin`` log.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, NoReturn

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path

from django_jobs.core.json_rules import MAX_NESTING
from django_jobs.core.states import DEAD
from django_jobs.core.validation import check_payload, typed_arguments
from django_jobs.exceptions import InvalidJob, JobConflict
from django_jobs.models import Job

# The mixins below are only ever mixed into ``JobAdmin``; the type checker reads them as the
# ModelAdmin they extend.
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin[Job]
    from django_jobs.core.json_rules import JSONObject, JSONValue
else:
    _AdminBase = object

logger = logging.getLogger("django_jobs.admin")


class PayloadForm(forms.Form):
    payload = forms.CharField(widget=forms.Textarea(attrs={"rows": 16, "cols": 80}),
                              help_text="JSON. The job runs again with exactly this payload.")

    def clean_payload(self) -> JSONValue:
        """The payload as JSON reads it, strictly: NaN and the infinities are not JSON, and an
        object naming a key twice would lose one of its values. What JSON allows but no job
        can hold (a NUL, nesting too deep) is refused by the retry, with its reason."""
        try:
            return json.loads(self.cleaned_data["payload"], parse_constant=_not_json,
                              object_pairs_hook=_unique_keys)
        except RecursionError:
            raise forms.ValidationError(
                f"nested too deeply to read (a payload nests at most {MAX_NESTING} levels)"
            ) from None
        except ValueError as exc:  # JSONDecodeError, or an integer of too many digits
            raise forms.ValidationError(f"not valid JSON: {exc}") from None


def _not_json(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r} in an object")
            seen.add(key)
    return value


def changed_keys(old: JSONValue, new: JSONValue) -> list[str]:
    """Top-level keys added, removed or changed; ``["(payload)"]`` if either is not an object."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else ["(payload)"]
    return sorted(k for k in old.keys() | new.keys() if old.get(k, ...) != new.get(k, ...))


class EditPayloadMixin(_AdminBase):
    if TYPE_CHECKING:  # from JobViewsMixin, beside it in JobAdmin
        def url(self, name: str, *args: object) -> str: ...

    def get_urls(self):
        return [
            path("<path:object_id>/edit-payload/",
                 self.admin_site.admin_view(self.edit_payload_view),
                 name="django_jobs_job_edit_payload"),
            *super().get_urls(),
        ]

    def has_edit_payload_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return user.has_perm("django_jobs.retry_job") and user.has_perm("django_jobs.change_job")

    def edit_payload_view(self, request: HttpRequest, object_id: str):
        if not self.has_edit_payload_permission(request):
            raise PermissionDenied
        from django_jobs.admin.views import get_job_or_404

        job = get_job_or_404(object_id)
        if job.status != DEAD:
            self.message_user(request, "Only dead jobs can have their payload edited.",
                              messages.WARNING)
            return HttpResponseRedirect(self.url("change", job.pk))
        initial = json.dumps(job.payload, indent=2, ensure_ascii=False)
        form = PayloadForm(request.POST or None, initial={"payload": initial})
        if request.method == "POST" and form.is_valid():
            response = self._save_payload(request, job, form)
            if response is not None:
                return response
        request.current_app = self.admin_site.name
        context = {
            **self.admin_site.each_context(request), "title": f"Edit payload of {job.public_id}",
            "opts": self.model._meta, "original": job, "form": form, "media": self.media,
        }
        status = 400 if request.method == "POST" else 200
        return TemplateResponse(request, "django_jobs/admin/edit_payload.html", context,
                                status=status)

    def _save_payload(self, request: HttpRequest, job: Job, form: PayloadForm):
        new = form.cleaned_data["payload"]
        try:
            check_payload(new, typed_arguments(job.type))  # and against a typed handler's arguments
            changed = Job.objects.filter(pk=job.pk).retry_with_payload(new)
        except InvalidJob as exc:
            form.add_error("payload", "; ".join(exc.messages))
            return None
        except JobConflict:
            self.message_user(request, "Nothing was changed: another action or a worker changed "
                              "the job at the same moment; try again.", messages.WARNING)
            return HttpResponseRedirect(self.url("change", job.pk))
        if not changed:
            self.message_user(request, "The job is no longer dead; nothing was changed.",
                              messages.WARNING)
            return HttpResponseRedirect(self.url("change", job.pk))
        keys = ", ".join(changed_keys(job.payload, new)) or "none"
        self.log_change(request, job, f"Edited the payload (keys changed: {keys}) and retried.")
        logger.info("job %s: payload edited (keys changed: %s) and retried by %s",
                    job.public_id, keys, request.user.get_username())
        self.message_user(request, f"Payload saved (keys changed: {keys}); 1 job retried.",
                          messages.SUCCESS)
        return HttpResponseRedirect(self.url("change", job.pk))
