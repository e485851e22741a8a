"""Typed handlers' verbs: ``send_email.enqueue(order_id=1)`` and its siblings write the row
``Job.enqueue`` writes, refuse a wrong argument before writing, and the handler gets its
arguments typed. The type checker sees the arguments too (mypy on a sample module)."""

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from django_jobs import InvalidJob
from django_jobs.handlers.registry import get_handler
from django_jobs.models import Job
from django_jobs.testing import run_jobs
from tests.typed_jobs import Line, Order, async_typed, geocode, notify, send_email, ship

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def test_enqueue_stores_the_arguments_as_the_payload_and_the_handler_gets_them():
    job = send_email.enqueue(42, urgent=True, ratio=1)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.type, stored.payload) == ("typed_kwargs", {"order_id": 42, "urgent": True,
                                                               "ratio": 1})
    [done] = run_jobs()
    assert done.status == Job.Status.COMPLETED
    assert done.result == {"order_id": 42, "subject": "hello", "urgent": True, "ratio": 1.0,
                           "ratio_type": "float"}


def test_a_dataclass_handler_gets_the_dataclass_rebuilt_from_the_stored_json():
    ship.enqueue(Order(id=1, lines=[Line("a", 2), Line("b")], pair=(1, 2)))
    assert Job.objects.get().payload["lines"][0] == {"sku": "a", "quantity": 2}
    [done] = run_jobs()
    assert done.result == {"class": "Order", "line_class": "Line", "skus": ["a", "b"],
                           "units": 3, "pair_type": "tuple", "note": None}


def test_a_typeddict_handler_and_a_keyword_only_handler():
    geocode.enqueue({"city": "Oslo", "zip": "0150"})
    notify.enqueue(user_id=5, channel="sms")
    results = sorted((j.type, str(j.result)) for j in run_jobs())
    assert results == [
        ("typed_keyword_only", str({"user_id": 5, "channel": "sms"})),
        ("typed_typeddict", str({"type": "dict", "city": "Oslo", "floor": None})),
    ]


def test_options_go_apart_from_the_arguments_through_using():
    mail = send_email.using(priority="high", queue="mail", delay=timedelta(hours=1))
    job = mail.using(max_attempts=2).enqueue(order_id=1)
    assert (job.priority, job.queue, job.max_attempts) == (10, "mail", 2)
    assert job.payload == {"order_id": 1}
    assert send_email.options == {} and mail.options["queue"] == "mail"  # using() copies
    assert send_email.enqueue(order_id=2).queue == "default"


def test_named_dependencies_and_their_failure_policy_go_through_using():
    first = send_email.enqueue(order_id=1)
    job = send_email.using(depends_on={"first": first}, on_dependency_failure="cancel").enqueue(
        order_id=2)
    assert job.on_dependency_failure == "cancel" and job.status == "waiting"


def test_a_wrong_argument_is_invalid_job_and_nothing_is_written():
    calls = [
        lambda: send_email.enqueue(order_id="x"),  # type: ignore[arg-type]
        lambda: send_email.enqueue(),  # type: ignore[call-arg]
        lambda: send_email.enqueue(order_id=1, priority=5),  # type: ignore[call-arg]
        lambda: ship.enqueue({"id": 1}),  # type: ignore[arg-type]
        lambda: send_email.enqueue_many([send_email.bind(order_id=1), {"order_id": "2"}]),
        lambda: send_email.using(priority="urgent").enqueue(order_id=1),
    ]
    fields = []
    for call in calls:
        with pytest.raises(InvalidJob) as caught:
            call()
        fields.append(sorted(caught.value.message_dict))
    assert fields == [["order_id"], ["order_id"], ["priority"], ["order"], ["[1].order_id"],
                      ["priority"]]
    assert not Job.objects.exists()


def test_enqueue_many_takes_bound_arguments_or_mappings_in_one_call():
    jobs = send_email.using(queue="bulk").enqueue_many(
        [send_email.bind(1), send_email.bind(order_id=2, subject="s"), {"order_id": 3}])
    assert [j.payload for j in jobs] == [{"order_id": 1}, {"order_id": 2, "subject": "s"},
                                         {"order_id": 3}]
    assert set(Job.objects.values_list("queue", flat=True)) == {"bulk"}
    assert sorted(j.result["order_id"] for j in run_jobs(queues=["bulk"])) == [1, 2, 3]


def test_the_typed_verbs_write_in_the_callers_transaction():
    with transaction.atomic():
        send_email.enqueue(order_id=1)
        transaction.set_rollback(True)
    assert not Job.objects.exists()


def test_aenqueue_and_aenqueue_many_check_in_the_caller_and_write_through_job_aenqueue():
    async def enqueue():
        await async_typed.aenqueue(Order(id=9, lines=[]), times=2)
        await send_email.using(queue="async").aenqueue_many([send_email.bind(order_id=4)])

    async_to_sync(enqueue)()
    assert sorted(Job.objects.values_list("type", flat=True)) == ["typed_async", "typed_kwargs"]
    results = {j.type: j.result for j in run_jobs()}
    assert results["typed_async"] == {"class": "Order", "times": 2}

    async def wrong():
        await async_typed.aenqueue(Order(id="x", lines=[]))  # type: ignore[arg-type]

    with pytest.raises(InvalidJob) as caught:
        async_to_sync(wrong)()
    assert caught.value.message_dict == {"order.id": ["must be int, not str"]}
    assert Job.objects.count() == 2


