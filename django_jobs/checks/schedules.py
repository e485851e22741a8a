"""System check: every schedule parses, and names a registered job type with valid options and
a payload that fits its handler's arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from collections.abc import Sequence

    from django.apps import AppConfig


@register()
def check_schedules(app_configs: Sequence[AppConfig] | None = None, **kwargs: object
                    ) -> list[Error]:
    from django_jobs.core.validation import check_payload, enqueue_fields, typed_arguments
    from django_jobs.exceptions import InvalidJob
    from django_jobs.features.schedules.config import schedules

    try:
        specs = schedules()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="django_jobs.E101")]
    problems = []
    for spec in specs.values():
        try:
            enqueue_fields(spec.type, priority=spec.priority, queue=spec.queue,
                           max_attempts=spec.max_attempts)
            check_payload(spec.payload, typed_arguments(spec.type))
        except InvalidJob as exc:
            problems.append(Error(f"DJANGO_JOBS['SCHEDULES'][{spec.name!r}]: {exc.messages[0]}",
                                  id="django_jobs.E102"))
    return problems
