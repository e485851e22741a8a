"""Every JSON value a job is given reaches its handler, and its result the database, exactly.

Property-based (Hypothesis): generated payloads go through every write path (``Job.enqueue``,
``enqueue_many``, ``POST /jobs``, the Tasks backend), on the database the suite runs on, and
come back as ``as_stored`` says (tests/json_strategies.py); what the database cannot store is
refused by name before anything is written. ``HYPOTHESIS_PROFILE=big`` runs 1,000 examples.
"""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from django_jobs import InvalidJob
from django_jobs.exceptions import InvalidResult
from django_jobs.models import Job
from tests.api_support import Api, make_token, run_ready
from tests.conftest import requires_postgres
from tests.jobs import RECEIVED, RESULTS
from tests.json_strategies import (
    as_stored,
    json_values,
    python_values,
    same,
    unstorable_texts,
    with_unstorable,
)

try:
    from django_jobs.backends.compat import InvalidTask, TaskResultStatus
    from tests import tasks as test_tasks
except Exception:  # no Tasks framework installed: those tests skip
    test_tasks = None

needs_tasks = pytest.mark.skipif(test_tasks is None, reason="needs the Tasks framework")


def stored_payload(job: Job):
    return Job.objects.get(pk=job.pk).payload


def expected(value):
    """What a job enqueued with ``value`` holds: None is "no payload", the empty object."""
    return as_stored({} if value is None else value, connection.vendor)


def post(value) -> tuple[int, dict]:
    api = Api(make_token("submit"))
    response = api.post("/api/jobs", raw=json.dumps({"type": "fidelity_echo", "payload": value}))
    return response.status_code, response.json()


# --- Every write path stores the value as given -------------------------------------------------


@pytest.mark.django_db
@given(python_values)
def test_enqueue_stores_any_json_value_exactly(value):
    job = Job.enqueue("fidelity_echo", value)
    assert same(stored_payload(job), expected(value))


@pytest.mark.django_db
@given(st.lists(python_values, max_size=5))
def test_enqueue_many_stores_each_value_exactly(values):
    jobs = Job.enqueue_many("fidelity_echo", values)
    assert [same(stored_payload(job), expected(v)) for job, v in zip(jobs, values, strict=True)] \
        == [True] * len(values)


@pytest.mark.django_db
@given(json_values())
def test_the_api_stores_any_json_payload_exactly(value):
    status, body = post(value)
    assert status == 201, body
    assert same(Job.objects.get(public_id=body["job_id"]).payload, expected(value))


@needs_tasks
@pytest.mark.django_db
@given(python_values)
def test_the_tasks_backend_stores_any_json_argument_exactly(value):
    result = test_tasks.identity_task.enqueue(value)
    stored = Job.objects.get(public_id=result.id).payload
    assert same(stored["args"], [as_stored(value, connection.vendor)])


@pytest.mark.django_db
def test_strings_that_hold_json_stay_strings():
    """The cases that were parsed as JSON text by the PostgreSQL insert."""
    values = ['{"order_id": 42}', "7", "null", "true", "hello", "", 5, True, False, 2**70]
    for value in values:
        assert same(stored_payload(Job.enqueue("fidelity_echo", value)), value), value
    for job, value in zip(Job.enqueue_many("fidelity_echo", values), values, strict=True):
        assert same(stored_payload(job), value), value


def test_what_json_itself_changes():
    """The normalisation JSON imposes (docs/explanation-guarantees.md), whatever the database."""
    assert as_stored((1, (2, 3)), "sqlite") == [1, [2, 3]]
    assert as_stored({1: "a", 2.5: "b", False: "c", None: "d"}, "sqlite") == {
        "1": "a", "2.5": "b", "false": "c", "null": "d"}
    assert as_stored({1: "int", "1": "str"}, "sqlite") == {"1": "str"}  # the last one wins
    assert same(as_stored(1e16, "postgresql"), 10**16)
    assert same(as_stored(-0.0, "postgresql"), 0.0) and same(as_stored(-0.0, "sqlite"), -0.0)


