"""The ``unique_key`` column's state flags: which states hold a key, and the UPDATE value that
keeps or clears it when a job changes state.

A stored key starts with one flag per state of ``ALL_STATES`` (``1110100|echo:order-42``
guards waiting, pending, processing and failed). Every write that moves a job to a state whose
flag is 0 clears the key in the same UPDATE (``keep_key_if``), so a new job may take it. This
is the engine's part of unique jobs: every state change writes it; ``features/unique.py`` (the
feature) builds keys and inserts the jobs that carry them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db import models
from django.db.models import Case, F, Value, When
from django.db.models.functions import Substr
from django.db.models.lookups import Exact

from django_jobs.core.shelves import FINISHED
from django_jobs.core.states import JobStatus

# The order of the flags stored in every unique key: never reorder, only append.
ALL_STATES = (
    JobStatus.WAITING, JobStatus.PENDING, JobStatus.PROCESSING, JobStatus.COMPLETED,
    JobStatus.FAILED, JobStatus.DEAD, JobStatus.CANCELED,
)


def guards_finished(key: str) -> bool:
    """Whether the stored ``key`` is held by a completed, dead or canceled job too: it then
    stays on a finished row, on that job's prune day (``core/shelves.py``)."""
    return any(key[ALL_STATES.index(state)] == "1" for state in FINISHED)


def state_flags(states: Sequence[str]) -> str:
    """One character per state of ALL_STATES: 1 if the key is held in it."""
    return "".join("1" if state in states else "0" for state in ALL_STATES)


@functools.cache
def keep_key_if(status: str) -> Case:
    """The UPDATE value of ``unique_key`` for jobs moving to ``status``: kept if guarded.

    Built once per status: building it cost 13% of a busy worker's time, and ``update()``
    resolves a copy of it, so one instance can serve every call.
    """
    position = ALL_STATES.index(status) + 1
    return Case(
        When(Exact(Substr("unique_key", position, 1), Value("1")), then=F("unique_key")),
        default=Value(None),
        output_field=models.CharField(),
    )
