"""A handler's own arguments as a payload (``handlers/handler_arguments.py``): checked at enqueue
with InvalidJob naming the argument, stored as JSON, given back typed to the handler."""

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import given
from hypothesis import strategies as st

from django_jobs import InvalidJob, PermanentError
from django_jobs.handlers.handler_arguments import ArgumentSpec
from tests.typed_jobs import Address, Line, Order, geocode, notify, send_email, ship

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


def payload_of(handler, *args, **kwargs):
    return handler.spec.payload(args, kwargs)


def problem(handler, *args, **kwargs) -> dict:
    with pytest.raises(InvalidJob) as caught:
        payload_of(handler, *args, **kwargs)
    return caught.value.message_dict


def test_keyword_arguments_are_stored_by_name_and_given_back_as_keywords():
    payload = payload_of(send_email, 7, urgent=True)
    assert payload == {"order_id": 7, "urgent": True}  # only what the caller gave
    assert send_email.spec.call(payload) == ((), {"order_id": 7, "urgent": True})


def test_one_positional_parameter_takes_the_payload_whole():
    """``def f(payload)``: the payload as stored, whatever its shape (the string form's rule)."""
    def legacy(payload):
        return payload

    spec = ArgumentSpec.of(legacy)
    assert spec.payload(({"a": [1, 2]},), {}) == {"a": [1, 2]}
    assert spec.payload((), {"payload": 5}) == 5
    assert spec.call({"a": 1}) == (({"a": 1},), {})
    assert spec.call(5) == ((5,), {})


def test_a_callable_without_a_signature_takes_the_payload_whole():
    spec = ArgumentSpec.of(vars)  # a builtin whose signature inspect cannot read
    assert spec.payload(({"a": 1},), {}) == {"a": 1}
    assert spec.call([1]) == (([1],), {})


def test_one_parameter_of_another_type_is_an_argument_by_name():
    """``def f(order_id: int)``: the payload is ``{"order_id": 1}``, as for several arguments;
    a ``dict`` or ``Any`` parameter is the payload whole."""
    def by_id(order_id: int):
        return order_id

    def by_list(ids: list[int]):
        return ids

    def whole_dict(payload: dict[str, Any]):
        return payload

    def whole_any(payload: Any):
        return payload

    assert ArgumentSpec.of(by_id).payload((1,), {}) == {"order_id": 1}
    assert ArgumentSpec.of(by_id).call({"order_id": 1}) == ((), {"order_id": 1})
    assert ArgumentSpec.of(by_list).payload(([1, 2],), {}) == {"ids": [1, 2]}
    assert ArgumentSpec.of(whole_dict).payload(({"a": 1},), {}) == {"a": 1}
    assert ArgumentSpec.of(whole_any).payload((5,), {}) == 5


def test_a_dataclass_is_stored_as_json_and_rebuilt_with_its_nested_dataclasses():
    order = Order(id=3, lines=[Line("a", 2), Line("b")], note=None, pair=(4, 5))
    payload = payload_of(ship, order)
    assert payload == {"id": 3, "lines": [{"sku": "a", "quantity": 2},
                                           {"sku": "b", "quantity": 1}],
                       "note": None, "pair": [4, 5], "tags": []}
    [rebuilt], _ = ship.spec.call(json.loads(json.dumps(payload)))
    assert rebuilt == order and isinstance(rebuilt.lines[0], Line)
    assert isinstance(rebuilt.pair, tuple)


def test_a_typeddict_checks_its_required_and_optional_keys():
    assert payload_of(geocode, {"city": "Oslo", "zip": "0150"}) == {"city": "Oslo", "zip": "0150"}
    assert payload_of(geocode, Address(city="Oslo", zip="0150", floor=2))["floor"] == 2
    assert problem(geocode, {"city": "Oslo"}) == {"address.zip": ["is required"]}
    assert problem(geocode, {"city": "Oslo", "zip": "1", "floor": "2"}) == {
        "address.floor": ["must be int, not str"]}
    assert problem(geocode, {"city": "Oslo", "zip": "1", "street": "x"}) == {
        "address.street": ["is not a key of Address"]}


