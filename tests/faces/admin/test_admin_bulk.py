"""Actions over a filter in the admin: the list links to a page that counts what its filter
matches; confirming starts the action (recorded in the admin's history) over exactly that
set; a filter the action cannot follow is refused; only users with the permission (and the
verb's own) may."""

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from django_jobs.models import BulkAction, Job
from tests.admin_helpers import make_job, staff

pytestmark = pytest.mark.django_db

LIST = "/admin/django_jobs/job/"
BULK = "/admin/django_jobs/job/bulk/"


@pytest.fixture
def operator(client):
    client.force_login(staff("operator", "view_job", "act_on_filter_job", "retry_job"))
    return client


def test_the_page_counts_the_lists_filter_and_confirming_starts_over_that_set(operator):
    for _ in range(3):
        make_job("dead", type="email.send")
    make_job("dead", type="report")
    make_job("completed", type="email.send")
    page = operator.get(LIST + "?status__exact=dead&type=email.send&o=1&p=1").content.decode()
    assert 'id="dj-jobs-bulk-link"' in page
    assert f'href="{BULK}?status__exact=dead&amp;type=email.send"' in page

    confirm = operator.get(BULK + "?status__exact=dead&type=email.send")
    text = confirm.content.decode()
    assert "<strong>3</strong> jobs match" in text
    assert 'value="retry"' in text and 'value="cancel"' not in text  # no cancel permission

    done = operator.post(BULK, {"verb": "retry", "filters": "status__exact=dead&type=email.send"})
    action = BulkAction.objects.get()
    assert done.status_code == 302
    assert done["Location"] == reverse("admin:django_jobs_bulkaction_change", args=[action.pk])
    assert (action.verb, action.matched, action.spec) == (
        "retry", 3, {"status": ["dead"], "type": "email.send"})
    entry = LogEntry.objects.get()
    assert entry.object_id == str(action.pk) and entry.user.username == "operator"
    assert Job.objects.filter(type="django_jobs.bulk_action", status="pending").count() == 1
    assert "progress" in operator.get(done["Location"]).content.decode()


def test_a_filter_it_cannot_follow_is_refused_on_the_list(operator):
    make_job("dead")
    response = operator.get(BULK + "?status__exact=dead&worker_id=w1", follow=True)
    assert "Not started: cannot act over a filter on worker_id" in response.content.decode()
    assert not BulkAction.objects.exists()
    assert operator.post(BULK, {"verb": "retry", "filters": "colour=red"}).status_code == 302
    assert not BulkAction.objects.exists()


def test_the_date_drill_down_and_a_public_id_search_become_the_actions_filter(operator):
    job = make_job("dead")
    operator.post(BULK, {"verb": "retry", "filters": f"q={job.public_id}"})
    assert BulkAction.objects.get().spec == {"public_id": job.public_id}
    year = job.created_at.year
    operator.post(BULK, {"verb": "retry", "filters": f"created_at__year={year}"})
    spec = BulkAction.objects.order_by("-pk").first().spec
    assert spec["created_from"].startswith(f"{year}-01-01")
    assert spec["created_before"].startswith(f"{year + 1}-01-01")


def test_only_users_with_the_permission_and_the_verbs_may(client):
    make_job("dead")
    client.force_login(staff("viewer", "view_job", "retry_job"))
    assert 'id="dj-jobs-bulk-link"' not in client.get(LIST).content.decode()
    assert client.get(BULK + "?status__exact=dead").status_code == 403
    client.force_login(staff("halfway", "view_job", "act_on_filter_job", "retry_job"))
    assert client.post(BULK, {"verb": "delete", "filters": ""}).status_code == 403
    assert not BulkAction.objects.exists()
