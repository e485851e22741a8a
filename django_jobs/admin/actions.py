"""Admin actions: each calls a queryset verb (``engine/staff.py``) and says what it did.

The verbs narrow to the rows they apply to; here we only count the selection by status first,
so the message can name what was skipped and why ("3 jobs retried; 2 skipped: already
completed").
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.text import capfirst

from django_jobs.core.states import CANCELED, COMPLETED, DEAD, FAILED, PENDING, PROCESSING
from django_jobs.exceptions import JobConflict
from django_jobs.features.dependencies import held_by_dependents, waiting_dependents
from django_jobs.models.managers import JobQuerySet

RETRYABLE = (DEAD, FAILED, CANCELED)
CANCELABLE = (PENDING, FAILED)

# Why a job in a given status was left alone by each verb.
SKIP_REASONS: dict[str, dict[str, str]] = {
    "retry": {
        PENDING: "already pending",
        PROCESSING: "running now",
        "cancel_requested": "running now",
        COMPLETED: "already completed",
    },
    "cancel": {
        COMPLETED: "already completed",
        DEAD: "dead (retry or delete it instead)",
        CANCELED: "already canceled",
        "cancel_requested": "cancel already requested",
    },
    "run_now": {
        "not_scheduled": "not waiting for a later time",
        PROCESSING: "running now",
        "cancel_requested": "running now",
        COMPLETED: "already completed",
        DEAD: "dead (retry it instead)",
        CANCELED: "canceled",
    },
    "delete": {PROCESSING: "running now (cancel it first)",
               "held": "a waiting job depends on it (select that job too, or cancel it)"},
}


# What an action says when it met another one on the same jobs head on (``JobConflict``).
CONFLICT = ("nothing changed: another action or a worker changed these jobs at the same moment; "
            "try again")

Result = tuple[int, str, bool]


def conflict_reported(result: Callable[[JobQuerySet], Result]) -> Callable[[JobQuerySet], Result]:
    """An action's result, or ``CONFLICT`` (nothing changed) if its verb met another action on
    the same jobs head on (``engine/staff.py``)."""

    @functools.wraps(result)
    def reported(queryset: JobQuerySet) -> Result:
        try:
            return result(queryset)
        except JobConflict:
            return 0, CONFLICT, False

    return reported


def jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def summarise(done: str, changed: int, skipped: Counter[str], verb: str) -> str:
    """``3 jobs retried; 2 skipped: already completed; 1 skipped: running now``."""
    parts = [f"{jobs(changed)} {done}"]
    reasons = SKIP_REASONS[verb]
    why = [(n, reasons.get(key, "changed meanwhile")) for key, n in skipped.items() if n]
    for n, reason in sorted(why, key=lambda item: (-item[0], item[1])):
        parts.append(f"{n} skipped: {reason}")
    return "; ".join(parts)


def status_counts(queryset: JobQuerySet) -> Counter[str]:
    """How many selected jobs are in each status (one grouped query)."""
    rows = queryset.order_by().values("status", "cancel_requested").annotate(n=Count("pk"))
    counts: Counter[str] = Counter()
    for row in rows:
        key = row["status"]
        if key == PROCESSING and row["cancel_requested"]:
            key = "cancel_requested"
        counts[key] += row["n"]
    return counts


def apply(
    queryset: JobQuerySet, verb: str, done: str, applies: Iterable[str],
    call: Callable[[JobQuerySet], int],
) -> tuple[int, str, bool]:
    """Run ``call`` on the selection; returns (changed, message, whether anything changed)."""
    before = status_counts(queryset)
    applies = set(applies)
    changed = call(queryset)
    skipped = Counter({k: n for k, n in before.items() if k not in applies})
    expected = sum(n for k, n in before.items() if k in applies)
    if expected > changed:
        skipped["changed_meanwhile"] += expected - changed
    return changed, summarise(done, changed, skipped, verb), changed > 0


def report(modeladmin: admin.ModelAdmin, request: HttpRequest, result: tuple) -> None:
    _, text, ok = result
    modeladmin.message_user(request, capfirst(text), messages.SUCCESS if ok else messages.WARNING)


@admin.action(description="Retry selected jobs (dead, failed, canceled)", permissions=["retry"])
def retry_jobs(modeladmin, request, queryset):
    report(modeladmin, request, retry_result(queryset))


@admin.action(description="Cancel selected jobs", permissions=["cancel"])
def cancel_jobs(modeladmin, request, queryset):
    report(modeladmin, request, cancel_result(queryset))


@admin.action(description="Run selected scheduled jobs now", permissions=["run_now"])
def run_jobs_now(modeladmin, request, queryset):
    report(modeladmin, request, run_now_result(queryset))


def _retry(queryset: JobQuerySet) -> int:
    return queryset.retry()


@conflict_reported
def cancel_result(queryset: JobQuerySet) -> Result:
    """Cancel: waiting jobs are canceled, running ones are asked to stop."""
    before = status_counts(queryset)
    changed = queryset.cancel()
    waiting = sum(before[s] for s in CANCELABLE)
    running = before[PROCESSING]
    skipped = Counter({k: n for k, n in before.items() if k not in (*CANCELABLE, PROCESSING)})
    if changed == waiting + running:
        done = f"canceled{'; ' + jobs(running) + ' running, asked to stop' if running else ''}"
        return changed, summarise(done, waiting, skipped, "cancel"), changed > 0
    skipped["changed_meanwhile"] += waiting + running - changed
    return changed, summarise("canceled or asked to stop", changed, skipped, "cancel"), changed > 0


@conflict_reported
def run_now_result(queryset: JobQuerySet) -> Result:
    """Run now: only pending or failed jobs whose run_at is still ahead."""
    before = status_counts(queryset)
    changed = queryset.run_now()
    skipped = Counter({k: n for k, n in before.items() if k not in CANCELABLE})
    ready_total = sum(before[s] for s in CANCELABLE)
    if ready_total > changed:
        skipped["not_scheduled"] += ready_total - changed
    return changed, summarise("made due now", changed, skipped, "run_now"), changed > 0


@conflict_reported
def retry_result(queryset: JobQuerySet) -> Result:
    return apply(queryset, "retry", "retried", RETRYABLE, _retry)


WAITING_SHOWN = 20  # waiting dependents a delete page names; it counts the others


def dependents_context(jobs: JobQuerySet) -> dict[str, object]:
    """What a delete page says of the waiting jobs that depend on ``jobs``: deleted before it
    completed, a dependency keeps its dependents waiting (features/dependencies.py)."""
    waiting = waiting_dependents(jobs.exclude(status=PROCESSING)).order_by("pk")
    shown = list(waiting.only("pk", "public_id", "type")[:WAITING_SHOWN])
    count = len(shown) if len(shown) < WAITING_SHOWN else waiting.count()
    return {"waiting_dependents": shown, "waiting_dependents_count": count,
            "waiting_dependents_more": count - len(shown)}


def deletable(queryset: JobQuerySet) -> JobQuerySet:
    """The jobs of ``queryset`` a delete takes: not those a waiting job outside the selection
    depends on and that have not completed (``held_by_dependents``); ``discard`` reads that
    again once their rows are locked, so a dependent enqueued meanwhile keeps its dependency."""
    return queryset.exclude(held_by_dependents(queryset))


@conflict_reported
def delete_result(queryset: JobQuerySet) -> Result:
    before = status_counts(queryset)
    held = queryset.exclude(status=PROCESSING).filter(held_by_dependents(queryset)).count()
    deleted = deletable(queryset).discard()
    skipped: Counter[str] = Counter({PROCESSING: before[PROCESSING] + before["cancel_requested"],
                                     "held": held})
    expected = sum(before.values()) - skipped[PROCESSING] - held
    if expected > deleted:
        skipped["changed_meanwhile"] += expected - deleted
    return deleted, summarise("deleted", deleted, skipped, "delete"), deleted > 0


@admin.action(description="Delete selected jobs (not running ones)", permissions=["delete"])
def delete_jobs(modeladmin, request, queryset):
    """First a page that counts what will go; deleting happens on its confirming POST."""
    if request.POST.get("post") == "yes":
        report(modeladmin, request, delete_result(queryset))
        return None
    counts = status_counts(queryset)
    running = counts.pop(PROCESSING, 0) + counts.pop("cancel_requested", 0)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Delete jobs?",
        "opts": modeladmin.model._meta,
        "counts": sorted(counts.items()),
        "total": sum(counts.values()),
        "running": running,
        **dependents_context(queryset),
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "select_across": request.POST.get("select_across", "0"),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    return TemplateResponse(
        request, "django_jobs/admin/delete_jobs_confirmation.html", context
    )
