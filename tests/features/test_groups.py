"""Groups of jobs: counted where each job ends, the callback enqueued once when all have
ended with the counts (the ids read through the group), retries taken out of the counts, bad
input refused, the admin's progress read from the group's row, and no extra query on the
finish of a job without one."""

import json
import threading

import pytest
from django.db import close_old_connections, connection
from django.test.utils import CaptureQueriesContext

from django_jobs import InvalidJob, UnknownJobType, enqueue_group, group_jobs
from django_jobs.engine import hooks
from django_jobs.engine.postgres import partitions
from django_jobs.features.groups import Groups
from django_jobs.models import Job, JobGroup, JobGroupMember
from django_jobs.worker.execution import run_job
from tests.admin_helpers import job_url, staff
from tests.conftest import requires_row_locks


def run_once(job: Job) -> Job:
    """Claim ``job`` (alone in its queue), run it here as a worker does, write its outcome."""
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30,
                                   queues=[job.queue])
    assert claimed.pk == job.pk
    Job.objects.finish([run_job(claimed)])
    claimed.refresh_from_db()
    return claimed


def q(name: str) -> dict:
    return {"queue": name}

pytestmark = pytest.mark.django_db(transaction=True)
GROUPS = "/admin/django_jobs/jobgroup/"


def group_of(group: JobGroup) -> JobGroup:
    return JobGroup.objects.get(pk=group.pk)


def callbacks() -> list[Job]:
    return list(Job.objects.filter(type="record"))


def members(group: JobGroup) -> list[Job]:
    return list(Job.objects.filter(group_id=group.pk).order_by("pk"))


def test_the_callback_is_enqueued_once_when_the_last_job_ends_with_counts_and_reads_ids():
    group = enqueue_group("nightly", [("echo", {"n": 1}, q("a")), ("echo", {"n": 2}, q("b")),
                                      ("permanent", {}, q("c")),
                                      ("echo", {"n": 3}, {"delay": 3600})],
                          callback="record", callback_payload={"day": "2026-11-29"},
                          callback_options={"queue": "reports", "priority": "high"})
    assert (group.total, group.remaining, group.public_id[:2]) == (4, 4, "g-")
    first, second, doomed, later = members(group)
    assert {m.job_id for m in JobGroupMember.objects.filter(group=group)} == {
        first.pk, second.pk, doomed.pk, later.pk}
    run_once(first)
    run_once(doomed)
    assert later.cancel()
    counted = group_of(group)
    assert (counted.completed, counted.dead, counted.canceled, counted.remaining) == (1, 1, 1, 1)
    assert callbacks() == [] and counted.callback_job_id is None
    run_once(second)
    counted = group_of(group)
    (callback,) = callbacks()
    assert counted.callback_job_id == callback.pk and counted.finished_at is not None
    assert (callback.queue, callback.priority) == ("reports", 10)
    assert callback.payload == {"day": "2026-11-29", "group": {
        "id": group.public_id, "name": "nightly", "total": 4,
        "completed": 2, "dead": 1, "canceled": 1}}
    # The callback reads the ids through the group
    read = callback.payload["group"]["id"]
    assert [j.public_id for j in group_jobs(read, "completed")] == [first.public_id,
                                                                     second.public_id]
    assert [j.public_id for j in group_jobs(read, "dead")] == [doomed.public_id]
    assert [j.pk for j in group_jobs(group)] == [first.pk, second.pk, doomed.pk, later.pk]


def test_a_retried_job_leaves_the_counts_and_a_finished_group_calls_back_only_once():
    group = enqueue_group("retry", [("permanent", {}, q("a")), ("echo", {}, q("b"))],
                          callback="record")
    doomed, ok = members(group)
    run_once(doomed)
    assert group_of(group).dead == 1
    assert doomed.retry()
    assert group_of(group).dead == 0
    Job.objects.filter(pk=doomed.pk).update(type="echo")  # the handler was fixed
    run_once(ok)
    assert callbacks() == []
    run_once(doomed)
    counted = group_of(group)
    assert (counted.completed, counted.dead) == (2, 0) and len(callbacks()) == 1


def test_a_finished_group_calls_back_only_once_whatever_its_jobs_do_next():
    group = enqueue_group("again", [("permanent", {}, q("a"))], callback="record")
    (doomed,) = members(group)
    run_once(doomed)
    assert (group_of(group).dead, len(callbacks())) == (1, 1)
    assert doomed.retry()
    assert (group_of(group).dead, group_of(group).remaining) == (0, 1)
    run_once(doomed)
    assert (group_of(group).dead, len(callbacks())) == (1, 1)


