"""The worker's turn keeps the claim's plan and the finish's whatever the statistics say
(PostgreSQL).

On most turns a worker on PostgreSQL runs ``sql.TURN``: the finish of the batch it ran and
its next claim in one statement (``PostgresEngine.finish_and_claim``). Its parts are planned
together, so each is checked again inside it, in the table states of ``test_claim_plans.py``
and with its helpers: the claim (the ``claimed`` CTE) must walk a ready index in order as the
claim alone does, and the finish (every other part) must read the jobs table only by
looking up its batch's ids in the primary key.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone

from django_jobs.core.contract import ClaimRequest
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.states import READY_STATES, Outcome
from django_jobs.engine import engine_for
from django_jobs.engine.postgres import engine as postgres
from django_jobs.engine.postgres import statements
from django_jobs.engine.writes import claim_values
from django_jobs.models import Job

from .test_claim_plans import (
    SELECTIONS,
    SIZES,
    STATES,
    claim_faults,
    custom_plan,
    generic_plan,
    nodes,
)

pytestmark = pytest.mark.django_db

JOBS = "django_jobs_job"
PRIMARY_KEY = "django_jobs_job_pkey"
CLAIM_PART = "CTE claimed"
KEYED = re.compile(r"^\(id = ")


def finished_batch() -> list[AttemptOutcome]:
    """Three jobs claimed from the table by the engine, one completed, one failed, one
    canceled: the outcomes a worker hands to its next turn."""
    jobs = engine_for(Job.objects.db).claim(ClaimRequest("w-ran", limit=3, lease_seconds=60))
    assert len(jobs) == 3
    now = timezone.now()
    endings = [{"kind": Outcome.COMPLETED, "result": {"sent": 1}},
               {"kind": Outcome.FAILED, "error": {"type": "Timeout", "message": "slow"}},
               {"kind": Outcome.CANCELED, "error": {"type": "Canceled", "message": ""}}]
    return [AttemptOutcome(job=job, started_at=now, finished_at=now, cpu_time=0.001,
                           peak_memory=1024, **ending)
            for job, ending in zip(jobs, endings, strict=True)]


def turn_sql(outcomes: list[AttemptOutcome], size: int, queues: list[str] | None,
             excluded: list[str]) -> tuple[str, list[Any]]:
    """The turn's statement and parameters, built as ``postgres.finish_and_claim`` builds
    them: the outcomes' transitions, the finish's parameters, then the claim's."""
    engine = engine_for(Job.objects.db)
    now = timezone.now()
    changes = [engine.transition(outcome, now) for outcome in outcomes]
    claim_text, claim_params, _ = postgres.claim_statement(
        Job, values=claim_values("w-next", now, 60), ready_states=READY_STATES, now=now,
        queues=queues, exclude_queues=excluded, limit=size,
    )
    params = [*postgres.finish_params(outcomes, changes, now), *claim_params]
    return statements.turn_sql(Job, claim_text), params


def parts(plan: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The turn's plan as the claim's subtree and the nodes of everything else."""
    claim = None
    rest = []
    pending = [plan]
    while pending:
        node = pending.pop()
        if node.get("Subplan Name") == CLAIM_PART:
            claim = node
            continue
        rest.append(node)
        pending.extend(node.get("Plans", ()))
    return claim, rest


def finish_faults(rest: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the finish's part of a turn; empty if it goes by primary key. Each
    read of the jobs table must look ids up in the primary key (the batch's, ``id = ANY``, or
    each outcome's): a sequential scan, another index, or the primary key read whole (as a
    merge join would) grows with the table. Joining the outcomes with the rows so found is
    fine."""
    faults = []
    scans = [n for n in rest if n.get("Relation Name") == JOBS and "Scan" in n["Node Type"]]
    if not scans:
        faults.append("no scan of the jobs table")
    for scan in scans:
        if not any(n.get("Index Name") == PRIMARY_KEY and KEYED.search(n.get("Index Cond", ""))
                   for n in nodes(scan)):
            faults.append(f"{scan['Node Type']} of the jobs table, not by key")
    # the earlier attempts' move (the shelved CTE) reads the attempts' own index on job_id
    used = {n["Index Name"] for n in rest
            if "Index Name" in n and n.get("Relation Name") != "django_jobs_jobattempt"}
    if used != {PRIMARY_KEY}:
        faults.append(f"indexes {sorted(used)}")
    return faults


def turn_faults(plan: dict[str, Any], queues: list[str] | None) -> list[str]:
    claim, rest = parts(plan)
    if claim is None:
        return ["no claimed CTE"]
    found = [f"claim: {fault}" for fault in claim_faults(claim, len(queues or ()) or 1)]
    return found + [f"finish: {fault}" for fault in finish_faults(rest)]


@pytest.mark.usefixtures("jobs_table")
@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_the_turn_walks_the_ready_index_and_finishes_by_primary_key(state):
    state()
    outcomes = finished_batch()
    faults = {}
    for size in SIZES:
        for queues, excluded in SELECTIONS:
            sql, params = turn_sql(outcomes, size, queues, list(excluded))
            for name, plan_of in (("custom", custom_plan), ("generic", generic_plan)):
                found = turn_faults(plan_of(sql, params), queues)
                if found:
                    faults[f"{name} plan, n={size}, queues={queues}, exclude={excluded}"] = found
    assert faults == {}
