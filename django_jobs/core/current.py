"""The job the calling thread runs: set by the worker around a handler, read by the handler's
own calls (``current_job()``, progress, follow-ups, callbacks) wherever they live."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobs.models import Job

current_job: ContextVar[Job | None] = ContextVar("django_jobs_current_job", default=None)
