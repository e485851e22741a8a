"""Only a completed dependency releases its dependents (of the default policy): a dead, canceled
or pending one deleted with ``QuerySet.delete()`` leaves them waiting; pruning and the admin do
not delete it while a job waits on it."""

from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.utils import timezone

from django_jobs.features.retention import prune
from django_jobs.models import Job, JobDependency
from django_jobs.worker.execution import run_job
from django_jobs.worker.heartbeat import ReleaseWaiting
from tests.admin_helpers import job_url, staff

from .test_control import run_once

pytestmark = pytest.mark.django_db(transaction=True)
LIST = "/admin/django_jobs/job/"
UNMET = ["dead", "canceled", "pending"]
EVERYTHING = {"completed": timedelta(0), "dead": timedelta(0), "canceled": timedelta(0)}


def dependency(status: str) -> Job:
    """A real job in ``status``: run to death, canceled, or pending (due in an hour, so that
    no ``run_once`` takes it)."""
    job = Job.enqueue("permanent" if status == "dead" else "echo", queue="deps",
                      delay=3600 if status == "pending" else None)
    if status == "dead":
        (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30,
                                       queues=["deps"])
        Job.objects.finish([run_job(claimed)])
    elif status == "canceled":
        assert job.cancel()
    job.refresh_from_db()
    assert job.status == status
    return job


