"""System checks for a wrong setup of django-jobs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from .conf import DEFAULTS, jobs_settings
from .schema import jobs_database, problem


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list:
    problems: list = []
    user = getattr(settings, "DJANGO_JOBS", {}) or {}
    if not isinstance(user, dict):
        return [Error("DJANGO_JOBS must be a dict", id="django_jobs.E001")]
    for key in sorted(set(user) - set(DEFAULTS)):
        problems.append(Error(f"DJANGO_JOBS has an unknown key {key!r}", id="django_jobs.E002",
                              hint=f"known keys: {', '.join(sorted(DEFAULTS))}"))
    max_attempts = jobs_settings.MAX_ATTEMPTS
    if not isinstance(max_attempts, int) or max_attempts < 1:
        problems.append(Error("DJANGO_JOBS['MAX_ATTEMPTS'] must be a positive integer",
                              id="django_jobs.E003"))
    lease, beat = jobs_settings.LEASE_SECONDS, jobs_settings.HEARTBEAT_SECONDS
    if lease < 2 * beat:
        problems.append(Warning(
            f"LEASE_SECONDS ({lease}) is less than twice HEARTBEAT_SECONDS ({beat}): a busy "
            "worker may lose its lease and see its jobs run twice",
            id="django_jobs.W001",
        ))
    return problems


@register(Tags.database)
def check_migrated(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """The jobs tables exist and are up to date (``check --database default``, ``migrate``).

    A warning, not an error: ``migrate`` runs the database checks before it migrates, and an
    error would stop the very command that fixes it.
    """
    using = jobs_database()
    if not databases or using not in databases:
        return []
    reason = problem(using)
    if reason is None:
        return []
    return [Warning(reason, id="django_jobs.W002", hint="run `manage.py migrate`")]
