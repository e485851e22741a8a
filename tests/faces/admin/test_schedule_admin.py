"""The schedules admin: lists configured schedules, pauses, resumes and runs them now."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from django.urls import reverse

from django_jobs.admin import display
from django_jobs.models import Job, Schedule, ScheduleOccurrence

SCHEDULES = {"DJANGO_JOBS": {"SCHEDULES": {
    "nightly": {"type": "echo", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
    "often": {"type": "noop", "every": 900, "misfire": "skip"},
}}}
URL = "/admin/django_jobs/schedule/"


@pytest.fixture
def admin_client_(client):
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def act(client, action, *names):
    return client.post(URL, {"action": action, "_selected_action": list(names)}, follow=True)


@pytest.mark.django_db
@override_settings(**SCHEDULES)
def test_the_changelist_shows_every_configured_schedule_with_its_next_run(admin_client_):
    page = admin_client_.get(URL).content.decode()
    assert "nightly" in page and "0 3 * * * (Europe/Paris)" in page
    assert "every 15 min" in page and "skip" in page
    assert Schedule.objects.filter(next_run_at__isnull=False).count() == 2
    # Dates read as everywhere in the app's admin; a paused schedule says so in words.
    nightly = Schedule.objects.get(name="nightly")
    shown = display.when(nightly.next_run_at)  # in the current time zone, named
    assert shown in page
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z0-9+-]+", shown), shown
    assert "a.m." not in page and "p.m." not in page
    assert "dj-jobs-status-paused" not in page and ">active<" in page
    Schedule.objects.filter(name="often").update(paused=True)
    page = admin_client_.get(URL).content.decode()
    assert '<span class="dj-jobs-status dj-jobs-status-paused">paused</span>' in page


@pytest.mark.django_db
@override_settings(**SCHEDULES)
def test_run_now_enqueues_one_job_and_pause_resume_toggle(admin_client_):
    admin_client_.get(URL)
    page = act(admin_client_, "run_now_action", "nightly").content.decode()
    job = Job.objects.get(type="echo")
    assert job.public_id in page
    assert ScheduleOccurrence.objects.get().manual
    act(admin_client_, "pause", "often")
    assert Schedule.objects.get(name="often").paused
    act(admin_client_, "resume", "often")
    assert not Schedule.objects.get(name="often").paused
    detail = admin_client_.get(reverse("admin:django_jobs_schedule_change", args=["nightly"]))
    assert "(run now)" in detail.content.decode()


@pytest.mark.django_db
@override_settings(**SCHEDULES)
def test_staff_without_the_run_permission_cannot_run_or_pause(client):
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client.force_login(user)
    assert client.get(URL).status_code == 200
    act(client, "run_now_action", "nightly")
    act(client, "pause", "nightly")
    assert Job.objects.count() == 0
    assert not Schedule.objects.get(name="nightly").paused


@pytest.mark.django_db
def test_anonymous_users_are_sent_to_the_login_page(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]
