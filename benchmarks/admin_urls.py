"""URLs for ``admin_pages.py``: the real admin, and a naive one for contrast."""

from django.contrib import admin
from django.urls import path

from django_jobs.admin.filters import HasErrorFilter
from django_jobs.models import Job


class NaiveJobAdmin(admin.ModelAdmin):
    """What a plain ModelAdmin would do: exact counts, DISTINCT filters, date drill-down."""

    list_display = ["public_id", "type", "status", "queue", "priority", "attempt",
                    "run_at", "created_at", "updated_at"]
    list_filter = ["status", "type", "queue", "priority", "created_at", HasErrorFilter]
    search_fields = ["public_id", "type", "error__message", "payload"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]


naive = admin.AdminSite(name="naive")
naive.register(Job, NaiveJobAdmin)

urlpatterns = [path("admin/", admin.site.urls), path("naive/", naive.urls)]
