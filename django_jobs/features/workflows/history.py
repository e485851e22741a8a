"""A workflow run's history: the steps it finished in earlier runs, loaded in one query when
the run starts, and the checkpoint writes of the steps it finishes now.

A step's identity is its key, its name and occurrence (``charge#0``, ``charge#1``) numbered
when the step is called, and its position in the history. A replay walks the history in
order: the step called at position N must be the one stored there (same key, same kind), or
the workflow goes dead with ``WorkflowMismatch`` naming the first difference.

Every checkpoint is written fenced on the run's lease: the job's row is locked under its
lease token until the commit (on SQLite, written, which takes the database's write lock) and
the checkpoint inserted in the same transaction, so a worker that lost its lease (frozen,
then taken over) commits no step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F

from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.core.settings import jobs_settings
from django_jobs.engine import engine_for
from django_jobs.exceptions import InvalidResult, PermanentError, StepLeaseLost, WorkflowMismatch

if TYPE_CHECKING:
    from django_jobs.models import Job, WorkflowStep

logger = logging.getLogger("django_jobs.workflows")

KINDS = ("atomic", "plain", "sleep", "wait", "patch")
# The job field that tells the finish which event a parked run waits for (``events.py``).
WAITING_MARK = "_workflow_waits_for"


@dataclass
class Run:
    """The running workflow: its job, the job's database alias, its stored steps in order,
    and how far this run has replayed them."""

    job: Job
    using: str
    history: list[WorkflowStep]
    position: int = 0
    occurrences: dict[str, int] = field(default_factory=dict)
    # >0 while a step, a sleep or a wait runs: their queries are the workflow's own
    depth: int = 0
    warned: bool = False
    # the key of the step running now (``step_key``)
    running_key: str | None = None

    @contextmanager
    def inside(self) -> Iterator[None]:
        """Around a step, a sleep or a wait: the queries they make are expected."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def watch(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
              context: dict[str, Any]) -> Any:
        """The run's connection's execute wrapper: a query of the workflow's body outside any
        step is logged once per run (a replay runs it again, and may read other rows)."""
        if not self.depth and not self.warned:
            self.warned = True
            logger.warning("workflow %s ran a query outside a step; a replay runs it again "
                           "and may read other rows: put it in a step (%.200s)",
                           self.job.public_id, sql)
        return execute(sql, params, many, context)

    def take(self, name: str, kind: str) -> tuple[str, WorkflowStep | None]:
        """The next step's key and its stored checkpoint (None: a step not run before).
        ``WorkflowMismatch`` when the history holds another step at this place; a
        ``PermanentError`` when a new step would pass ``MAX_WORKFLOW_STEPS``."""
        occurrence = self.occurrences.get(name, 0)
        self.occurrences[name] = occurrence + 1
        key = f"{name}#{occurrence}"
        position = self.position
        self.position += 1
        if position < len(self.history):
            stored = self.history[position]
            if stored.key != key or stored.kind != kind:
                raise WorkflowMismatch(
                    f"step {position} of workflow {self.job.public_id} is {kind} {key!r} in "
                    f"the code but {stored.kind} {stored.key!r} in its history")
            return key, stored
        if position >= jobs_settings.MAX_WORKFLOW_STEPS:
            raise PermanentError(f"workflow {self.job.public_id} would pass "
                                 f"MAX_WORKFLOW_STEPS ({jobs_settings.MAX_WORKFLOW_STEPS})")
        return key, None

    def patched(self, name: str) -> bool:
        """The version marker ``name`` here: True (recorded, or replayed) unless the history
        holds another step at this place, recorded before the marker was added to the code."""
        occurrence = self.occurrences.get(name, 0)
        key = f"{name}#{occurrence}"
        if self.position < len(self.history):
            stored = self.history[self.position]
            if stored.kind != "patch" or stored.key != key:
                return False  # the old code's history: take the old path, consume nothing
            self.occurrences[name] = occurrence + 1
            self.position += 1
            return True
        self.take(name, "patch")
        self.checkpoint(key, "patch")
        return True

    def replayed_all(self) -> None:
        """At the function's return: ``WorkflowMismatch`` when its history holds steps it no
        longer called (its code changed under it)."""
        if self.position < len(self.history):
            stored = self.history[self.position]
            raise WorkflowMismatch(
                f"workflow {self.job.public_id} returned at step {self.position}, but its "
                f"history goes on with {stored.kind} {stored.key!r}")

    def fence(self) -> None:
        """In the caller's transaction: lock the job's row while this run holds its lease;
        ``StepLeaseLost`` (the transaction then rolls back) when it no longer does."""
        engine = engine_for(self.using)
        fenced = engine.fenced(self.job)
        if engine.row_locks:  # a row lock, no new row version
            held = fenced.select_for_update().values_list("pk").first() is not None
        else:  # SQLite: a write takes the database's write lock until the commit
            held = bool(fenced.update(leased_until=F("leased_until")))
        if not held:
            raise StepLeaseLost(f"workflow {self.job.public_id} is no longer this run's: "
                                f"its step is not recorded")

    def checkpoint(self, key: str, kind: str, result: Any = None, *,
                   until: datetime | None = None, done: bool = True) -> WorkflowStep:
        """Record the step at the position ``take`` gave it, fenced, in the caller's
        transaction (an atomic step's) or a transaction of its own."""
        from django_jobs.models import WorkflowStep

        check_result(key, result)
        with transaction.atomic(using=self.using):
            self.fence()
            step = WorkflowStep(job_id=self.job.pk, key=key, position=self.position - 1,
                                kind=kind, result=result, until=until, done=done)
            step.save(using=self.using, force_insert=True)
        self.history.append(step)
        return step


def check_result(key: str, result: Any) -> None:
    """``InvalidResult`` for a step's result that a job could not hold as its own result."""
    try:
        storable_json(result, jobs_settings.MAX_RESULT_BYTES, "MAX_RESULT_BYTES")
    except NotStorable as exc:
        raise InvalidResult(f"the result of step {key!r} {exc}") from None


current_run: ContextVar[Run | None] = ContextVar("django_jobs_workflow_run", default=None)


def running() -> Run:
    """The workflow run of the calling thread; RuntimeError outside a workflow."""
    run = current_run.get()
    if run is None:
        raise RuntimeError("steps, sleeps and waits run only inside a @workflow function")
    return run


def start(job: Job) -> Run:
    """The run of ``job``, its whole history read in one query."""
    from django_jobs.models import WorkflowStep

    using = job._state.db or "default"
    history = list(WorkflowStep.objects.using(using).filter(job_id=job.pk).order_by("position"))
    return Run(job=job, using=using, history=history)
