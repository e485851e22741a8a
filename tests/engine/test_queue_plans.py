"""A claim from named queues walks only those queues' part of the ready index (PostgreSQL).

``django_jobs_ready_idx`` starts with the queue, ``django_jobs_ready_any_idx`` does not; both
are in claim order within one queue. When the statistics count one queue holding every ready
row, the queue's equality looks as if it kept every row, a walk of ``django_jobs_ready_any_idx``
that filters the queue looks as cheap as the queue's part of ``django_jobs_ready_idx``, and a
claim from a small or empty queue read every ready row of the others. The claim bounds its walk
by the queue (``ONE_QUEUE`` in ``engine/postgres/statements.py``); these tests read its plans,
made for the call's values and generic, in the states where the statistics say so, for a worker
of one queue, of two (one of them the full one, or neither), and of one queue after a key (a
worker of two or more queues claims without one: ``worker/producer.py``).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from django_jobs.core.contract import ClaimKey
from tests.engine.test_claim_plans import (
    READY_INDEXES,
    SCANS,
    SIZES,
    claim_faults,
    claim_sql,
    custom_plan,
    generic_plan,
    nodes,
)

pytestmark = pytest.mark.django_db

FULL = "default"
# (queues, exclude_queues): the full queue, an empty one, both, two empty ones, and with a
# queue excluded
SELECTIONS = [([FULL], ()), (["mail"], ()), ([FULL, "mail"], ()), (["mail", "sms"], ()),
              (["mail", FULL, "sms"], ()), ([FULL, "mail"], ["other"])]


def add(count: int, status: str, age: str, prefix: str) -> None:
    """``count`` jobs in ``status``, all in the queue ``FULL``, due ``age`` ago."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                   run_at, attempt, max_attempts, crashes, created_at, updated_at, worker_id,
                   cancel_requested, callback_url, has_dependents)
               SELECT %s || lpad(to_hex(g), 19, '0'), 'echo', '{}', %s, 0, %s,
                   now() - %s::interval, 0, 3, 0, now(), now(), '', false, '', false
               FROM generate_series(1, %s) AS g""",
            [prefix, status, FULL, age, count],
        )


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")


def one_queue_holds_every_ready_row() -> None:
    """Finished and ready rows of one queue, analyzed: the statistics know one queue."""
    add(50_000, "completed", "1 day", "j-h")
    add(20_000, "pending", "1 second", "j-p")
    analyze()


def burst_into_one_queue_after_analyzed() -> None:
    """An ``ANALYZE`` of a few finished rows of one queue, then a burst into it."""
    add(200, "completed", "1 hour", "j-h")
    analyze()
    add(50_000, "pending", "1 second", "j-p")


STATES = [one_queue_holds_every_ready_row, burst_into_one_queue_after_analyzed]


def queue_faults(plan: dict, queues: list[str]) -> list[str]:
    """``claim_faults``, and any walk of a ready index not bounded by its queue: a walk of
    ``django_jobs_ready_idx`` with the queue in its Index Cond, one per queue."""
    faults = claim_faults(plan, len(queues))
    walks = [n for n in nodes(plan) if n["Node Type"] in SCANS
             and n["Index Name"] in READY_INDEXES]
    for walk in walks:
        if walk["Index Name"] != "django_jobs_ready_idx" or "queue" not in walk.get(
                "Index Cond", ""):
            faults.append(f"{walk['Index Name']} walked, filtered by {walk.get('Filter')}")
    if len(walks) != len(queues):
        faults.append(f"{len(walks)} walks for {len(queues)} queues")
    return faults


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
@pytest.mark.parametrize("after", [False, True], ids=["from the start", "after a key"])
def test_a_claim_from_named_queues_walks_each_queues_part_of_the_ready_index(
        jobs_table, state, after):
    state()
    key = ClaimKey(0, timezone.now() - timezone.timedelta(minutes=1), 5) if after else None
    faults = {}
    for size in SIZES:
        for queues, excluded in SELECTIONS:
            if after and len(queues) > 1:
                continue
            sql, params = claim_sql(size, queues, list(excluded), after=key)
            for name, plan_of in (("custom", custom_plan), ("generic", generic_plan)):
                found = queue_faults(plan_of(sql, params), queues)
                if found:
                    faults[f"{name} plan, n={size}, queues={queues}, exclude={excluded}"] = found
    assert faults == {}
