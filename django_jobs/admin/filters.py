"""List filters whose choices cost no scan of the jobs table.

Django's default filter for a plain column lists its values with ``SELECT DISTINCT``, a full
scan of the jobs table on every page view. The type and queue filters list what the code and
the workers already know instead; any other value still works from the URL or the search box.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from django_jobs.admin import display, search
from django_jobs.admin.page_database import list_database
from django_jobs.core.settings import jobs_settings
from django_jobs.core.shelves import FINISHED
from django_jobs.core.validation import PRIORITY_NAMES
from django_jobs.handlers.registry import get_handler, registered_types
from django_jobs.models import Job, QueueState, Worker
from django_jobs.models.schema import jobs_database


class StatusFilter(admin.ChoicesFieldListFilter):
    """Django's filter of the status column; an open status is also looked for on the open
    shelf, where every open job is (``JobQuerySet.open_shelf``: on PostgreSQL the list is then
    planned on the open partition, not on every day's)."""

    def queryset(self, request, queryset):
        queryset = super().queryset(request, queryset)
        value = self.lookup_val
        values = value if isinstance(value, list) else [value] if value else []
        if values and set(values).isdisjoint(FINISHED):
            queryset = queryset.open_shelf()
        return queryset


class HasErrorFilter(admin.SimpleListFilter):
    title = _("has an error")
    parameter_name = "has_error"

    def lookups(self, request, model_admin):
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(error__isnull=False)
        if self.value() == "no":
            return queryset.filter(error__isnull=True)
        return queryset


class _KnownValuesFilter(admin.SimpleListFilter):
    """Choices from a cheap source, plus the value in the URL if it is not among them.

    A value the planner expects few jobs of is looked for among the newest jobs only, unless
    a period is chosen (``search.bounded_if_rare``), and the page says so.
    """

    field = ""

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        self.model_admin = model_admin

    def known(self, using: str) -> list[str]:
        """The choices, read from database ``using`` where they need a query."""
        raise NotImplementedError

    def lookups(self, request, model_admin):
        values = set(self.known(list_database(request)))
        chosen = self.value()
        if chosen:
            values.add(chosen)
        return [(value, value) for value in sorted(values)]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        window = getattr(self.model_admin, "search_window", search.SEARCH_WINDOW)
        filtered, start = search.bounded_if_rare(
            request, queryset.filter(**{self.field: self.value()}), window)
        if start is not None:
            search.note_window(request, start)
            self.model_admin.message_user(request, (
                f"Few jobs have this {self.field}: looked for among the newest {window:,} jobs, "
                f"created since {display.when(start)}. To look further back, choose a period "
                f"in the date drill-down above the list."), messages.INFO)
        return filtered


class TypeFilter(_KnownValuesFilter):
    title = _("type")
    parameter_name = "type"
    field = "type"

    def known(self, using: str) -> list[str]:
        # The queue's own types (django_jobs.callback) are its plumbing, not the site's jobs:
        # they are left out of the choices, and still filter from the URL.
        return [t for t in registered_types() if not t.startswith("django_jobs.")]


class QueueFilter(_KnownValuesFilter):
    title = _("queue")
    parameter_name = "queue"
    field = "queue"

    def known(self, using: str) -> list[str]:
        return known_queues(using)


# The most queues of ready jobs the queue filter looks up, one index probe each.
READY_QUEUES_PROBED = 100


def known_queues(using: str | None = None) -> list[str]:
    """Queues named in settings, handlers, pauses and live workers (two tiny queries), and the
    queues of ready jobs, which find a queue named only at enqueue; read from ``using`` (the
    jobs' database by default)."""
    using = using or jobs_database()
    names = {jobs_settings.DEFAULT_QUEUE}
    for job_type in registered_types():
        found = get_handler(job_type)
        if found is not None and found.queue:
            names.add(found.queue)
    names.update(QueueState.objects.using(using).values_list("name", flat=True))
    for queues in Worker.objects.using(using).values_list("queues", flat=True):
        names.update(q for q in queues or () if isinstance(q, str))
    names.update(ready_queues(using=using))
    return sorted(names)


def ready_queues(limit: int = READY_QUEUES_PROBED, using: str | None = None) -> list[str]:
    """The queues that hold a pending or failed job, in order: a skip scan of the ready
    index, which leads with the queue (``django_jobs_ready_idx``), one ``LIMIT 1`` probe per
    queue, instead of a ``SELECT DISTINCT`` that reads every ready row."""
    ready = Job.objects.using(using or jobs_database()).in_states(
        Job.Status.PENDING, Job.Status.FAILED).order_by("queue").values_list("queue", flat=True)
    found: list[str] = []
    while len(found) < limit:
        following = ready.filter(queue__gt=found[-1]) if found else ready
        queue = following.first()
        if queue is None:
            break
        found.append(queue)
    return found


class PriorityFilter(admin.SimpleListFilter):
    title = _("priority")
    parameter_name = "priority"

    def lookups(self, request, model_admin):
        by_value = sorted(PRIORITY_NAMES.items(), key=lambda item: -item[1])
        return [
            ("above", _("above high")),
            *[(name, f"{name} ({value})") for name, value in by_value],
            ("below", _("below low")),
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value in PRIORITY_NAMES:
            return queryset.filter(priority=PRIORITY_NAMES[value])
        if value == "above":
            return queryset.filter(priority__gt=max(PRIORITY_NAMES.values()))
        if value == "below":
            return queryset.filter(priority__lt=min(PRIORITY_NAMES.values()))
        return queryset