@pytest.mark.django_db
def test_ints_keep_every_digit_up_to_what_python_json_writes():
    big = 10**4299  # 4,300 digits: the most json.dumps writes (sys.get_int_max_str_digits)
    for value in (big, -big, 2**64, [2**63, -(2**63) - 1]):
        assert same(stored_payload(Job.enqueue("fidelity_echo", value)), value)
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("fidelity_echo", 10**4300)
    assert "payload" in info.value.message_dict


@pytest.mark.django_db
def test_none_is_no_payload_and_stored_as_the_empty_object():
    """``payload=None`` is the default argument: it has always meant "no payload"."""
    assert stored_payload(Job.enqueue("fidelity_echo")) == {}
    assert stored_payload(Job.enqueue("fidelity_echo", None)) == {}
    assert stored_payload(Job.enqueue("fidelity_echo", [None])) == [None]
    assert stored_payload(Job.enqueue("fidelity_echo", {"a": None})) == {"a": None}


# --- The handler receives it; its result reads back -----------------------------------------------


def enqueue_by(path: str, value):
    """One job holding ``value`` written by ``path``; returns the job's public id."""
    if path == "enqueue":
        return Job.enqueue("fidelity_echo", value).public_id
    if path == "enqueue_many":
        return Job.enqueue_many("fidelity_echo", [{"pad": 1}, value])[1].public_id
    status, body = post(value)
    assert status == 201, body
    return body["job_id"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["enqueue", "enqueue_many", "api"])
@given(value=json_values())
def test_the_handler_receives_the_payload_and_returns_it_exactly(path, value):
    Job.objects.all().delete()
    public_id = enqueue_by(path, value)
    run_ready()
    job = Job.objects.get(public_id=public_id)
    assert job.status == Job.Status.COMPLETED, job.error
    assert same(RECEIVED.pop(public_id), expected(value))
    assert same(job.result, expected(value))


@needs_tasks
@pytest.mark.django_db(transaction=True)
@given(python_values)
def test_a_task_receives_its_argument_and_returns_it_exactly(value):
    Job.objects.all().delete()
    result = test_tasks.identity_task.enqueue(value)
    run_ready()
    result = test_tasks.identity_task.get_result(result.id)  # read afresh, args included
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert same(result.args, [as_stored(value, connection.vendor)])
    assert same(result.return_value, as_stored(value, connection.vendor))


@pytest.mark.django_db(transaction=True)
@given(python_values)
def test_a_result_reads_back_as_the_payload_rule_says(value):
    """Results hold what payloads hold: tuples become lists, keys strings; None is no result."""
    Job.objects.all().delete()
    RESULTS["r"] = value
    job = Job.enqueue("fidelity_result", {"key": "r"})
    run_ready()
    job.refresh_from_db()
    assert job.status == Job.Status.COMPLETED, job.error
    want = None if value is None else as_stored(value, connection.vendor)
    assert same(job.result, want)


# --- What the database cannot store is refused by name -----------------------------------------


@pytest.mark.django_db
@given(with_unstorable())
def test_enqueue_refuses_a_nul_or_lone_surrogate_naming_the_payload(value):
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("fidelity_echo", value)
    assert list(info.value.message_dict) == ["payload"]
    assert "NUL" in str(info.value) or "surrogate" in str(info.value)
    with pytest.raises(InvalidJob) as info:
        Job.enqueue_many("fidelity_echo", [{"fine": 1}, value])
    assert list(info.value.message_dict) == ["payload"]
    assert not Job.objects.exists()


@pytest.mark.django_db
@given(with_unstorable())
def test_the_api_answers_400_naming_the_payload(value):
    status, body = post(value)
    assert status == 400
    assert list(body["errors"]) == ["payload"], body
    assert not Job.objects.exists()


