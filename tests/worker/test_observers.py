"""Observability cannot change an outcome or cost a lease: a real ``runworker`` whose tracer,
log handler or signal receiver raises or blocks (``tests/settings_observe.py``) runs each job
once, to the outcome it has without them, and says once on standard error what failed.

Each job here is a ``record`` job (one ``Execution`` row per run of its handler) or one that
fails for good (``permanent``): a job that ran more than once, or went dead or failed when it
should not, is an outcome the observer changed.
"""

import logging
import signal

import pytest
from opentelemetry import trace

from django_jobs.core import observers
from django_jobs.models import Job
from django_jobs.models import Worker as WorkerRow
from django_jobs.worker.handoff import Handoff
from tests.api_support import Api, make_token
from tests.conftest import wait_for
from tests.models import Execution
from tests.observers_support import BlockingHandler, Broken, RaisingSpanProcessor
from tests.tracing_support import finished, in_memory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1", "--queues", "observed",
        "--settings=tests.settings_observe"]


def enqueue_jobs(count: int = 4) -> list[Job]:
    jobs = [Job.enqueue("record", {"n": n}, queue="observed") for n in range(count)]
    jobs.append(Job.enqueue("permanent", queue="observed"))
    return jobs


def settled(jobs: list[Job]) -> bool:
    return Job.objects.filter(pk__in=[j.pk for j in jobs],
                              status__in=["completed", "dead"]).count() == len(jobs)


def assert_outcomes_as_without_observers(jobs: list[Job]) -> None:
    """Each record job completed in its first attempt, its handler run once; the failing one
    dead in its first attempt, as its error is not retried."""
    *records, failing = [Job.objects.get(pk=j.pk) for j in jobs]
    for job in records:
        assert (job.status, job.attempt, job.result) == ("completed", 1, {"pid": job.result["pid"]})
        assert Execution.objects.filter(job_public_id=job.public_id).count() == 1
    assert (failing.status, failing.attempt) == ("dead", 1)
    assert failing.error["type"] == "PermanentError"


def reports(output: str, text: str) -> int:
    """How many times standard error says ``text`` (a line of its own; the log line of the
    same report has the formatter's prefix)."""
    return sum(line.startswith(text) for line in output.splitlines())


def stop(worker) -> str:
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    return worker.output()


@pytest.mark.parametrize("at", ["start", "end"])
def test_a_raising_span_processor_changes_no_outcome(start_worker, at):
    jobs = enqueue_jobs()
    worker = start_worker(*FAST, env={"JOBS_OBSERVE_SPANS": at})
    wait_for(lambda: settled(jobs), timeout=60)
    output = stop(worker)
    assert_outcomes_as_without_observers(jobs)
    what = "starting" if at == "start" else "ending"
    assert reports(output, f"django-jobs: tracing ({what} an attempt's span) raised Broken") == 1, \
        output


def test_a_raising_log_handler_changes_no_outcome(start_worker):
    jobs = enqueue_jobs()
    worker = start_worker(*FAST, env={"JOBS_OBSERVE_LOG": "raise"})
    wait_for(lambda: settled(jobs), timeout=60)
    output = stop(worker)
    assert_outcomes_as_without_observers(jobs)
    reported = "django-jobs: logging (a handler of the django_jobs.worker logger) raised Broken"
    assert reports(output, reported) == 1, output


@pytest.mark.parametrize("blocking", [{"JOBS_OBSERVE_LOG": "block"},
                                      {"JOBS_OBSERVE_RECEIVER": "job_finished:block"}],
                         ids=["log handler", "job_finished receiver"])
def test_a_blocking_observer_stalls_neither_claims_heartbeat_nor_finish(
        start_worker, tmp_path, blocking):
    """Every log record (or job_finished) blocks its handler (receiver) until released;
    meanwhile the jobs are claimed, run and written, and a job that runs three leases long
    keeps its lease (it is not rescued, and completes in its first attempt): the heartbeat
    goes on."""
    release = tmp_path / "release"
    jobs = enqueue_jobs()
    long_job = Job.enqueue("record", {"sleep": 6}, queue="observed")
    worker = start_worker(*FAST, env={**blocking, "JOBS_OBSERVE_RELEASE": str(release)})
    wait_for(lambda: settled(jobs), timeout=60)
    assert_outcomes_as_without_observers(jobs)
    row = wait_for(lambda: WorkerRow.objects.first(), timeout=30)
    wait_for(lambda: WorkerRow.objects.filter(
        pk=row.pk, last_heartbeat__gt=row.last_heartbeat).exists(), timeout=30)
    wait_for(lambda: settled([long_job]), timeout=60)
    long_job.refresh_from_db()
    assert (long_job.status, long_job.attempt) == ("completed", 1)
    assert Execution.objects.filter(job_public_id=long_job.public_id).count() == 1
    release.touch()
    stop(worker)


