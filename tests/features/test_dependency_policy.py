"""A dependent's policy for a dependency that goes dead or is canceled: keep waiting (the
default), be canceled with the reason, or run anyway; applied by the finish, a cancel, a
rescue, the enqueue and the heartbeat's sweep."""

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobs import InvalidJob, JobCanceled, dependency_results
from django_jobs.core.job_json import job_json
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.stored_errors import error_dict
from django_jobs.models import Job
from django_jobs.worker.execution import run_job
from django_jobs.worker.heartbeat import ReleaseWaiting
from tests.admin_helpers import job_url, staff

from .test_control import run_once

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def die(job: Job) -> Job:
    """Run ``job`` (of type ``permanent``) to death, as a worker does."""
    done = run_once(job)
    assert done.status == "dead"
    return done


def dependents(dependency: Job) -> dict[str, Job]:
    """One dependent per policy, and one that waits on the canceled one."""
    made = {policy: Job.enqueue("read_dependencies", {"policy": policy},
                                depends_on={"first": dependency},
                                on_dependency_failure=policy)
            for policy in ("wait", "cancel", "run")}
    made["after_canceled"] = Job.enqueue("echo", depends_on=[made["cancel"]],
                                         on_dependency_failure="cancel")
    assert {status_of(job) for job in made.values()} == {"waiting"}
    return made


def assert_applied(dependency: Job, made: dict[str, Job], status: str) -> None:
    assert status_of(made["wait"]) == "waiting"
    canceled = Job.objects.get(pk=made["cancel"].pk)
    assert canceled.status == "canceled" and canceled.finished_at is not None
    assert canceled.error["type"] == "DependencyFailed"
    assert canceled.error["details"] == {"dependency": dependency.public_id, "status": status}
    assert dependency.public_id in canceled.error["message"]
    chained = Job.objects.get(pk=made["after_canceled"].pk)
    assert chained.status == "canceled"
    assert chained.error["details"] == {"dependency": canceled.public_id, "status": "canceled"}
    assert status_of(made["run"]) == "pending"
    ran = run_once(made["run"])
    assert ran.status == "completed"
    assert ran.result["first"]["status"] == status
    assert f"is {status}: it has no result" in ran.result["first"]["unavailable"]


def test_a_dependency_that_goes_dead_in_a_finish_applies_each_policy():
    dependency = Job.enqueue("permanent")
    made = dependents(dependency)
    die(dependency)
    assert_applied(dependency, made, "dead")


def test_a_dependency_canceled_by_a_person_applies_each_policy():
    dependency = Job.enqueue("echo", delay=3600)
    made = dependents(dependency)
    assert dependency.cancel()
    assert_applied(dependency, made, "canceled")


def test_a_dependency_the_rescue_makes_dead_applies_each_policy():
    dependency = Job.enqueue("echo")
    made = dependents(dependency)
    (claimed,) = Job.objects.claim(worker_id="gone", limit=1, lease_seconds=30)
    # Its worker died: the lease ran out, and this is its last crash allowed.
    Job.objects.filter(pk=claimed.pk).update(
        leased_until=timezone.now() - timedelta(minutes=1), crashes=99)
    assert [job.status for job in Job.objects.rescue()] == ["dead"]
    assert_applied(dependency, made, "dead")