@needs_tasks
@pytest.mark.django_db
@given(with_unstorable())
def test_the_tasks_backend_refuses_it_naming_the_argument(value):
    with pytest.raises(InvalidTask, match=r"^payload: .* at \['args'\]\[0\]"):
        test_tasks.identity_task.enqueue(value)
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "where"), [
    ({"a": [1, "x\x00"]}, "NUL character (\\u0000) at ['a'][1]"),
    ({"outer": {"k\x00": 1}}, "in the key 'k\\x00' at ['outer']"),
    (["\ud800"], "lone surrogate (\\ud800-\\udfff, half of a UTF-16 pair) at [0]"),
    ("\\u0000 is six characters here", None),  # a backslash, not a NUL: stored
    (float("nan"), "is not JSON"),
    ({"when": __import__("datetime").date(2020, 1, 1)}, "is not JSON: Object of type date"),
])
def test_the_refusal_says_what_and_where(value, where):
    if where is None:
        assert stored_payload(Job.enqueue("fidelity_echo", value)) == value
        return
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("fidelity_echo", value)
    assert where in info.value.message_dict["payload"][0]


@pytest.mark.django_db
@given(unstorable_texts)
def test_a_unique_key_the_database_cannot_store_is_refused_by_name(key):
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("fidelity_echo", {}, unique_key=key)
    assert list(info.value.message_dict) == ["unique_key"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("result", "why"), [
    ({"a": "\x00"}, "holds a NUL character (\\u0000) at ['a']"),
    (["ok", "\udc00"], "lone surrogate"),
    (float("inf"), "is not JSON: Out of range float"),
    ({"at": __import__("datetime").datetime(2020, 1, 1)}, "is not JSON: Object of type datetime"),
    ({1, 2}, "is not JSON: Object of type set"),
])
def test_a_result_a_job_cannot_hold_fails_it_for_good_naming_why(result, why):
    RESULTS["bad"] = result
    job = Job.enqueue("fidelity_result", {"key": "bad"})  # max_attempts=2: dead at once
    ok = Job.enqueue("fidelity_echo", {"fine": True})
    run_ready()
    job.refresh_from_db()
    assert (job.status, job.attempt) == (Job.Status.DEAD, 1)
    assert job.error["type"] == "InvalidResult"
    assert job.error["message"].startswith("the handler's result ")
    assert why in job.error["message"]
    assert job.attempts.get().outcome == "dead"
    ok.refresh_from_db()
    assert ok.status == Job.Status.COMPLETED and ok.result == {"fine": True}


def test_invalid_result_is_a_permanent_error():
    from django_jobs import PermanentError

    assert issubclass(InvalidResult, PermanentError)


# --- The PostgreSQL insert sends each value as save() would -----------------------------------


@requires_postgres
@pytest.mark.django_db
def test_every_value_the_insert_sends_as_it_is_is_what_get_db_prep_save_gives():
    """``pgenqueue.insert`` skips get_db_prep_save only for the values it would return as they are
    (per field: bool, int, str, an aware datetime); JSON and UUID fields always go through it.
    Then a JSON field's string is sent as JSON, never as JSON text."""
    from django_jobs.engine.postgres.enqueue import _sent_as_is

    samples = {
        bool: [True, False],
        int: [0, -7, 2**40],
        str: ["", "x", '{"order_id": 42}', "7", "null", "é😀"],
        datetime: [timezone.now(), datetime(2020, 1, 1, tzinfo=UTC)],
    }
    kinds = {}
    for field in Job._meta.concrete_fields:
        as_is = kinds[field.name] = _sent_as_is(field)
        for value in samples.get(as_is, []):
            prepared = field.get_db_prep_save(value, connection)
            # the same value of the same class; Django names an int's size for psycopg
            # (Int2 for a small integer field), which an INSERT's assignment cast makes moot
            assert isinstance(prepared, as_is) and prepared == value, field
            assert type(prepared) is as_is or type(prepared).__module__.startswith("psycopg")
    assert {name for name, as_is in kinds.items() if as_is is None} == {
        "id", "payload", "result", "error", "progress", "lease_token", "trace_context", "group",
        "shelf"}


# --- One real worker per write path ----------------------------------------------------------

