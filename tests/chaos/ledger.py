"""The run ledger: what the handler really did, checked against what the database recorded.

The ``chaos_record`` handler (tests/jobs.py) appends one line per run to a file opened with
``O_APPEND``, written in one ``write()``: a ``kill -9`` leaves whole lines, and the file does not
depend on the database being up. ``verify`` then holds every job to the queue's promise:

- it completed, with exactly one completed attempt;
- every run of its handler belongs to an attempt the database recorded;
- it ran more than once only as often as an attempt of it was interrupted (its worker was
  killed or cut off and the attempt was recorded as lost): ``runs - 1 <= interrupted``.

The check reads outcomes, never worker internals: "interrupted" is every attempt outcome that is
not one of the ends a handler or a person chooses, so an outcome added later for crashed
workers counts as one too.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

RAN = "ran"
RETURNED = "returned"


def note(log: str, event: str, public_id: str, attempt: int) -> None:
    """Append one whole line to the run log in a single ``write()`` (O_APPEND)."""
    line = f"{event} {public_id} {attempt} {os.getpid()}\n".encode()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Run:
    event: str
    public_id: str
    attempt: int
    pid: int


def read_runs(log: Path | str) -> list[Run]:
    path = Path(log)
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        event, public_id, attempt, pid = line.split(" ")
        runs.append(Run(event, public_id, int(attempt), int(pid)))
    return runs


def count_runs(log: Path | str) -> int:
    path = Path(log)
    return path.read_bytes().count(b"ran ") if path.exists() else 0


@dataclass
class AttemptRecord:
    number: int
    outcome: str
    worker_id: str


@dataclass
class JobRecord:
    public_id: str
    status: str
    attempt: int
    worker_id: str
    result: object
    attempts: list[AttemptRecord] = field(default_factory=list)


def collect(using: str = "default") -> dict[str, JobRecord]:
    """Every job of the database and its attempt rows, read through the ORM."""
    from django_jobs.models import Job, JobAttempt

    records: dict[str, JobRecord] = {}
    by_pk: dict[int, JobRecord] = {}
    rows = Job.objects.using(using).values_list(
        "pk", "public_id", "status", "attempt", "worker_id", "result"
    )
    for pk, public_id, status, attempt, worker_id, result in rows.iterator(chunk_size=5000):
        by_pk[pk] = records[public_id] = JobRecord(public_id, status, attempt, worker_id, result)
    attempts = JobAttempt.objects.using(using).order_by("job_id", "number", "id")
    for job_id, number, outcome, worker_id in attempts.values_list(
        "job_id", "number", "outcome", "worker_id"
    ).iterator(chunk_size=5000):
        by_pk[job_id].attempts.append(AttemptRecord(number, outcome, worker_id))
    return records


def records_to_json(records: dict[str, JobRecord]) -> str:
    return json.dumps([asdict(record) for record in records.values()])


def records_from_json(text: str) -> dict[str, JobRecord]:
    records = {}
    for item in json.loads(text):
        attempts = [AttemptRecord(**attempt) for attempt in item.pop("attempts")]
        records[item["public_id"]] = JobRecord(**item, attempts=attempts)
    return records


def interrupted_outcomes() -> frozenset[str]:
    """Attempt outcomes that mean "the attempt was cut short, not ended by its handler"."""
    from django_jobs.models import JobAttempt

    out = JobAttempt.Outcome
    ended = {out.COMPLETED, out.FAILED, out.DEAD, out.CANCELED, out.RELEASED, out.SNOOZED}
    return frozenset(str(value) for value in out.values if value not in ended)


@dataclass
class Figures:
    jobs: int = 0
    runs: int = 0
    jobs_run_twice_or_more: int = 0
    extra_runs: int = 0
    interrupted_attempts: int = 0
    interrupted_before_the_handler_ran: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def verify(records: dict[str, JobRecord], runs: Iterable[Run]) -> Figures:
    """Assert the promise above for every job; return the figures of the run."""
    interrupted = interrupted_outcomes()
    assert interrupted, "no attempt outcome stands for an interrupted attempt"
    ran: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if run.event == RAN:
            ran[run.public_id].append(run)
    figures = Figures(jobs=len(records))
    problems = [f"{public_id}: ran {len(r)} time(s) but is not in the database"
                for public_id, r in ran.items() if public_id not in records]
    for public_id, job in records.items():
        mine = ran.get(public_id, [])
        numbers = {a.number for a in job.attempts}
        completed = [a for a in job.attempts if a.outcome == "completed"]
        cut_short = sum(1 for a in job.attempts if a.outcome in interrupted)
        figures.runs += len(mine)
        figures.interrupted_attempts += cut_short
        figures.extra_runs += max(len(mine) - 1, 0)
        figures.jobs_run_twice_or_more += len(mine) > 1
        figures.interrupted_before_the_handler_ran += max(cut_short - (len(mine) - 1), 0)
        summary = f"{public_id}: status {job.status}, runs {[r.attempt for r in mine]}, " \
                  f"attempts {[(a.number, a.outcome, a.worker_id) for a in job.attempts]}"
        if job.status != "completed" or len(completed) != 1:
            problems.append(f"not completed exactly once: {summary}")
        elif not mine:
            problems.append(f"completed without a recorded run: {summary}")
        elif len(mine) - 1 > cut_short:
            problems.append(f"ran more often than its interrupted attempts explain: {summary}")
        elif any(r.attempt not in numbers for r in mine):
            problems.append(f"a run belongs to no recorded attempt: {summary}")
        elif completed[0].number not in {r.attempt for r in mine}:
            problems.append(f"the completed attempt never ran the handler: {summary}")
    assert not problems, f"{len(problems)} job(s) broke the promise:\n" + "\n".join(problems[:20])
    return figures