def test_a_dependency_canceled_while_it_ran_applies_each_policy():
    dependency = Job.enqueue("echo")
    made = dependents(dependency)
    (claimed,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    assert Job.objects.filter(pk=claimed.pk).cancel() == 1  # a cancel request
    # What the worker writes once the handler stopped on the request (as JobCanceled).
    now = timezone.now()
    outcome = AttemptOutcome(job=claimed, kind="canceled", started_at=now, finished_at=now,
                             error=error_dict(JobCanceled("canceled while it ran")))
    assert Job.objects.finish([outcome]) == [outcome]
    assert_applied(dependency, made, "canceled")


def test_a_policy_applies_at_enqueue_when_the_dependency_already_failed():
    dead = die(Job.enqueue("permanent"))
    canceled = Job.enqueue("read_dependencies", depends_on=[dead],
                           on_dependency_failure="cancel")
    assert canceled.status == "canceled" and canceled.error["type"] == "DependencyFailed"
    runs = Job.enqueue("read_dependencies", depends_on=[dead], on_dependency_failure="run")
    assert runs.status == "pending"
    waits = Job.enqueue("read_dependencies", depends_on=[dead])
    assert waits.status == "waiting"


def test_a_dependent_enqueued_while_its_dependency_died_is_handled_by_the_sweep():
    """The finishing worker read ``has_dependents`` before the dependents were enqueued."""
    Job.enqueue("permanent")
    (dependency,) = Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    cancels = Job.enqueue("echo", depends_on=[dependency], on_dependency_failure="cancel")
    runs = Job.enqueue("echo", depends_on=[dependency], on_dependency_failure="run")
    assert not dependency.has_dependents  # the worker's stale copy
    Job.objects.finish([run_job(dependency)])
    assert status_of(cancels) == status_of(runs) == "waiting"
    ReleaseWaiting()()
    assert status_of(cancels) == "canceled" and status_of(runs) == "pending"


def test_a_run_anyway_dependent_still_waits_for_its_unfinished_dependencies():
    dead = die(Job.enqueue("permanent"))
    later = Job.enqueue("echo", {"n": "later"})
    runs = Job.enqueue("read_dependencies", depends_on={"dead": dead, "later": later},
                       on_dependency_failure="run")
    assert runs.status == "waiting"
    ReleaseWaiting()()
    assert status_of(runs) == "waiting"
    run_once(later)
    results = dependency_results(Job.objects.get(pk=runs.pk))
    assert results.status("dead") == "dead" and results["later"] == {"echo": {"n": "later"}}
    assert status_of(runs) == "pending"


def test_a_dependent_canceled_by_policy_calls_back():
    dependency = Job.enqueue("permanent")
    dependent = Job.enqueue("echo", depends_on=[dependency], on_dependency_failure="cancel",
                            callback_url="http://127.0.0.1:9/hook")
    die(dependency)
    (delivery,) = Job.objects.filter(type="django_jobs.callback")
    assert delivery.payload == {"job_id": dependent.public_id, "status": "canceled"}


@pytest.mark.parametrize("options", [
    {"on_dependency_failure": "explode", "depends_on": [1]},
    {"on_dependency_failure": 3, "depends_on": [1]},
    {"on_dependency_failure": "cancel"},
])
def test_a_bad_policy_is_refused_and_inserts_nothing(options):
    if "depends_on" in options:
        options["depends_on"] = [Job.enqueue("echo")]
    before = Job.objects.count()
    with pytest.raises(InvalidJob) as err:
        Job.enqueue("echo", **options)
    assert "on_dependency_failure" in err.value.message_dict
    assert Job.objects.count() == before


def test_the_policy_is_in_the_job_json_and_on_the_admin_job_page(client):
    dependency = Job.enqueue("echo")
    cancels = Job.enqueue("echo", depends_on=[dependency], on_dependency_failure="cancel")
    waits = Job.enqueue("echo", depends_on=[dependency])
    plain = Job.enqueue("echo")
    assert job_json(cancels)["on_dependency_failure"] == "cancel"
    assert job_json(waits)["on_dependency_failure"] == "wait"
    client.force_login(staff("op", "view_job"))
    assert "Cancel" in field(client.get(job_url(cancels)).content.decode())
    assert "Keep waiting" in field(client.get(job_url(waits)).content.decode())
    assert field(client.get(job_url(plain)).content.decode()) == "-"


def field(page: str) -> str:
    """The text of the job page's "if a dependency fails" field."""
    start = page.index("field-if_a_dependency_fails")
    value = page.index('class="readonly"', start)
    return page[page.index(">", value) + 1:page.index("</div>", value)].strip()
