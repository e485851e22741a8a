"""Create and revoke API tokens in the admin; a new token's secret is shown once, never stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from django_jobs.admin.display import when_column
from django_jobs.admin.requests import StockAnswers
from django_jobs.models.tokens import ApiToken


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple,
        help_text="submit: POST /jobs. read: GET jobs and metrics. manage: cancel and retry.",
    )

    class Meta:
        model = ApiToken
        fields = ["name", "scopes", "revoked_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(StockAnswers, admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["name", "key_prefix", "scope_list", when_column("created_at", "created"),
                    when_column("last_used_at", "last used"),
                    when_column("revoked_at", "revoked")]
    list_filter = ["revoked_at"]
    search_fields = ["name", "key_prefix"]
    readonly_fields = ["key_prefix", "created", "last_used"]
    created = staticmethod(when_column("created_at", "created"))
    last_used = staticmethod(when_column("last_used_at", "last used"))
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, token: ApiToken) -> str:
        return ", ".join(token.scopes or [])

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", "scopes")
        return ("name", "key_prefix", "scopes", "created", "last_used", "revoked_at")

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if not change:
            fresh, raw = ApiToken.generate(obj.name, list(obj.scopes or []))
            obj.key_hash, obj.key_prefix = fresh.key_hash, fresh.key_prefix
            obj.scopes = fresh.scopes
            request._django_jobs_new_token = raw  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue=None):
        raw = getattr(request, "_django_jobs_new_token", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "token": obj, "raw": raw, "title": "API token created",
        }
        response: HttpResponse = TemplateResponse(
            request, "django_jobs/api/token_created.html", context
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
