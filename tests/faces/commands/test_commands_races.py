"""``manage.py jobs retry`` and ``cancel`` of one job at once (and a delete beside them) end as
some order of them gives, each answered by its output or a ``CommandError``, never another
exception; one that cannot get the job's row is a ``CommandError`` that says so."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_jobs.models import Job
from tests.conftest import requires_row_locks
from tests.races import Raised, at_once, end_state, job_in, row_held, serially, short_lock_waits

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 10  # per start state: 30 rounds of three actions


def command(verb: str, job: Job):
    def run() -> str:
        if verb == "delete":
            return "deleted" if Job.objects.filter(pk=job.pk).discard() else "kept"
        try:
            call_command("jobs", verb, job.public_id, stdout=StringIO())
        except CommandError as exc:
            return f"refused: {exc}"
        return "changed"
    return run


def answer(verb: str, status: str | None) -> str:
    if verb == "delete":
        return "kept" if status in ("processing", "requested") else "deleted"
    if status is None:
        return "gone"
    changes = {"retry": ("dead", "failed", "canceled"),
               "cancel": ("pending", "failed", "processing")}[verb]
    return "changed" if status in changes else "unchanged"


def said(text: str) -> str:
    """What a command's output or error says happened to its job."""
    if text in ("changed", "deleted", "kept"):
        return text
    if "it was deleted meanwhile" in text or text.startswith("refused: no job"):
        return "gone"
    return "unchanged"


def test_retry_cancel_and_delete_at_once_end_as_some_order_of_them():
    for start in ("failed", "dead", "canceled"):
        for _ in range(ROUNDS):
            job = job_in(start)
            verbs = ("retry", "cancel", "delete")
            results = at_once([command(verb, job) for verb in verbs])
            assert not [r for r in results if isinstance(r, Raised)], results
            seen = (end_state(job), tuple(said(str(r)) for r in results))
            assert seen in serially(start, verbs, answer), (start, seen, results)


@requires_row_locks
@pytest.mark.parametrize("verb", ["retry", "cancel"])
def test_an_action_that_cannot_get_the_job_is_a_command_error(verb):
    job = job_in("failed")
    with short_lock_waits(), row_held(job), pytest.raises(CommandError, match="same moment"):
        call_command("jobs", verb, job.public_id, stdout=StringIO())
    assert end_state(job) == "failed"
