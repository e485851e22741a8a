"""System checks for a wrong setup of the tasks backend."""

import pytest
from django.conf import settings
from django.core import checks
from django.test import override_settings

pytestmark = [
    pytest.mark.skipif(
        not settings.HAS_TASKS_FRAMEWORK, reason="needs django.tasks or the django-tasks backport"
    ),
    pytest.mark.db_independent,  # no database: once per Django in the whole suite
]

BACKEND = "django_jobs.backends.DatabaseBackend"


def task_check_ids(tasks_setting):
    """The ids the framework's registered check reports for this TASKS setting."""
    from django_jobs.backends.compat import check_tasks

    assert check_tasks in checks.registry.registry.get_checks()
    with override_settings(TASKS=tasks_setting):
        return sorted(m.id for m in check_tasks())


def test_the_test_settings_pass_the_checks():
    assert task_check_ids(settings.TASKS) == []


@pytest.mark.parametrize(("params", "expected"), [
    # QUEUES must be a list, not one name (a string would become a set of letters).
    ({"QUEUES": "default"}, ["django_jobs.tasks.E002"]),
    # A queue name a job cannot have.
    ({"QUEUES": ["default", "with space"]}, ["django_jobs.tasks.E003"]),
    ({"OPTIONS": ["MAX_ATTEMPTS"]}, ["django_jobs.tasks.E004"]),
    ({"OPTIONS": {"RETRIES": 3}}, ["django_jobs.tasks.E005"]),
    ({"OPTIONS": {"MAX_ATTEMPTS": 0}}, ["django_jobs.tasks.E006"]),
    ({"OPTIONS": {"MAX_ATTEMPTS": 1}}, []),
    ({"QUEUES": []}, []),
])
def test_wrong_setup_is_reported(params, expected):
    assert task_check_ids({"default": {"BACKEND": BACKEND, **params}}) == expected


def test_backend_without_the_app_installed_is_reported():
    apps_without = [app for app in settings.INSTALLED_APPS if app != "django_jobs"]
    from django_jobs.backends import DatabaseBackend

    with override_settings(INSTALLED_APPS=apps_without):
        messages = DatabaseBackend("default", {}).check()
    assert [m.id for m in messages] == ["django_jobs.tasks.E001"]
