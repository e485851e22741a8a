"""The one deliberate edit: a dead job's payload, corrected and retried, and logged."""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages

from django_jobs.models import Job
from tests.admin_helpers import job_url, make_job, staff

pytestmark = pytest.mark.django_db


def edit_url(job: Job) -> str:
    return job_url(job).replace("/change/", "/edit-payload/")


@pytest.fixture
def editor(client):
    client.force_login(staff("editor", "view_job", "retry_job", "change_job"))
    return client


def test_the_dead_job_page_links_to_the_editor_with_the_current_payload(editor):
    job = make_job("dead", payload={"to": "ada@exmaple.com"})
    assert "Edit payload and retry</a>" in editor.get(job_url(job)).content.decode()
    html = editor.get(edit_url(job)).content.decode()
    assert "&quot;to&quot;: &quot;ada@exmaple.com&quot;" in html


def test_saving_replaces_the_payload_retries_the_job_and_logs_which_keys_changed(
    editor, caplog
):
    job = make_job("dead", payload={"to": "ada@exmaple.com", "n": 1})
    with caplog.at_level("INFO", logger="django_jobs.admin"):
        response = editor.post(edit_url(job), {"payload": '{"to": "ada@example.com", "n": 1}'},
                               follow=True)
    job.refresh_from_db()
    assert job.payload == {"to": "ada@example.com", "n": 1}
    assert job.status == "pending"
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Payload saved (keys changed: to); 1 job retried."]
    entry = LogEntry.objects.get(object_id=str(job.pk))
    assert entry.change_message == "Edited the payload (keys changed: to) and retried."
    assert "ada@example.com" not in caplog.text  # values never reach the log
    assert f"job {job.public_id}: payload edited (keys changed: to)" in caplog.text


def test_invalid_json_is_refused_with_a_400_and_changes_nothing(editor):
    job = make_job("dead", payload={"a": 1})
    response = editor.post(edit_url(job), {"payload": "{'a': 2"})
    assert response.status_code == 400
    assert "not valid JSON" in response.content.decode()
    job.refresh_from_db()
    assert (job.payload, job.status) == ({"a": 1}, "dead")


def test_a_payload_that_does_not_fit_a_typed_handlers_arguments_is_a_form_error(editor):
    job = make_job("dead", type="typed_kwargs", payload={"order_id": "x"})
    response = editor.post(edit_url(job), {"payload": '{"order_id": "still not a number"}'})
    assert response.status_code == 400
    assert "does not fit the arguments of send_email: order_id must be int, not str" in \
        response.content.decode()
    job.refresh_from_db()
    assert (job.payload, job.status) == ({"order_id": "x"}, "dead")
    editor.post(edit_url(job), {"payload": '{"order_id": 7}'})
    job.refresh_from_db()
    assert (job.payload, job.status) == ({"order_id": 7}, "pending")


def test_only_dead_jobs_can_be_edited(editor):
    job = make_job("completed", payload={"a": 1})
    response = editor.post(edit_url(job), {"payload": '{"a": 2}'}, follow=True)
    assert "Only dead jobs" in response.content.decode()
    assert Job.objects.get(pk=job.pk).payload == {"a": 1}


@pytest.mark.parametrize("missing", ["retry_job", "change_job"])
def test_editing_needs_both_retry_and_change_permissions(client, missing):
    perms = {"view_job", "retry_job", "change_job"} - {missing}
    client.force_login(staff("partial", *perms))
    job = make_job("dead", payload={"a": 1})
    assert "Edit payload" not in client.get(job_url(job)).content.decode()
    assert client.post(edit_url(job), {"payload": '{"a": 2}'}).status_code == 403
    assert Job.objects.get(pk=job.pk).payload == {"a": 1}


def test_the_queryset_verb_refuses_a_payload_that_is_not_json(db):
    from django_jobs.exceptions import InvalidJob

    job = make_job("dead", payload={"a": 1})
    with pytest.raises(InvalidJob):
        Job.objects.filter(pk=job.pk).retry_with_payload({"when": object()})
    assert Job.objects.get(pk=job.pk).status == "dead"