def test_the_jobs_of_a_group_killed_by_a_rescue_or_a_policy_are_counted():
    dependency = Job.enqueue("permanent", queue="d")
    group = enqueue_group("policy", [
        ("echo", {}, {"depends_on": [dependency], "on_dependency_failure": "cancel"}),
    ], callback="record")
    (member,) = members(group)
    assert member.status == "waiting"
    run_once(dependency)
    counted = group_of(group)
    assert (counted.canceled, counted.remaining, len(callbacks())) == (1, 0, 1)


def test_a_group_whose_jobs_all_ended_at_enqueue_calls_back_at_once():
    dead = run_once(Job.enqueue("permanent"))
    group = enqueue_group("at once", [
        ("echo", {}, {"depends_on": [dead], "on_dependency_failure": "cancel"}),
    ], callback="record")
    assert (group.canceled, group.total, group.remaining) == (1, 1, 0)
    (callback,) = callbacks()
    assert group.callback_job_id == callback.pk


@pytest.mark.parametrize(("jobs", "options", "field"), [
    ([], {}, "jobs"),
    (["echo"], {}, "jobs"),
    ([("echo", {}, {"unique_key": "k"})], {}, "jobs"),
    ([("echo", {}, {"group_id": 1})], {}, "jobs"),
    ([("echo", {})], {"callback": "no_such_type"}, "type"),
    ([("no_such_type", {})], {}, "type"),
    ([("echo", {})], {"callback_payload": {"group": 1}}, "callback_payload"),
    ([("echo", {})], {"callback_options": {"depends_on": [1]}}, "callback_options"),
    ([("echo", {})], {"callback_options": ["queue"]}, "callback_options"),
    ([("echo", {})], {"callback_payload": ["not", "a", "mapping"]}, "callback_payload"),
    ([("echo", {})], {"callback_options": {"max_attempts": 0}}, "max_attempts"),
])
def test_bad_input_is_refused_and_writes_nothing(jobs, options, field):
    with pytest.raises(InvalidJob) as err:
        enqueue_group("bad", jobs, **{"callback": "record", **options})
    assert field in err.value.message_dict
    assert not Job.objects.exists() and not JobGroup.objects.exists()


def test_a_callback_payload_that_fits_alone_but_not_with_the_groups_counts_is_refused(settings):
    payload = {"pad": "x" * 500}
    alone = len(json.dumps(payload, separators=(",", ":")).encode())
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "MAX_PAYLOAD_BYTES": alone + 40}
    Job.enqueue("record", payload)  # it fits alone
    with pytest.raises(InvalidJob) as err:
        enqueue_group("too big", [("echo", {})] * 3, callback="record", callback_payload=payload)
    assert "MAX_PAYLOAD_BYTES" in err.value.message_dict["callback_payload"][0]
    assert Job.objects.count() == 1 and not JobGroup.objects.exists()


def test_the_callbacks_payload_does_not_grow_with_the_group(settings):
    """Checked at its largest at enqueue (every count the total): what is accepted fits."""
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "MAX_PAYLOAD_BYTES": 400}
    group = enqueue_group("two thousand", [("echo", {"n": n}) for n in range(2000)],
                          callback="record", callback_payload={"pad": "x" * 200})
    Job.objects.filter(group_id=group.pk).cancel()
    ended = group_of(group)
    (callback,) = callbacks()
    assert (ended.canceled, ended.callback_job_id, ended.error) == (2000, callback.pk, None)
    assert callback.payload["group"]["canceled"] == 2000
    assert group_jobs(group, "canceled").count() == 2000


def test_an_unknown_callback_type_is_an_unknown_job_type():
    with pytest.raises(UnknownJobType):
        enqueue_group("bad", [("echo", {})], callback="no_such_type")


def finish_queries(registered: bool, turn: bool) -> list[str]:
    """The statements of one finish (or finish-and-claim turn) of a job without a group or
    dependents."""
    job = Job.enqueue("echo")
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    outcome = run_job(claimed)
    features = hooks.registered()
    feature = next(f for f in features if isinstance(f, Groups))
    if not registered:
        hooks.unregister(feature)
    # The last day partitions exist for, read once in a while (engine/postgres/partitions.py),
    # read before: it is no query of this finish.
    partitions.forget()
    partitions.last_day(connection.alias)
    try:
        with CaptureQueriesContext(connection) as captured:
            if turn:
                assert Job.objects.finish_and_claim(
                    [outcome], worker_id="w", limit=1, lease_seconds=30) == ([outcome], [])
            else:
                assert Job.objects.finish([outcome]) == [outcome]
    finally:
        if not registered:  # back in its place: the features run in the order registered
            for known in features:
                hooks.unregister(known)
            for known in features:
                hooks.register(known)
    assert Job.objects.get(pk=job.pk).status == "completed"
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize("turn", [False, True])
def test_the_finish_of_a_job_without_a_group_costs_no_query_more(turn):
    with_groups, without = finish_queries(True, turn), finish_queries(False, turn)
    assert len(with_groups) == len(without)
    assert not any("jobgroup" in sql for sql in with_groups)