@pytest.mark.parametrize(("call", "expected"), [
    (lambda: problem(send_email), {"order_id": ["is required"]}),
    (lambda: problem(send_email, order_id="x"), {"order_id": ["must be int, not str"]}),
    (lambda: problem(send_email, order_id=True), {"order_id": ["must be int, not bool"]}),
    (lambda: problem(send_email, 1, ratio="0.5"),
     {"ratio": ["must be float | None, not str"]}),
    (lambda: problem(send_email, 1, subject=None), {"subject": ["must be str, not NoneType"]}),
    (lambda: problem(send_email, 1, priority=5),
     {"priority": ["is not an argument of send_email (job options go in .using(priority=...))"]}),
    (lambda: problem(send_email, 1, subjct="hi"),
     {"subjct": ["is not an argument of send_email (did you mean 'subject'?)"]}),
    (lambda: problem(send_email, 1, colour="red"),
     {"colour": ["is not an argument of send_email (its arguments: order_id, subject, urgent, "
                 "ratio)"]}),
    (lambda: problem(send_email, 1, order_id=2),
     {"order_id": ["is given twice, by position and by name"]}),
    (lambda: problem(send_email, 1, "s", 3),
     {"arguments": ["send_email takes 2 positional argument(s), 3 given"]}),
    (lambda: problem(notify, user_id=1, channel="fax"),
     {"channel": ["must be one of 'mail', 'sms', not 'fax'"]}),
    (lambda: problem(ship, {"id": 1, "lines": []}), {"order": ["must be Order, not dict"]}),
    (lambda: problem(ship, Order(id=1, lines=[Line(sku=3)])),  # type: ignore[arg-type]
     {"order.lines[0].sku": ["must be str, not int"]}),
    (lambda: problem(ship, Order(id=1, lines=[], pair=(1, 2, 3))),  # type: ignore[arg-type]
     {"order.pair": ["must have 2 items, not 3"]}),
])
def test_a_missing_or_wrong_argument_is_invalid_job_naming_it(call, expected):
    assert call() == expected


def test_an_argument_that_is_not_json_is_named():
    assert list(problem(send_email, 1, ratio=float("nan"))) == ["ratio"]

    @dataclass
    class Holder:
        value: Any

    def takes(holder: Holder):
        return holder

    with pytest.raises(InvalidJob) as caught:
        ArgumentSpec.of(takes).payload((Holder(object()),), {})
    assert list(caught.value.message_dict) == ["holder"]


def test_a_stored_payload_that_does_not_fit_is_a_permanent_error():
    """A payload written by the string form (the API, the admin) that the arguments refuse:
    the job goes dead at once, saying which argument, rather than failing its retries."""
    with pytest.raises(PermanentError, match=r"order\.id must be int, not str"):
        ship.spec.call({"id": "x", "lines": []})
    with pytest.raises(PermanentError, match="order_id is required"):
        send_email.spec.call({"subject": "s"})
    with pytest.raises(PermanentError, match="must be an object of arguments by name"):
        send_email.spec.call([1])
    with pytest.raises(PermanentError, match="extra is not an argument of send_email"):
        send_email.spec.call({"order_id": 1, "extra": 2})


def test_var_keyword_arguments_are_stored_and_checked_by_their_annotation():
    def tagged(name: str, **counts: int):
        return counts

    spec = ArgumentSpec.of(tagged)
    assert spec.payload(("x",), {"a": 1, "b": 2}) == {"name": "x", "a": 1, "b": 2}
    assert spec.call({"name": "x", "a": 1}) == ((), {"name": "x", "a": 1})
    with pytest.raises(InvalidJob) as caught:
        spec.payload(("x",), {"a": "1"})
    assert caught.value.message_dict == {"a": ["must be int, not str"]}


def test_args_or_positional_only_parameters_cannot_be_named_in_a_payload():
    def star(a, *rest):
        return rest

    def positional_only(a, b, /):
        return a

    for func in (star, positional_only):
        with pytest.raises(ImproperlyConfigured, match="positional-only or \\*args"):
            ArgumentSpec.of(func)


def test_an_annotation_that_cannot_be_resolved_is_left_unchecked():
    def f(a: "NotImportedHere", b: "int"):  # type: ignore[name-defined]  # noqa: F821
        return a

    spec = ArgumentSpec.of(f)
    assert spec.payload((), {"a": {"any": "json"}, "b": 1}) == {"a": {"any": "json"}, "b": 1}
    with pytest.raises(InvalidJob):
        spec.payload((), {"a": 1, "b": "not int"})