def status_of(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def settle(sibling: Job | None = None) -> None:
    """Both ways a waiting job is released: a sibling dependency's finish, and the sweep."""
    if sibling is not None and status_of(sibling) == "pending":
        run_once(sibling)
    ReleaseWaiting()()


@pytest.fixture
def operator(client):
    client.force_login(staff("op", "view_job", "delete_job"))
    return client


def chain(status: str) -> tuple[Job, Job, Job]:
    """``dependent`` waits on a job in ``status`` and on a sibling that will complete."""
    unmet = dependency(status)
    sibling = Job.enqueue("echo", {"sibling": True})
    dependent = Job.enqueue("echo", {"n": "dependent"}, depends_on=[unmet, sibling])
    assert dependent.status == "waiting"
    return unmet, sibling, dependent


def assert_waits_on_a_deleted_job(dependent: Job, sibling: Job, status: str) -> None:
    settle(sibling)
    assert status_of(sibling) == "completed"
    assert status_of(dependent) == "waiting"
    link = JobDependency.objects.get(job=dependent, depends_on__isnull=True)
    assert link.deleted_status == status


@pytest.mark.parametrize("status", UNMET)
def test_deleting_an_unmet_dependency_with_queryset_delete_leaves_its_dependent_waiting(
        status, operator):
    unmet, sibling, dependent = chain(status)
    Job.objects.filter(pk=unmet.pk).delete()
    assert_waits_on_a_deleted_job(dependent, sibling, status)
    page = operator.get(job_url(dependent)).content.decode()
    assert f"a deleted job (it was {status.capitalize()})" in page
    assert f">{sibling.public_id}</a> (Completed)" in page


def assert_still_waits_on(dependent: Job, unmet: Job, status: str) -> None:
    assert status_of(unmet) == status and status_of(dependent) == "waiting"
    assert JobDependency.objects.filter(job=dependent, depends_on=unmet).exists()


@pytest.mark.parametrize("status", UNMET)
def test_the_admin_refuses_to_delete_an_unmet_dependency_a_job_waits_on(status, operator):
    """As for ``on_delete=PROTECT``: the page names the waiting job and has no confirm button,
    and a confirming POST deletes nothing."""
    unmet, _, dependent = chain(status)
    page = operator.get(job_url(unmet, "delete")).content.decode()
    assert "1 waiting job depends on this job" in page and dependent.public_id in page
    assert "protected related objects" in page and 'name="post"' not in page
    response = operator.post(job_url(unmet, "delete"), {"post": "yes"})
    assert response.status_code == 200
    assert_still_waits_on(dependent, unmet, status)
    # Once nothing waits on it, it goes.
    assert dependent.cancel()
    operator.post(job_url(unmet, "delete"), {"post": "yes"})
    assert not Job.objects.filter(pk=unmet.pk).exists()


@pytest.mark.parametrize("status", UNMET)
def test_the_admin_action_skips_unmet_dependencies_jobs_wait_on_unless_selected_too(
        status, operator):
    unmet, _, dependent = chain(status)
    other, _, other_dependent = chain(status)
    data = {"action": "delete_jobs", ACTION_CHECKBOX_NAME: [unmet.pk, other.pk], "index": 0}
    page = operator.post(LIST, data).content.decode()
    assert "2 waiting jobs depend on the selected jobs" in page
    assert dependent.public_id in page and other_dependent.public_id in page
    response = operator.post(LIST, {**data, "post": "yes"}, follow=True)
    assert "0 jobs deleted; 2 skipped: a waiting job depends on it" in \
        response.content.decode()
    assert_still_waits_on(dependent, unmet, status)
    assert_still_waits_on(other_dependent, other, status)
    # With its dependent selected too, both go.
    data[ACTION_CHECKBOX_NAME] = [unmet.pk, dependent.pk]
    operator.post(LIST, {**data, "post": "yes"})
    assert not Job.objects.filter(pk__in=[unmet.pk, dependent.pk]).exists()
    assert_still_waits_on(other_dependent, other, status)


def test_the_delete_pages_say_nothing_of_dependents_deleted_with_the_job_or_released(operator):
    done = run_once(Job.enqueue("echo"))
    released = Job.enqueue("echo", depends_on=[done])
    dead = dependency("dead")
    dependent = Job.enqueue("echo", depends_on=[dead])
    assert released.status == "pending"
    assert "waiting job" not in operator.get(job_url(done, "delete")).content.decode()
    data = {"action": "delete_jobs", ACTION_CHECKBOX_NAME: [dead.pk, dependent.pk], "index": 0}
    assert "waiting job" not in operator.post(LIST, data).content.decode()


@pytest.mark.parametrize("status", ["dead", "canceled"])
def test_retention_keeps_an_unmet_dependency_while_a_job_waits_on_it(status):
    unmet, sibling, dependent = chain(status)
    later = timezone.now() + timedelta(days=1)
    assert prune(EVERYTHING, now=later)[status] == 0
    settle(sibling)
    assert status_of(unmet) == status and status_of(dependent) == "waiting"
    assert prune(EVERYTHING, now=later, dry_run=True)[status] == 0
    # Once nothing waits on it, it is pruned like any other.
    assert dependent.cancel()
    pruned = prune(EVERYTHING, now=later)
    assert (pruned["dead"], pruned["canceled"]) == ((1, 1) if status == "dead" else (0, 2))
    assert not Job.objects.filter(pk=unmet.pk).exists()


def test_prunejobs_says_what_it_kept_for_waiting_jobs():
    from io import StringIO

    from django.core.management import call_command

    unmet, _, dependent = chain("dead")
    out = StringIO()
    call_command("prunejobs", "--completed", "never", "--canceled", "never", "--dead", "0",
                 stdout=out)
    assert "dead: deleted 0 older than 0:00:00; kept 1 a waiting job depends on" in \
        out.getvalue()
    assert status_of(unmet) == "dead" and status_of(dependent) == "waiting"


def test_a_retried_dependency_retention_kept_releases_its_dependent():
    unmet, sibling, dependent = chain("dead")
    settle(sibling)
    prune(EVERYTHING, now=timezone.now() + timedelta(days=1))
    assert unmet.retry()
    Job.objects.filter(pk=unmet.pk).update(type="echo")  # the handler was fixed
    run_once(unmet)
    assert status_of(dependent) == "pending"


def test_a_completed_dependency_deleted_after_it_released_its_dependent_changes_nothing():
    done = Job.enqueue("echo")
    dependent = Job.enqueue("echo", depends_on=[done])
    run_once(done)
    assert status_of(dependent) == "pending"
    # Pruning keeps it until its dependent has run (it may read its result).
    assert prune(EVERYTHING, now=timezone.now() + timedelta(days=1))["completed"] == 0
    Job.objects.filter(pk=done.pk).delete()
    ReleaseWaiting()()
    assert status_of(dependent) == "pending"
    (link,) = JobDependency.objects.filter(job=dependent)  # kept, met: the result is gone
    assert link.depends_on_id is None and link.deleted_status == "completed"
    assert run_once(dependent).status == "completed"


def test_a_completed_dependency_deleted_before_the_others_complete_does_not_hold_back():
    done, later = Job.enqueue("echo"), Job.enqueue("echo", {"n": "later"})
    dependent = Job.enqueue("echo", depends_on=[done, later])
    run_once(done)
    assert prune(EVERYTHING, now=timezone.now() + timedelta(days=1))["completed"] == 0
    Job.objects.filter(pk=done.pk).delete()
    assert status_of(dependent) == "waiting"
    run_once(later)
    assert status_of(dependent) == "pending"


def test_a_dependent_deleted_with_its_dependency_leaves_no_link():
    dead = dependency("dead")
    dependent = Job.enqueue("echo", depends_on=[dead])
    Job.objects.filter(pk__in=[dead.pk, dependent.pk]).delete()
    assert not JobDependency.objects.exists()


def test_the_migration_keeps_the_links_of_a_populated_table():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("django_jobs", "0014_mariadb_overview_and_filter_indexes")], \
        [("django_jobs", "0015_dependency_kept_when_unmet")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        OldJob, OldLink = apps.get_model("django_jobs", "Job"), apps.get_model(
            "django_jobs", "JobDependency")
        a, b = OldJob.objects.create(type="echo"), OldJob.objects.create(type="echo")
        OldLink.objects.create(job=b, depends_on=a)
    finally:  # forward through 0015 to the latest migration, where the other tests run
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after + executor.loader.graph.leaf_nodes("django_jobs"))
    link = JobDependency.objects.get(job_id=b.pk)
    assert (link.depends_on_id, link.deleted_status) == (a.pk, "")