TRICKY = [
    '{"order_id": 42}', "7", "null", "", "hello", 5, 0, -1, True, False, 2**64, -(10**40), 0.1,
    1e16, -0.0, 5e-324, "é 😀 \u2028 \U0010fffd", "\\u0000", [None, [], {}], {"": {"a": [1.5]}},
    {"1": "one", "nested": {"deeper": [True, "false", None]}},
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_what_every_write_path_stored_exactly(start_worker):
    jobs = {}  # public id: the value enqueued
    for value in TRICKY:
        jobs[Job.enqueue("fidelity_echo", value).public_id] = value
    for job, value in zip(Job.enqueue_many("fidelity_echo", TRICKY), TRICKY, strict=True):
        jobs[job.public_id] = value
    for value in TRICKY:
        status, body = post(value)
        assert status == 201, body
        jobs[body["job_id"]] = value
    tasks = {}
    if test_tasks is not None:
        tasks = {test_tasks.identity_task.enqueue(value).id: value for value in TRICKY}
    assert start_worker("--burst").wait() == 0
    for public_id, value in {**jobs, **tasks}.items():
        job = Job.objects.get(public_id=public_id)
        assert job.status == Job.Status.COMPLETED, (value, job.error)
        assert same(job.result, expected(value)), (value, job.result)
    for public_id, value in tasks.items():
        stored = Job.objects.get(public_id=public_id).payload
        assert same(stored["args"], [expected(value)]), value


# --- Sizes --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_payload_past_max_payload_bytes_is_refused_by_name(settings):
    settings.DJANGO_JOBS = {"MAX_PAYLOAD_BYTES": 102}
    Job.enqueue("fidelity_echo", "é" * 50)  # 100 bytes of UTF-8 and two quotes
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("fidelity_echo", ["é" * 50])
    assert info.value.message_dict["payload"] == [
        "is 104 bytes of JSON, more than MAX_PAYLOAD_BYTES (102 bytes)"]
    settings.DJANGO_JOBS = {"MAX_PAYLOAD_BYTES": None}
    Job.enqueue("fidelity_echo", "x" * (2 << 20))
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_payloads_are_limited_to_one_mib_by_default():
    Job.enqueue("fidelity_echo", "x" * ((1 << 20) - 2))
    with pytest.raises(InvalidJob, match="more than MAX_PAYLOAD_BYTES"):
        Job.enqueue("fidelity_echo", "x" * ((1 << 20) - 1))


@pytest.mark.django_db(transaction=True)
def test_a_result_past_max_result_bytes_fails_the_job_for_good(settings):
    RESULTS["big"] = "x" * (1 << 20)  # the default limit, 1 MiB, and two quotes
    job = Job.enqueue("fidelity_result", {"key": "big"})
    run_ready()
    job.refresh_from_db()
    assert (job.status, job.result) == (Job.Status.DEAD, None)
    assert job.error["message"] == ("the handler's result is 1048578 bytes of JSON, more than "
                                    "MAX_RESULT_BYTES (1048576 bytes)")
    settings.DJANGO_JOBS = {"MAX_RESULT_BYTES": None}
    assert job.retry()
    run_ready()
    job.refresh_from_db()
    assert job.status == Job.Status.COMPLETED and len(job.result) == 1 << 20


def test_a_size_setting_that_is_not_a_positive_integer_or_none_fails_the_check(settings):
    from django_jobs.checks.configuration import check_settings

    settings.DJANGO_JOBS = {"MAX_PAYLOAD_BYTES": "1MB", "MAX_RESULT_BYTES": 0}
    assert [e.id for e in check_settings()] == ["django_jobs.E004", "django_jobs.E004"]
    settings.DJANGO_JOBS = {"MAX_PAYLOAD_BYTES": None, "MAX_RESULT_BYTES": 10}
    assert check_settings() == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("message", "why"), [("aNULb", "NUL"), ("SUR", "lone surrogate")])
def test_a_progress_message_the_database_cannot_store_fails_the_handler_by_name(message, why):
    job = Job.enqueue("fidelity_progress", {"message": message})
    run_ready()
    job.refresh_from_db()
    assert (job.status, job.error["type"], job.progress) == (Job.Status.DEAD, "InvalidJob", None)
    assert "progress_message" in job.error["message"] and why in job.error["message"]
