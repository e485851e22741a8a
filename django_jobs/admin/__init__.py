"""Admin triage for jobs: the list, the job page, actions, the overview and queue pauses."""

from django.contrib import admin

from ..models import Job
from .job_admin import JobAdmin

admin.site.register(Job, JobAdmin)

__all__ = ["JobAdmin"]
