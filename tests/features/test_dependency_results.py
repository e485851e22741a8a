"""A dependent reads its dependencies' results (``dependency_results()``), by name, job, id or
public id; a dependency deleted after it completed still counts as met, and its result is
reported gone (pruning keeps it while a job that depends on it has not ended)."""

from datetime import timedelta

import pytest

from django_jobs import DependencyUnavailable, InvalidJob, dependency_results
from django_jobs.features.retention import prune
from django_jobs.models import Job, JobDependency

from .test_control import run_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_dependent_reads_each_result_by_name_job_id_and_public_id():
    extract = run_once(Job.enqueue("echo", {"rows": 3}))
    clean = Job.enqueue("echo", {"clean": True})
    report = Job.enqueue("read_dependencies", depends_on={"extract": extract, "clean": clean.pk})
    assert report.status == "waiting"
    run_once(clean)
    done = run_once(report)
    assert done.status == "completed"
    assert done.result == {"extract": {"result": {"echo": {"rows": 3}}},
                           "clean": {"result": {"echo": {"clean": True}}}}
    results = dependency_results(done)
    assert list(results) == ["extract", "clean"] and len(results) == 2
    for key in ("extract", extract, extract.pk, extract.public_id):
        assert results[key] == {"echo": {"rows": 3}}
        assert results.status(key) == "completed"
    with pytest.raises(KeyError):
        results["load"]
    with pytest.raises(KeyError):
        results[report]


def test_unnamed_dependencies_are_keyed_by_public_id():
    a = run_once(Job.enqueue("echo", {"n": 1}))
    b = run_once(Job.enqueue("echo", {"n": 2}))
    dependent = Job.enqueue("read_dependencies", depends_on=[a, b])
    assert dependent.status == "pending"
    assert run_once(dependent).result == {a.public_id: {"result": {"echo": {"n": 1}}},
                                          b.public_id: {"result": {"echo": {"n": 2}}}}


def test_a_dependency_deleted_after_it_completed_is_met_and_its_result_reported_gone():
    early = run_once(Job.enqueue("echo", {"n": "early"}))
    late = Job.enqueue("echo", {"n": "late"})
    dependent = Job.enqueue("read_dependencies", depends_on={"early": early, "late": late})
    # Pruning keeps it for its dependent, which has not run; a delete does not.
    assert prune({"completed": timedelta(0)}) == {"completed": 0}
    Job.objects.filter(pk=early.pk).delete()
    link = JobDependency.objects.get(job=dependent, name="early")
    assert link.depends_on_id is None and link.deleted_status == "completed"
    run_once(late)  # releases the dependent: the pruned link stays met
    assert Job.objects.get(pk=dependent.pk).status == "pending"
    result = run_once(dependent).result
    assert result["late"] == {"result": {"echo": {"n": "late"}}}
    assert result["early"]["status"] == "completed"
    assert "was deleted (pruned) since: its result is gone" in result["early"]["unavailable"]
    results = dependency_results(Job.objects.get(pk=dependent.pk))
    with pytest.raises(DependencyUnavailable):
        results["early"]


@pytest.mark.parametrize("depends_on", [{"": 1}, {7: 1}, {"x" * 101: 1}, {"a": "j-1"}])
def test_bad_names_are_refused_and_insert_nothing(depends_on):
    with pytest.raises(InvalidJob) as err:
        Job.enqueue("echo", depends_on=depends_on)
    assert "depends_on" in err.value.message_dict
    assert not Job.objects.exists()


def test_reading_results_outside_a_worker_needs_a_job():
    with pytest.raises(RuntimeError):
        dependency_results()