@pytest.mark.parametrize("name", ["job_started", "job_finished"])
def test_a_raising_receiver_changes_no_outcome(start_worker, name):
    jobs = enqueue_jobs()
    worker = start_worker(*FAST, env={"JOBS_OBSERVE_RECEIVER": f"{name}:raise"})
    wait_for(lambda: settled(jobs), timeout=60)
    output = stop(worker)
    assert_outcomes_as_without_observers(jobs)
    reported = (f"django-jobs: a {name} receiver (tests.observers_support.raising_receiver) "
                "raised Broken")
    assert reports(output, reported) == 1, output


@pytest.fixture
def raising_tracer():
    """This process's tracer provider (in memory) with a span processor that raises, armed
    by the test; each report of a failure made anew."""
    memory = in_memory()
    processor = RaisingSpanProcessor("start", armed=False)
    trace.get_tracer_provider().add_span_processor(processor)
    observers._reported.clear()
    yield memory, processor
    processor.armed = False


@pytest.mark.parametrize("at", ["start", "end"])
def test_a_raising_tracer_does_not_fail_an_enqueue(raising_tracer, capsys, at):
    memory, processor = raising_tracer
    with trace.get_tracer("the caller").start_as_current_span("caller"):
        processor.at, processor.armed = at, True
        try:
            job = Job.enqueue("record", queue="observed")
            many = Job.enqueue_many("record", [{"n": 1}, {"n": 2}], queue="observed")
        finally:
            processor.armed = False
    stored = Job.objects.filter(pk__in=[job.pk, *(j.pk for j in many)])
    assert stored.count() == 3
    err = capsys.readouterr().err
    what = "starting" if at == "start" else "ending"
    assert reports(err, f"django-jobs: tracing ({what} an enqueue's span) raised Broken") == 1, err
    if at == "start":  # no span: nothing stored, as without a tracer
        assert {j.trace_context for j in stored} == {None}
    else:  # the span started: its context is stored, and the caller's span ends
        assert all(j.trace_context for j in stored)
        assert "caller" in [s.name for s in finished(memory)]


def test_a_raising_tracer_does_not_fail_a_submission_over_the_api(raising_tracer, capsys):
    """A request naming its caller's span in its headers: the enqueue's span cannot start,
    the job is still written and the answer is 201, not a 500."""
    _memory, processor = raising_tracer
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    processor.armed = True
    try:
        response = Api(make_token("submit")).post(
            "/api/jobs", {"type": "record", "queue": "observed"}, headers=headers)
    finally:
        processor.armed = False
    assert response.status_code == 201, response.content
    job = Job.objects.get(public_id=response.json()["job_id"])
    assert job.trace_context is None
    err = capsys.readouterr().err
    assert reports(err, "django-jobs: tracing (starting an enqueue's span) raised Broken") == 1


def test_a_full_hand_off_drops_records_rather_than_wait(capsys, tmp_path):
    """The worker's thread is stuck in a handler that blocks: records beyond the queue's
    capacity are dropped where they are made (each would otherwise wait for the handler), and
    that is said once."""
    gate = tmp_path / "release"
    blocking = BlockingHandler(str(gate))
    logger = logging.getLogger("django_jobs.worker")
    level = logger.level
    logger.addHandler(blocking)
    logger.setLevel(logging.INFO)
    handoff = Handoff(capacity=5)
    handoff.start()
    try:
        for n in range(50):
            logger.info("line %d", n)
        dropped = handoff.dropped
    finally:
        gate.touch()
        handoff.stop()
        logger.removeHandler(blocking)
        logger.setLevel(level)
    assert dropped >= 50 - 5 - 1  # the queue's five, and the one the thread is writing
    err = capsys.readouterr().err
    assert reports(err, "django-jobs: the worker's log handlers or job_finished receivers "
                        "take less than it makes (5 queued)") == 1, err


def test_a_report_is_made_once_per_kind(capsys):
    observers._reported.clear()
    for _ in range(3):
        observers.report("a test's observer", Broken("one"))
        observers.report("a test's observer", ValueError("two"))
    err = capsys.readouterr().err
    assert err.count("a test's observer raised Broken") == 1
    assert err.count("a test's observer raised ValueError") == 1