@requires_row_locks
def test_the_last_two_jobs_ending_at_once_call_back_once():
    """Two finish transactions race; the group's row orders them, and the second to commit
    sees the first's end."""
    group = enqueue_group("race", [("echo", {"n": 1}), ("echo", {"n": 2})], callback="record")
    claimed = Job.objects.claim(worker_id="w", limit=2, lease_seconds=30)
    outcomes = [run_job(job) for job in claimed]
    barrier = threading.Barrier(2)
    errors = []

    def finish(outcome):
        try:
            barrier.wait()
            Job.objects.finish([outcome])
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=finish, args=(o,)) for o in outcomes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    counted = group_of(group)
    assert (counted.completed, len(callbacks())) == (2, 1)


def test_the_admin_shows_groups_with_their_progress_from_their_row(client):
    group = enqueue_group("shown", [("echo", {"n": i}, q(f"q{i}")) for i in range(3)],
                          callback="record")
    first = members(group)[0]
    run_once(first)
    client.force_login(staff("op", "view_job", "view_jobgroup"))
    with CaptureQueriesContext(connection) as captured:
        page = client.get(GROUPS).content.decode()
    assert group.public_id in page and "1 of 3 (33%)" in page
    assert not any('"django_jobs_job"' in q["sql"] or "`django_jobs_job`" in q["sql"]
                   for q in captured.captured_queries)
    page = client.get(f"{GROUPS}{group.pk}/change/").content.decode()
    assert f">{first.public_id}</a> (Completed)" in page and "record, once all have ended" in page
    page = client.get(job_url(first)).content.decode()
    assert group.public_id in page and f"{GROUPS}{group.pk}/change/" in page


def test_a_callback_refused_at_the_end_leaves_the_end_and_shows_on_the_groups_page(
        client, settings, caplog):
    group = enqueue_group("lowered since", [("echo", {"n": 1})], callback="record",
                          callback_payload={"pad": "x" * 3000})
    (job,) = members(group)
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "MAX_PAYLOAD_BYTES": 2000}  # a deploy
    with caplog.at_level("WARNING", logger="django_jobs.worker"):
        assert run_once(job).status == "completed"
    ended = group_of(group)
    assert (ended.completed, ended.callback_job_id, callbacks()) == (1, None, [])
    assert ended.finished_at is not None and "MAX_PAYLOAD_BYTES" in ended.error["message"]
    (line,) = [r for r in caplog.records if "not written after job" in r.getMessage()]
    assert line.levelname == "WARNING" and job.public_id in line.getMessage()
    client.force_login(staff("op", "view_job", "view_jobgroup"))
    page = client.get(f"{GROUPS}{group.pk}/change/").content.decode()
    assert "the callback job of group" in page and "MAX_PAYLOAD_BYTES" in page
    listed = client.get(GROUPS).content.decode()
    assert "MAX_PAYLOAD_BYTES" in listed


def test_a_retry_of_a_job_of_a_group_whose_callback_was_refused_tries_the_callback_again(
        settings):
    group = enqueue_group("again", [("permanent", {})], callback="record",
                          callback_payload={"pad": "x" * 3000})
    (job,) = members(group)
    limits = settings.DJANGO_JOBS
    settings.DJANGO_JOBS = {**limits, "MAX_PAYLOAD_BYTES": 2000}
    assert run_once(job).status == "dead"
    assert group_of(group).error is not None and callbacks() == []
    settings.DJANGO_JOBS = limits  # the limit raised again
    assert job.retry()
    assert run_once(job).status == "dead"
    ended = group_of(group)
    (callback,) = callbacks()
    assert (ended.dead, ended.callback_job_id, ended.error) == (1, callback.pk, None)


def test_a_prune_pass_drops_groups_finished_before_their_jobs_retention_with_members():
    from datetime import timedelta

    from django_jobs.features.retention import prune_groups

    done = enqueue_group("done", [("echo", {"n": 1})], callback="record")
    open_ = enqueue_group("open", [("echo", {"n": 2})], callback="record")
    run_once(members(done)[0])
    finished_at = group_of(done).finished_at
    assert finished_at is not None and group_of(open_).finished_at is None
    ages = {"completed": timedelta(days=7), "dead": timedelta(days=30),
            "canceled": timedelta(days=7)}
    assert prune_groups(ages, finished_at + timedelta(days=29), 10) == 0  # dead jobs still kept
    assert prune_groups({**ages, "dead": None}, finished_at + timedelta(days=90), 10) == 0
    assert prune_groups(ages, finished_at + timedelta(days=31), 1) == 1
    assert list(JobGroup.objects.values_list("name", flat=True)) == ["open"]
    assert not JobGroupMember.objects.filter(group_id=done.pk).exists()
    assert JobGroupMember.objects.filter(group_id=open_.pk).count() == 1
