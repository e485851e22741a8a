"""A claim that met a row moved under it, sent again at once (``claim_again_if_moved``); a
worker's turn whose claim met one, taken apart (``apart_if_moved``).

A claim is one ``READ COMMITTED`` statement that reads the ready rows its snapshot sees and
locks each with ``FOR UPDATE SKIP LOCKED``. On a table partitioned by shelf a finish moves its
row out of the open partition. When another worker claims a row *and* finishes it between the
claim's snapshot and the claim's lock of that row, PostgreSQL does not skip the row (no
transaction holds it any more) but follows its update chain into the move and refuses the
whole statement with ``SQLSTATE 40001``, "tuple to be locked was already moved to another
partition due to concurrent update" (``moved_rows.moved_row``). On a plain table the same
claim finds the row's newer version and passes over it.

That is no outage: the database is there, and other workers are taking the jobs. The longer
a claim's walk, the likelier: under a snapshot held open for long (``docs/explanation-
performance.md``), a claim from the ready index's start walks the entries of every job
claimed since, and the rows it then reaches are the ones the other workers are claiming. So:

- A claim after a key that meets a moved row is sent again at once, with a fresh snapshot,
  up to ``CLAIM_TRIES`` times in all; a claim from the start, once (``CLAIM_TRIES``). Each
  try is its own statement in its own transaction, so nothing of a failed one stays. After the
  last, ``ClaimConflict`` is raised: the worker claims again at once, after its key, its other
  steps (the heartbeat's lease renewals above all) going on as ever (``worker/turn.py``).
- A worker's turn (its outcomes written and its next jobs claimed in one transaction) whose
  claim meets a moved row loses its outcomes' writes with it. So the outcomes are then written
  alone (``finish``, itself sent once more on a moved row: ``moved_rows``), and the claim
  is sent alone as above; a ``ClaimConflict`` then carries the outcomes that were written.
- In a caller's transaction (a worker is in autocommit) the error rolls back what the caller
  wrote: it is raised as it is, as ``once_more`` does before the database is known to move
  rows.

Only on PostgreSQL, the one database that moves rows between partitions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, TypeVar

from django.db import DatabaseError, connections

from django_jobs.engine.moved_rows import MOVES_ROWS, moved_row, once_more, outermost
from django_jobs.exceptions import ClaimConflict

if TYPE_CHECKING:
    from django_jobs.core.contract import ClaimRequest
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job

# Tries of a claim after a key, the first included: it walks a few entries and almost never
# meets a moved row twice. A claim from the index's start is tried once: under a long-open
# snapshot it walks the entries of every job claimed since, each try costs that walk again,
# and the rows it reaches are the ones the other workers are taking (the worker's next claim,
# sent at once, reads after its key: ``worker/producer.py``).
CLAIM_TRIES = 3

# The databases on which a wrapped claim is running (an inner claim leaves the tries to it).
_claiming: ContextVar[frozenset[str]] = ContextVar("django_jobs_moved_claims",
                                                   default=frozenset())


def claim_again(using: str, claim: Callable[[], list[Job]], tries: int = CLAIM_TRIES
                ) -> list[Job]:
    """``claim()``, sent again while it meets a moved row, ``tries`` times in all (see the
    module)."""
    connection = connections[using]
    if (connection.vendor != "postgresql" or connection.in_atomic_block
            or using in _claiming.get()):
        return claim()
    token = _claiming.set(_claiming.get() | {using})
    try:
        for sent in range(1, tries + 1):
            try:
                return claim()
            except DatabaseError as exc:
                if not moved_row(exc):
                    raise
                MOVES_ROWS.add(using)
                if sent == tries:
                    raise ClaimConflict(sent) from exc
        raise AssertionError("unreachable")  # the loop returns or raises
    finally:
        _claiming.reset(token)


class Claims(Protocol):
    """What the wrappers need of an engine: its database, and its claim and finish."""

    db: str

    def claim(self, request: ClaimRequest) -> list[Job]: ...

    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]: ...


E = TypeVar("E", bound=Claims)
Turn = tuple[list["AttemptOutcome"], list["Job"]]


def claim_again_if_moved(
    method: Callable[[E, ClaimRequest], list[Job]],
) -> Callable[[E, ClaimRequest], list[Job]]:
    """An engine's ``claim``, sent again as ``claim_again`` says."""

    @functools.wraps(method)
    def claim(self: E, request: ClaimRequest) -> list[Job]:
        tries = CLAIM_TRIES if request.after is not None else 1  # see CLAIM_TRIES
        return claim_again(self.db, lambda: method(self, request), tries)

    return claim


def apart_if_moved(
    method: Callable[[E, Sequence[AttemptOutcome], ClaimRequest], Turn],
) -> Callable[[E, Sequence[AttemptOutcome], ClaimRequest], Turn]:
    """An engine's ``finish_and_claim``, taken apart when it meets a moved row: the outcomes
    written alone, then the claim sent alone (see the module)."""

    @functools.wraps(method)
    def turn(self: E, outcomes: Sequence[AttemptOutcome], request: ClaimRequest) -> Turn:
        connection = connections[self.db]
        if connection.vendor != "postgresql" or connection.in_atomic_block:
            return once_more(self.db, lambda: method(self, outcomes, request))
        try:
            return outermost(self.db, lambda: method(self, outcomes, request))
        except DatabaseError as exc:
            if not moved_row(exc):
                raise
            MOVES_ROWS.add(self.db)
        done = self.finish(outcomes) if outcomes else []
        try:
            return done, self.claim(request) if request.limit > 0 else []
        except ClaimConflict as conflict:
            conflict.written = done
            raise

    return turn
