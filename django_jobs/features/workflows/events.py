"""Events sent to a workflow: ``send_event`` and the wait's side (``take_event``), and the
finish hook that wakes a workflow an event reached while it ran.

An event is a row (``WorkflowEvent``) kept until a ``wait_for`` of its name takes it, oldest
first: one sent before the wait began is delivered when the wait comes. Its ``event_id`` is
unique per workflow, so a sender that tries again (a webhook delivered twice) adds nothing.
A send to a workflow that has ended raises ``WorkflowFinished``.

A send locks the workflow's row before it inserts the event and makes the job due: a run that
parks at the same moment either finishes first (the send then finds the job pending and makes
it due) or waits for the send's commit, and its finish hook then sees the event and makes the
job due itself. Either way the event is not left waiting for the wait's timeout.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, router, transaction

from django_jobs.core import clock
from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.settings import jobs_settings
from django_jobs.core.states import CANCELED, COMPLETED, DEAD, Outcome
from django_jobs.engine import engine_for
from django_jobs.engine.hooks import Feature
from django_jobs.exceptions import InvalidJob, WorkflowFinished
from django_jobs.features.workflows.history import WAITING_MARK

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.features.workflows.history import Run
    from django_jobs.models import Job, WorkflowStep
    from django_jobs.models.managers import JobManager

ENDED = (COMPLETED, DEAD, CANCELED)


def send_event(workflow: Job | int, name: str, payload: Any = None, *,
               event_id: str | None = None, using: str | None = None) -> bool:
    """Send event ``name`` with ``payload`` to ``workflow`` (its Job, or its id), in the
    caller's transaction, and make the workflow due now. False when an event with this
    ``event_id`` was sent to it before (nothing is written); ``WorkflowFinished`` when the
    workflow has ended; ``InvalidJob`` for a job that is not a workflow or a bad argument;
    ``Job.DoesNotExist`` for no such job."""
    from django_jobs.features.workflows.registry import is_workflow
    from django_jobs.models import Job, WorkflowEvent

    _check_event(name, payload, event_id)
    if isinstance(workflow, Job):
        job_id, using = workflow.pk, using or workflow._state.db
    elif isinstance(workflow, int) and not isinstance(workflow, bool):
        job_id = workflow
    else:
        raise InvalidJob({"workflow": f"must be a Job or a job's id, not {workflow!r}"})
    using = using or router.db_for_write(Job)
    with transaction.atomic(using=using):
        rows = Job.objects.using(using).filter(pk=job_id)
        if engine_for(using).row_locks:
            rows = rows.select_for_update()
        found = rows.values_list("type", "status").first()
        if found is None:
            raise Job.DoesNotExist(f"no job {job_id}")
        type, status = found
        if not is_workflow(type):
            raise InvalidJob({"workflow": f"job {job_id} of type {type!r} is not a workflow"})
        if status in ENDED:
            raise WorkflowFinished(f"workflow {job_id} has ended ({status}): "
                                   f"no wait of its can take event {name!r}")
        try:
            with transaction.atomic(using=using):
                WorkflowEvent.objects.using(using).create(
                    job_id=job_id, name=name, event_id=event_id or uuid.uuid4().hex,
                    payload=payload)
        except IntegrityError:
            return False  # sent before: a duplicate
        engine_for(using).run_now(Job.objects.using(using).filter(pk=job_id))
    return True


def _check_event(name: object, payload: object, event_id: object) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= 100 or "#" in name:
        raise InvalidJob({"name": "must be 1 to 100 characters without '#'"})
    if event_id is not None and (not isinstance(event_id, str) or not 1 <= len(event_id) <= 100):
        raise InvalidJob({"event_id": "must be 1 to 100 characters"})
    try:
        storable_json(payload, jobs_settings.MAX_PAYLOAD_BYTES, "MAX_PAYLOAD_BYTES")
    except NotStorable as exc:
        raise InvalidJob({"payload": str(exc)}) from None


def take_event(run: Run, wait: WorkflowStep, name: str) -> bool:
    """Settle the unsettled ``wait`` for event ``name``: take the oldest event of that name
    no wait has taken, or record the timeout when its deadline has passed; fenced on the run's
    lease, in one transaction. False when neither: the wait goes on."""
    from django_jobs.models import WorkflowEvent

    with transaction.atomic(using=run.using):
        events = WorkflowEvent.objects.using(run.using).filter(
            job_id=run.job.pk, name=name, taken_by="").order_by("pk")
        if engine_for(run.using).row_locks:
            events = events.select_for_update()
        event = events.first()
        if event is not None:
            run.fence()
            event.taken_by = wait.key
            event.save(using=run.using, update_fields=["taken_by"])
            wait.result = {"event_id": event.event_id, "payload": event.payload}
        elif wait.until is not None and wait.until <= clock.now(run.using):
            run.fence()
            wait.result = {"timeout": True}
        else:
            return False
        wait.done = True
        wait.save(using=run.using, update_fields=["result", "done"])
    return True


class WorkflowWaits(Feature):
    """The finish hook of ``wait_for``: a run that parked waiting for an event that was sent
    while it ran is made due at once, in the transaction that records its snooze."""

    name = "workflow-waits"
    marks = (WAITING_MARK,)

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        from django_jobs.models import WorkflowEvent

        due = []
        for outcome in written:
            name = outcome.job.__dict__.pop(WAITING_MARK, None)
            if name is None or outcome.kind != Outcome.SNOOZED:
                continue
            if WorkflowEvent.objects.using(manager.db).filter(
                    job_id=outcome.job.pk, name=name, taken_by="").exists():
                due.append(outcome.job.pk)
        if due:
            engine_for(manager.db).run_now(manager.filter(pk__in=due))