def test_the_string_form_still_enqueues_for_plain_and_typed_handlers():
    Job.enqueue("echo", {"a": 1})
    Job.enqueue("typed_kwargs", {"order_id": 8})
    results = {j.type: j.result for j in run_jobs()}
    assert results["echo"] == {"echo": {"a": 1}}
    assert results["typed_kwargs"]["order_id"] == 8


def test_the_string_form_refuses_a_payload_that_does_not_fit_a_typed_handler():
    """``Job.enqueue("type", payload)`` (and the API, which calls it) checks the payload against
    a typed handler's arguments at enqueue; a ``def f(payload)`` handler takes any JSON."""
    refused = [
        lambda: Job.enqueue("typed_dataclass", {"id": "x", "lines": []}),
        lambda: Job.enqueue("typed_kwargs", {"subject": "no order_id"}),
        lambda: Job.enqueue("typed_kwargs", [1, 2]),
        lambda: Job.enqueue_many("typed_kwargs", [{"order_id": 1}, {"order_id": 1, "x": 2}]),
    ]
    messages = []
    for call in refused:
        with pytest.raises(InvalidJob) as caught:
            call()
        messages.append(caught.value.message_dict["payload"][0])
    assert messages == [
        "does not fit the arguments of ship: order.id must be int, not str",
        "does not fit the arguments of send_email: order_id is required",
        "does not fit the arguments of send_email: payload must be an object of arguments by "
        "name, not list",
        "does not fit the arguments of send_email: x is not an argument of send_email",
    ]
    assert not Job.objects.exists()
    Job.enqueue("echo", [1, "any", {"json": None}])


def test_a_stored_payload_that_does_not_fit_the_arguments_goes_dead_at_once():
    """A row written before a deploy changed the handler's arguments: its first run is its last,
    naming the argument, rather than failing every retry the same way."""
    Job.objects.create(type="typed_dataclass", payload={"id": "not an int", "lines": []})
    [dead] = run_jobs()
    assert dead.status == Job.Status.DEAD and dead.attempt == 1
    assert "order.id must be int, not str" in dead.error["message"]


def test_the_decorated_function_is_still_the_function():
    assert send_email(1) == {"order_id": 1, "subject": "hello", "urgent": False, "ratio": None,
                             "ratio_type": "NoneType"}
    assert send_email.__name__ == "send_email" and send_email.type == "typed_kwargs"
    assert get_handler("typed_kwargs").func is send_email.func


def test_a_pydantic_handler_round_trips_through_the_database():
    pytest.importorskip("pydantic")
    from tests.typed_jobs import Invoice, bill

    bill.enqueue(Invoice(number="A-1", amount=5))
    with pytest.raises(InvalidJob) as caught:  # a mapping is validated by the model
        bill.enqueue({"number": "A-2", "amount": -1})  # type: ignore[arg-type]
    assert caught.value.message_dict == {"invoice.amount": ["Input should be greater than 0"]}
    [done] = run_jobs()
    assert done.result == {"class": "Invoice", "number": "A-1", "amount": 5}


SAMPLE = '''
from dataclasses import dataclass

from django_jobs import handler


@dataclass
class Order:
    id: int


@handler("sample_email")
def send_email(order_id: int, subject: str = "") -> None:
    pass


@handler("sample_ship")
def ship(order: Order) -> None:
    pass


send_email.enqueue(order_id=1, subject="s")
send_email.using(priority=5, queue="mail").enqueue(2)
send_email.enqueue_many([send_email.bind(order_id=3)])
ship.enqueue(Order(id=1))
'''

WRONG = '''
send_email.enqueue(order_id="x")
ship.enqueue({"id": 1})
send_email.using(priority=5).enqueue(order_id=1, priority=5)
ship.enqueue_many([send_email.bind(order_id=3)])
'''


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    module = tmp_path / "sample_jobs.py"
    module.write_text(textwrap.dedent(source))
    mypy_bin = Path(sys.executable).with_name("mypy")
    # The sample's errors only (django_jobs's own are CI's mypy run, with the Django plugin);
    # MYPYPATH puts this checkout's django_jobs first.
    return subprocess.run(
        [str(mypy_bin), "--no-incremental", "--follow-imports=silent",
         "--config-file=", "--cache-dir", str(tmp_path / "cache"), str(module)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )


@pytest.mark.django_db(transaction=False)
def test_mypy_sees_the_handlers_arguments_on_its_verbs(tmp_path):
    right = mypy(tmp_path, SAMPLE)
    assert right.returncode == 0, right.stdout + right.stderr
    wrong = mypy(tmp_path, SAMPLE + WRONG)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    errors = [line for line in wrong.stdout.splitlines() if ": error:" in line]
    lines = len(textwrap.dedent(SAMPLE).splitlines())
    assert [int(line.split(":")[1]) - lines for line in errors] == [2, 3, 4, 5], wrong.stdout
    assert 'Argument "order_id" to "enqueue" of "JobHandler" has incompatible type "str"; ' \
        'expected "int"' in errors[0]
    assert 'Unexpected keyword argument "priority"' in errors[2]