def test_a_pydantic_model_uses_its_own_validation():
    pydantic = pytest.importorskip("pydantic")
    from tests.typed_jobs import Invoice, bill

    assert payload_of(bill, Invoice(number="7", amount=3)) == {
        "number": "7", "amount": 3, "lines": []}
    assert problem(bill, {"number": "7", "amount": 0}) == {
        "invoice.amount": ["Input should be greater than 0"]}
    [rebuilt], _ = bill.spec.call({"number": "7", "amount": 3})
    assert isinstance(rebuilt, Invoice) and isinstance(rebuilt, pydantic.BaseModel)




# Text a job may hold: no NUL, no lone surrogate (the payload's JSON rule refuses them).
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                max_size=10)
lines = st.builds(Line, sku=texts, quantity=st.integers(-10**6, 10**6))
orders = st.builds(
    Order, id=st.integers(-(2**53), 2**53), lines=st.lists(lines, max_size=4),
    note=st.none() | texts,
    pair=st.tuples(st.integers(-5, 5), st.integers(-5, 5)),
    tags=st.lists(texts, max_size=3),
)


@given(orders)
def test_a_dataclass_round_trips_through_json(order):
    """What the worker rebuilds from the stored JSON is what the caller enqueued."""
    stored = json.loads(json.dumps(payload_of(ship, order)))
    [rebuilt], _ = ship.spec.call(stored)
    assert rebuilt == order


@given(st.integers(-(2**31), 2**31), texts, st.booleans(),
       st.none() | st.floats(allow_nan=False, allow_infinity=False))
def test_keyword_arguments_round_trip_through_json(order_id, subject, urgent, ratio):
    kwargs = {"order_id": order_id, "subject": subject, "urgent": urgent, "ratio": ratio}
    stored = json.loads(json.dumps(payload_of(send_email, **kwargs)))
    assert send_email.spec.call(stored) == ((), kwargs)


@given(orders)
def test_the_payload_schema_accepts_what_the_arguments_store(order):
    """The JSON Schema the API's document gives a typed handler's payload holds what its
    verbs store, and refuses what they refuse (the API is fuzzed against it too)."""
    from jsonschema_rs import Draft202012Validator  # schemathesis's validator

    validator = Draft202012Validator(ship.spec.payload_schema())
    assert validator.is_valid(payload_of(ship, order))


def test_the_payload_schema_refuses_what_the_arguments_refuse():
    from jsonschema_rs import Draft202012Validator  # schemathesis's validator

    kwargs = Draft202012Validator(send_email.spec.payload_schema())
    assert kwargs.is_valid({"order_id": 1, "ratio": None})
    for wrong in ({}, {"order_id": "1"}, {"order_id": True}, {"order_id": 1, "x": 1}, [1]):
        assert not kwargs.is_valid(wrong)
        with pytest.raises(InvalidJob):
            send_email.spec.check_stored(wrong)
    whole = Draft202012Validator(ship.spec.payload_schema())
    for wrong in ({"id": 1}, {"id": 1, "lines": [{"quantity": 1}]},
                  {"id": 1, "lines": [], "pair": [1, 2, 3]}, {"id": 1, "lines": [], "x": 0}):
        assert not whole.is_valid(wrong)
        with pytest.raises(InvalidJob):
            ship.spec.check_stored(wrong)
    address = Draft202012Validator(geocode.spec.payload_schema())
    assert address.is_valid({"city": "a", "zip": "b"})
    assert not address.is_valid({"city": "a"})


@pytest.mark.parametrize(("options", "message"), [
    ({"colour": "red"}, "send_email.using() got an unknown option 'colour' (the options are "
                        "callback_url, delay,"),
    ({"priorty": 5}, "send_email.using() got an unknown option 'priorty' (did you mean "
                     "'priority')"),
    ({"subject": "hi"}, "send_email.using() takes job options, and 'subject' is an argument of "
                        "send_email: give it to .enqueue(subject=...)"),
])
def test_using_refuses_what_is_no_option_saying_what_was_meant(options, message):
    with pytest.raises(TypeError) as caught:
        send_email.using(**options)
    assert str(caught.value).startswith(message)


def test_what_enqueue_suggests_for_an_option_using_takes():
    [hint] = problem(send_email, 1, queue="mail")["queue"]
    assert hint.endswith("(job options go in .using(queue=...))")
    assert send_email.using(queue="mail").options == {"queue": "mail"}
