"""Arrays and objects nest at most ``MAX_NESTING`` levels in a payload or a result, on every
database (MariaDB's JSON check refuses deeper ones; the rule is the same everywhere)."""

import json

import pytest

from django_jobs import InvalidJob
from django_jobs.core.json_rules import MAX_NESTING, nesting
from django_jobs.models import Job
from tests.api_support import Api, make_token, run_ready


def nested(levels: int, kind: str = "list"):
    value: object = 1
    for level in range(levels):
        value = [value] if kind == "list" else {f"k{level}": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_counts_levels_of_arrays_and_objects(kind):
    assert nesting(1) == 0 and nesting([]) == 1 and nesting({"a": [{}]}) == 3
    assert nesting(nested(MAX_NESTING, kind)) == MAX_NESTING


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_the_deepest_allowed_payload_is_stored_and_returned_exactly(kind):
    value = nested(MAX_NESTING, kind)
    one = Job.enqueue("fidelity_echo", value)
    (many,) = Job.enqueue_many("fidelity_echo", [value])
    response = Api(make_token("submit")).post(
        "/api/jobs", raw=json.dumps({"type": "fidelity_echo", "payload": value}))
    assert response.status_code == 201, response.json()
    assert len(run_ready()) == 3
    for job in Job.objects.all():
        assert (job.payload, job.status, job.result) == (value, Job.Status.COMPLETED, value)
    assert {one.pk, many.pk} <= set(Job.objects.values_list("pk", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_a_deeper_payload_is_refused_by_every_write_path_and_nothing_is_written(kind):
    value = nested(MAX_NESTING + 1, kind)
    with pytest.raises(InvalidJob) as one:
        Job.enqueue("fidelity_echo", value)
    assert "payload" in one.value.message_dict
    assert f"{MAX_NESTING + 1} levels deep" in one.value.message_dict["payload"][0]
    with pytest.raises(InvalidJob):
        Job.enqueue_many("fidelity_echo", [{"fine": 1}, value])
    response = Api(make_token("submit")).post(
        "/api/jobs", raw=json.dumps({"type": "fidelity_echo", "payload": value}))
    assert response.status_code == 400
    assert "payload" in response.json()["errors"], response.json()
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_brackets_inside_strings_are_not_nesting():
    value = {"text": "[" * 100 + "{" * 100}
    assert Job.objects.get(pk=Job.enqueue("fidelity_echo", value).pk).payload == value


@pytest.mark.django_db(transaction=True)
def test_a_deeper_result_fails_the_job_with_invalid_result():
    job = Job.enqueue("echo", nested(MAX_NESTING))  # echo wraps it: one level more
    run_ready()
    job.refresh_from_db()
    assert job.status == Job.Status.DEAD
    assert job.error["type"] == "InvalidResult"
    assert "levels deep" in job.error["message"]
