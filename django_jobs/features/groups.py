"""Groups: a set of jobs enqueued together, and a callback job run once when all have ended.

    from django_jobs import enqueue_group

    group = enqueue_group(
        "import 2026-11-29",
        [("import_file", {"file": name}) for name in files],   # (type, payload[, options])
        callback="import_done", callback_payload={"day": "2026-11-29"},
    )

Each job of the group carries its ``group`` (``Job.group_id``). The ``Groups`` hooks count a
job of a group in the transaction that ends it (completed, dead or canceled: a worker's
finish, a cancel, a rescue, a dependency's policy): one ``UPDATE`` of the group's row adds to
its counters and locks it, so the ends of two jobs of one group are counted one after the
other, and the transaction that counts the last one sees the others' and enqueues the callback
job, recording its id in the group's row. Counting and callback commit or roll back with the
job's end: a worker killed before its commit leaves neither, and the rescue's end of that job
counts it once. A retry of a dead or canceled job of the group (``reopen``) takes it out of the
counts again; a group whose callback was enqueued never enqueues another.

The callback's payload holds the group's counts and id, not its jobs' ids: its size does not
grow with the group, so ``enqueue_group`` checks it at its largest before anything is written,
and the callback reads the ids it needs with ``group_jobs``. The callback's enqueue runs in a
savepoint (``engine/feature_writes.py``): if it is refused all the same (a deploy that lowered
``MAX_PAYLOAD_BYTES`` or removed the callback's handler since), the job's end stands, and the
group is finished with no callback and the refusal in its ``error`` (logged, counted); a retry
of one of its jobs that ends again tries the callback again.

A finish of a job without a group reads only its ``group_id`` (``marks``): no query.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.db.models import F

from django_jobs.core import clock, contract
from django_jobs.core.contract import EnqueueOptions
from django_jobs.core.states import JobStatus
from django_jobs.core.validation import check_payload, enqueue_fields
from django_jobs.engine.feature_writes import guarded
from django_jobs.engine.hooks import Feature
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job, JobGroup, JobGroupMember
from django_jobs.models.groups import GROUP_ID_PREFIX

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from django_jobs.core.json_rules import JSONValue
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models.managers import JobManager, JobQuerySet

COUNTED = (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELED)
# Options a job of a group may not have: a unique key may answer with another job, outside
# the group; the group is set by the group.
REFUSED_OPTIONS = ("unique_key", "unique_states", "unique_for", "group_id")
CALLBACK_OPTIONS = ("priority", "queue", "delay", "max_attempts", "callback_url")
# A group's jobs are inserted and linked this many at a time (one statement each).
BATCH = 5000


def job_specs(jobs: Iterable[object]) -> list[tuple[str, JSONValue, dict[str, Any]]]:
    """``(type, payload)`` or ``(type, payload, options)`` items as triples; InvalidJob on
    anything else."""
    specs = []
    for item in jobs:
        if not isinstance(item, tuple | list) or len(item) not in (2, 3):
            raise InvalidJob({"jobs": f"each job is (type, payload[, options]), not {item!r}"})
        type, payload = item[0], item[1]
        options = item[2] if len(item) == 3 else {}
        if not isinstance(options, Mapping):
            raise InvalidJob({"jobs": f"a job's options must be a mapping, not {options!r}"})
        refused = [name for name in REFUSED_OPTIONS if name in options]
        if refused:
            raise InvalidJob({"jobs": f"a job of a group cannot have {', '.join(refused)}"})
        specs.append((type, payload, dict(options)))
    if not specs:
        raise InvalidJob({"jobs": "a group needs at least one job"})
    return specs


def enqueue_group(
    name: str,
    jobs: Iterable[object],
    *,
    callback: str,
    callback_payload: Mapping[str, JSONValue] | None = None,
    callback_options: Mapping[str, JSONValue] | None = None,
    using: str | None = None,
) -> JobGroup:
    """Enqueue ``jobs`` as one group, in one transaction (the caller's, if it has one).

    ``jobs`` holds ``(type, payload)`` or ``(type, payload, options)``, the options those of
    ``Job.enqueue`` but unique keys. When every job of the group has ended (completed, dead
    or canceled), a job of type ``callback`` is enqueued once, with ``callback_options``
    (``priority``, ``queue``, ``delay``, ``max_attempts``, ``callback_url``) and as payload
    ``callback_payload`` with a ``"group"`` key: the group's public id, name, total and counts
    of completed, dead and canceled jobs (``group_jobs`` reads the jobs themselves). Raises
    InvalidJob (UnknownJobType) on bad input, before anything is written: a callback payload
    that would be over ``MAX_PAYLOAD_BYTES`` once the group's counts are added is one.
    """
    if not isinstance(name, str) or len(name) > 200:
        raise InvalidJob({"name": "must be a string of at most 200 characters"})
    specs = job_specs(jobs)
    payload, options = _callback(callback, callback_payload, callback_options, name, len(specs))
    db = Job.objects.db_manager(using).db
    engine = contract.engine(db)
    with transaction.atomic(using=db):
        group = JobGroup.objects.using(db).create(
            name=name, callback_type=callback, callback_payload=payload,
            callback_options=options, created_at=clock.now(db))
        created: list[Job] = []
        for type, job_options, payloads in batches(specs):
            given = EnqueueOptions(group_id=group.pk, **job_options)
            if len(payloads) == 1:
                created.append(engine.enqueue(type, payloads[0], given))
            else:
                created += engine.enqueue_many(type, payloads, given)
        JobGroupMember.objects.using(db).bulk_create(
            [JobGroupMember(group=group, job=job) for job in created], batch_size=BATCH)
        # The total last: a job that ended during the enqueue (a dependency's policy) was
        # counted, but a group with no total does not finish (``count``).
        JobGroup.objects.using(db).filter(pk=group.pk).update(total=len(created))
        finish_if_done(db, group.pk, clock.now(db))
    group.refresh_from_db()
    return group


def _callback(callback: str, callback_payload: object, callback_options: object, name: str,
              total: int) -> tuple[dict[str, JSONValue], dict[str, Any]]:
    """The callback's payload and options, checked now (used when the group ends); the payload
    at its largest, every count the total, must fit ``MAX_PAYLOAD_BYTES``."""
    if not isinstance(callback_payload, Mapping | None) or "group" in (callback_payload or {}):
        raise InvalidJob({"callback_payload": "must be a mapping without a 'group' key"})
    payload = check_payload(dict(callback_payload or {}))
    if not isinstance(callback_options, Mapping | None):
        raise InvalidJob({"callback_options": "must be a mapping"})
    options = dict(callback_options or {})
    unknown = set(options) - set(CALLBACK_OPTIONS)
    if unknown:
        raise InvalidJob({"callback_options": f"unknown: {', '.join(sorted(unknown))}"})
    enqueue_fields(callback, **options)
    largest = callback_payload_of(payload, GROUP_ID_PREFIX + "f" * 20, name, *[total] * 4)
    try:
        check_payload(largest)
    except InvalidJob as exc:
        raise InvalidJob({"callback_payload": "with the group's summary added: "
                          + " ".join(exc.messages)}) from None
    return payload, options


def batches(specs: list[tuple[str, JSONValue, dict[str, Any]]]
            ) -> list[tuple[str, dict[str, Any], list[JSONValue]]]:
    """Runs of jobs of one type with the same options, in order, at most ``BATCH`` each: one
    insert each."""
    runs: list[tuple[str, dict[str, Any], list[JSONValue]]] = []
    for type, payload, options in specs:
        if runs and runs[-1][0] == type and runs[-1][1] == options and \
                len(runs[-1][2]) < BATCH:
            runs[-1][2].append(payload)
        else:
            runs.append((type, options, [payload]))
    return runs


def callback_payload_of(payload: Mapping[str, JSONValue] | None, public_id: str, name: str,
                        total: int, completed: int, dead: int, canceled: int
                        ) -> dict[str, JSONValue]:
    """The callback job's payload: the caller's, with the group's summary as ``"group"``."""
    return {**(payload or {}), "group": {
        "id": public_id, "name": name, "total": total,
        "completed": completed, "dead": dead, "canceled": canceled,
    }}


def group_jobs(group: JobGroup | str | int, status: str | None = None,
               using: str | None = None) -> QuerySet[Job]:
    """The jobs of a group (a ``JobGroup``, its public id as the callback's payload has it,
    or its primary key), ``status`` alone if given, in the order they were enqueued; read
    through the group's members, so a pruned job is not among them. For a callback::

        for job in group_jobs(payload["group"]["id"], "dead").iterator():
            ...

    Raises JobGroup.DoesNotExist for a public id no group has."""
    manager = Job.objects.db_manager(using)
    if isinstance(group, str):
        group = JobGroup.objects.using(manager.db).only("pk").get(public_id=group)
    group_id = group.pk if isinstance(group, JobGroup) else group
    members = JobGroupMember.objects.using(manager.db).filter(group_id=group_id)
    jobs = manager.filter(pk__in=members.values("job_id"))
    if status is not None:
        jobs = jobs.filter(status=status)
    return jobs.order_by("pk")


def count(using: str, jobs: Sequence[Job], now: datetime) -> None:
    """In the transaction that ended them: add these jobs to their groups' counts, and
    finish each group whose jobs have all ended. Groups in id order, so that two transactions
    lock them in the same order."""
    by_group: dict[int, Counter[str]] = defaultdict(Counter)
    for job in jobs:
        if job.group_id is not None and job.status in COUNTED:
            by_group[job.group_id][job.status] += 1
    groups = JobGroup.objects.using(using)
    for group_id in sorted(by_group):
        ended = by_group[group_id]
        added = {name: F(name) + ended[name] for name in COUNTED}
        # One statement while jobs are left after these (it locks the group's row until
        # commit; the database decides the condition on the row as it is once locked): the
        # group is not done and needs no read. Otherwise the same count, and the read.
        if groups.filter(pk=group_id, total__gt=F("completed") + F("dead") + F("canceled")
                         + sum(ended.values())).update(**added):
            continue
        groups.filter(pk=group_id).update(**added)
        last = next(job for job in reversed(jobs) if job.group_id == group_id)
        finish_if_done(using, group_id, now, last)


def finish_if_done(using: str, group_id: int, now: datetime,
                   ended: Job | None = None) -> Job | None:
    """If the group (its row locked by the caller) has a total, all its jobs ended and no
    callback yet: enqueue the callback job and record it; returns it. After the end of the
    job ``ended`` (a finish, a cancel, a rescue) the enqueue is ``guarded``: refused, it leaves the
    group finished with its ``error`` and returns None; at the group's own enqueue
    (``ended`` None) the refusal is raised."""
    groups = JobGroup.objects.using(using)
    group = groups.filter(pk=group_id).first()
    if group is None or not group.total or group.ended < group.total or \
            group.callback_job_id is not None:
        return None
    payload = callback_payload_of(group.callback_payload, group.public_id, group.name,
                                  group.total, group.completed, group.dead, group.canceled)
    manager = Job.objects.db_manager(using)
    if ended is None:
        callback = manager.enqueue(group.callback_type, payload, **group.callback_options)
    else:
        with guarded(using, "groups", f"the callback job of group {group.public_id}",
                     ended) as failure:
            callback = manager.enqueue(group.callback_type, payload, **group.callback_options)
        if failure:
            groups.filter(pk=group_id, callback_job_id__isnull=True).update(
                error=failure.error, finished_at=now)
            return None
    groups.filter(pk=group_id, callback_job_id__isnull=True).update(
        callback_job_id=callback.pk, finished_at=now, error=None)
    return callback


def reopen(retried: JobQuerySet) -> None:
    """Before a retry: take its dead and canceled jobs of groups out of their groups' counts
    (the rows locked first, so that two retries of one job count it once)."""
    ended = retried.filter(group__isnull=False, status__in=(JobStatus.DEAD, JobStatus.CANCELED))
    if connections[retried.db].features.has_select_for_update:
        ended = ended.select_for_update()
    found: dict[int, Counter[str]] = defaultdict(Counter)
    for group_id, status in ended.order_by("pk").values_list("group_id", "status"):
        found[group_id][status] += 1
    groups = JobGroup.objects.using(retried.db)
    for group_id in sorted(found):
        left = found[group_id]
        groups.filter(pk=group_id).update(dead=F("dead") - left[JobStatus.DEAD],
                                          canceled=F("canceled") - left[JobStatus.CANCELED])


class Groups(Feature):
    """The hooks of groups: count a job of a group where it ends (finish, cancel, rescue,
    a dependency's policy) and where a retry takes it back (``reopen``)."""

    name = "groups"
    late_in_turn = True  # every job's end locks its group's row: after the turn's claim
    marks = ("group_id",)

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        ended = [o.job for o in written if o.job.group_id is not None and o.kind in COUNTED]
        if ended:
            count(manager.db, ended, now)

    def hold_for_cancel(self, cancelable: JobQuerySet) -> list[Job]:
        """The jobs of groups, locked (where the database can) until commit."""
        grouped = cancelable.filter(group__isnull=False)
        if connections[cancelable.db].features.has_select_for_update:
            grouped = grouped.select_for_update()
        return list(grouped)

    def ended(self, jobs: Sequence[Job], using: str) -> None:
        if any(job.group_id is not None for job in jobs):
            count(using, jobs, clock.now(using))

    def reopen(self, retried: JobQuerySet) -> None:
        reopen(retried)
