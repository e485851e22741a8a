"""The prune statement on PostgreSQL (``engine/postgres/prune.py``) leaves every table as
Django's delete of the same batch does: on generated graphs of jobs with dependencies both
ways, attempts, idempotency keys and schedules pointing at them, with any batch size; and a
site that listens for deletes, or points at jobs with an ``on_delete`` of its own, gets
Django's delete."""

from datetime import timedelta

import pytest
from django.db import connection, models, transaction
from django.db.models.signals import post_delete
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_jobs.engine import engine_for
from django_jobs.engine.postgres import prune
from django_jobs.engine.staff import StaffVerbs
from django_jobs.features.retention import prunable
from django_jobs.models import Job, JobAttempt, JobDependency, Schedule, ScheduleOccurrence
from django_jobs.models.tokens import IdempotencyKey
from tests.admin_helpers import add_attempt, make_job

pytestmark = pytest.mark.django_db

STATUSES = ["completed", "dead", "canceled", "pending", "waiting"]


@pytest.fixture(autouse=True)
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement prune is PostgreSQL's")


def tables() -> dict[str, list[tuple]]:
    """Every row the prune may touch, in a comparable form."""
    return {
        "jobs": sorted(Job.objects.values_list("id", "status")),
        "attempts": sorted(JobAttempt.objects.values_list("id", "job_id")),
        "links": sorted(JobDependency.objects.values_list(
            "id", "job_id", "depends_on_id", "deleted_status", "name")),
        "keys": sorted(IdempotencyKey.objects.values_list("id", "job_id")),
        "schedules": sorted(Schedule.objects.values_list("name", "last_job_id")),
        "occurrences": sorted(ScheduleOccurrence.objects.values_list("id", "job_id")),
    }


@st.composite
def graphs(draw):
    count = draw(st.integers(1, 7))
    statuses = draw(st.lists(st.sampled_from(STATUSES), min_size=count, max_size=count))
    pairs = [(a, b) for a in range(count) for b in range(count) if a != b]
    links = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=8)) if pairs else []
    return {
        "statuses": statuses,
        "links": links,
        "attempts": draw(st.lists(st.integers(0, 2), min_size=count, max_size=count)),
        "keys": draw(st.lists(st.integers(0, count - 1), max_size=3)),
        "last_jobs": draw(st.lists(st.none() | st.integers(0, count - 1), max_size=2)),
        "occurrences": draw(st.lists(st.none() | st.integers(0, count - 1), max_size=3)),
        "chosen": draw(st.sets(st.sampled_from(STATUSES), min_size=1)),
        "limit": draw(st.integers(1, count + 1)),
    }


def build(graph) -> None:
    start = timezone.now() - timedelta(days=3)
    jobs = [make_job(status, created_at=start + timedelta(seconds=n % 3))
            for n, status in enumerate(graph["statuses"])]
    for job, attempts in zip(jobs, graph["attempts"], strict=True):
        for number in range(1, attempts + 1):
            add_attempt(job, "failed", number=number)
    for n, (a, b) in enumerate(graph["links"]):
        JobDependency.objects.create(job=jobs[a], depends_on=jobs[b],
                                     name=f"step{n}" if n % 2 else None)
        Job.objects.filter(pk=jobs[b].pk).update(has_dependents=True)
    for n, index in enumerate(graph["keys"]):
        IdempotencyKey.objects.create(owner="token:1", key=f"k{n}", request_hash="h",
                                      job=jobs[index], expires_at=timezone.now())
    for n, index in enumerate(graph["last_jobs"]):
        Schedule.objects.create(name=f"s{n}", last_job=None if index is None else jobs[index])
    schedule = Schedule.objects.create(name="occurring")
    for n, index in enumerate(graph["occurrences"]):
        ScheduleOccurrence.objects.create(schedule=schedule, at=start + timedelta(minutes=n),
                                          job=None if index is None else jobs[index])


def after(delete, graph) -> tuple[int, dict[str, list[tuple]]]:
    """What ``delete`` returns and leaves, undone afterwards."""
    saved = transaction.savepoint()
    try:
        deleted = delete(Job.objects.filter(status__in=graph["chosen"]), graph["limit"])
        return deleted, tables()
    finally:
        transaction.savepoint_rollback(saved)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs())
def test_the_statement_leaves_every_table_as_djangos_delete_does(graph):
    plain = StaffVerbs.delete_batch.__get__(engine_for(Job.objects.db))
    with transaction.atomic():
        build(graph)
        expected = after(plain, graph)
        assert after(prune.delete_batch, graph) == expected
        transaction.set_rollback(True)


def test_the_engine_prunes_by_the_statement_and_keeps_a_waited_on_dead_job():
    """Through ``delete_batch``, as workers prune: the links of a pruned completed job stay,
    met, and a dead job a waiting job depends on is kept."""
    old = timezone.now() - timedelta(days=40)
    done = make_job("completed", finished_at=old, created_at=old)
    dead = make_job("dead", finished_at=old, created_at=old, has_dependents=True)
    waiting = make_job("waiting")
    JobDependency.objects.create(job=waiting, depends_on=done, name="report")
    JobDependency.objects.create(job=waiting, depends_on=dead)
    add_attempt(done, "completed")
    assert prune.plan(Job) is not None
    assert prunable("completed", timedelta(days=7)).delete_batch(10) == 1
    assert prunable("dead", timedelta(days=7)).delete_batch(10) == 0
    assert set(JobDependency.objects.values_list("depends_on_id", "deleted_status")) == {
        (None, "completed"), (dead.pk, "")}
    assert not JobAttempt.objects.filter(job_id=done.pk).exists()


def test_a_site_listening_for_deletes_gets_djangos_delete():
    seen = []

    def record(sender, instance, **kwargs):
        seen.append(instance.job_id)

    job = make_job("completed")
    add_attempt(job, "completed")
    post_delete.connect(record, sender=JobAttempt)
    try:
        assert prune.plan(Job) is None
        assert Job.objects.filter(pk=job.pk).delete_batch(10) == 1
    finally:
        post_delete.disconnect(record, sender=JobAttempt)
    assert seen == [job.pk]
    assert prune.plan(Job) is not None


def test_a_relation_with_an_on_delete_of_its_own_gets_djangos_delete():
    """A site's model that protects the jobs it points at: the statement would not know."""
    field = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="+")
    relations = prune.pointing_at(Job)
    Guarded = type("Guarded", (models.Model,), {
        "__module__": __name__, "job": field,
        "Meta": type("Meta", (), {"app_label": "tests", "managed": False})})
    try:
        assert any(relation.related_model is Guarded for relation in prune.pointing_at(Job))
        assert prune.plan(Job) is None
    finally:
        from django.apps import apps

        del apps.all_models["tests"]["guarded"]
        apps.clear_cache()
        Job._meta._expire_cache()
    assert len(prune.pointing_at(Job)) == len(relations)
    assert prune.plan(Job) is not None
