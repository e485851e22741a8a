"""Admin triage for jobs: the list, the job page, actions, the overview and queue pauses."""

from django.contrib import admin

from django_jobs.admin.job_admin import JobAdmin
from django_jobs.models import Job

admin.site.register(Job, JobAdmin)

__all__ = ["JobAdmin"]
