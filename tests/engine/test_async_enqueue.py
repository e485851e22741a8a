"""Job.aenqueue and aenqueue_many: enqueue from async code, in the caller's transaction.

pytest-asyncio is not among the test dependencies: each test drives its coroutine with
``async_to_sync``, as Django's own sync callers of async code do."""

import sys

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import SynchronousOnlyOperation
from django.db import transaction
from django.test import AsyncClient

from django_jobs import InvalidJob, UnknownJobType
from django_jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


class Boom(Exception):
    pass


def test_aenqueue_writes_a_pending_job():
    job = async_to_sync(Job.aenqueue)("echo", {"a": 1}, priority="high", queue="mail")
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == Job.Status.PENDING
    assert (stored.payload, stored.priority, stored.queue) == ({"a": 1}, 10, "mail")


def test_aenqueue_many_writes_one_job_per_payload():
    jobs = async_to_sync(Job.aenqueue_many)("echo", [{"n": n} for n in range(3)], queue="bulk")
    assert len(jobs) == 3
    assert sorted(j.payload["n"] for j in Job.objects.filter(queue="bulk")) == [0, 1, 2]


def test_the_managers_aenqueue_and_aenqueue_many_write_too():
    async def both():
        await Job.objects.aenqueue("echo", {"n": 0})
        await Job.objects.aenqueue_many("echo", [{"n": 1}, {"n": 2}])

    async_to_sync(both)()
    assert sorted(j.payload["n"] for j in Job.objects.all()) == [0, 1, 2]


def test_sync_enqueue_in_async_code_is_refused_by_django():
    """What ``aenqueue`` is for: Django refuses a query made on the event loop's thread."""
    async def enqueue():
        Job.enqueue("echo")

    with pytest.raises(SynchronousOnlyOperation):
        async_to_sync(enqueue)()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("call", "field"), [
    (lambda: Job.aenqueue("echo", {"bad": object()}), "payload"),
    (lambda: Job.aenqueue("echo", {}, priority="urgent"), "priority"),
    (lambda: Job.aenqueue_many("echo", [{"n": 1}, {"n": 2}, {"bad": {1, 2}}]), "payload"),
    (lambda: Job.objects.aenqueue_many("echo", [{"n": 1}], delay=-1), "delay"),
])
def test_invalid_input_raises_in_the_caller_and_writes_nothing(call, field):
    async def run():
        return await call()

    with pytest.raises(InvalidJob) as info:
        async_to_sync(run)()
    assert field in info.value.message_dict
    assert not Job.objects.exists()


def test_an_unknown_type_raises_and_writes_nothing():
    with pytest.raises(UnknownJobType):
        async_to_sync(Job.aenqueue)("no_such_type", {})
    assert not Job.objects.exists()


def test_a_rolled_back_unit_of_work_run_with_sync_to_async_leaves_no_job():
    """The documented way: the whole unit of work, one sync function in one atomic block."""
    def place_order(n):
        with transaction.atomic():
            Job.enqueue("echo", {"n": n})
            if n < 0:
                raise Boom

    async def view(n):
        await sync_to_async(place_order)(n)

    with pytest.raises(Boom):
        async_to_sync(view)(-1)
    assert not Job.objects.exists()
    async_to_sync(view)(1)
    assert [j.payload for j in Job.objects.all()] == [{"n": 1}]


def test_aenqueue_inside_an_atomic_block_opened_with_sync_to_async_rolls_back_with_it():
    """``aenqueue`` runs on the thread-sensitive thread, where ``sync_to_async`` opened the
    transaction: the job is written in it, and the rollback takes it away. Were it written
    on a connection of its own, it would have committed."""
    async def enqueue_in_atomic(fail):
        atomic = transaction.atomic()
        await sync_to_async(atomic.__enter__)()
        try:
            job = await Job.aenqueue("echo", {"fail": fail})
            assert await Job.objects.filter(pk=job.pk).aexists()
            if fail:
                raise Boom
        except BaseException:
            await sync_to_async(atomic.__exit__)(*sys.exc_info())
            raise
        await sync_to_async(atomic.__exit__)(None, None, None)

    with pytest.raises(Boom):
        async_to_sync(enqueue_in_atomic)(True)
    assert not Job.objects.exists()
    async_to_sync(enqueue_in_atomic)(False)
    assert [j.payload for j in Job.objects.all()] == [{"fail": False}]


def test_an_async_view_enqueues_through_django_s_async_request_handler():
    """Through ``AsyncClient`` (Django's async handler; no ASGI server is among the test
    dependencies), to an ``async def`` view in tests/urls.py."""
    response = async_to_sync(AsyncClient().get)("/async-enqueue/", {"n": 7})
    assert response.status_code == 200
    job = Job.objects.get(public_id=response.json()["id"])
    assert job.payload == {"n": 7} and job.status == Job.Status.PENDING
