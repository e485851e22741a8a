"""What a plain ``logging.Handler`` at ERROR on ``django_jobs.worker`` receives from the worker,
as the how-to (``docs/howto-error-trackers.md``) documents for trackers other than Sentry.

``Tracker`` is such a handler, at ERROR, beside one at DEBUG that keeps the lower records (a
tracker's breadcrumbs); the worker runs in this process, so its records reach them as they would
a site's handlers. The records' fields are those the how-to lists.
"""

import logging

import pytest
from django.core.checks import run_checks
from django.test import override_settings

import tests.edge_jobs  # noqa: F401  (the refused_result handler)
from django_jobs.models import Job
from tests.helpers import run_burst, run_until_settled
from tests.worker.test_poison import refusing_database  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


class Tracker(logging.Handler):
    """A plain handler at ``level``: the records it is given."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def about(self, job: Job) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "job_id", None) == job.public_id]


class Trackers:
    def __init__(self) -> None:
        self.errors, self.everything = Tracker(logging.ERROR), Tracker(logging.DEBUG)

    def events(self, job: Job) -> list[logging.LogRecord]:
        """The records at ERROR and above: what a tracker reports."""
        return self.errors.about(job)

    def breadcrumbs(self, job: Job) -> list[logging.LogRecord]:
        return [r for r in self.everything.about(job) if r.levelno < logging.ERROR]


@pytest.fixture
def tracker():
    trackers = Trackers()
    jobs_logger = logging.getLogger("django_jobs.worker")  # the logger the how-to names
    level = jobs_logger.level
    jobs_logger.addHandler(trackers.errors)
    jobs_logger.addHandler(trackers.everything)
    jobs_logger.setLevel(logging.INFO)
    yield trackers
    jobs_logger.removeHandler(trackers.errors)
    jobs_logger.removeHandler(trackers.everything)
    jobs_logger.setLevel(level)


def test_a_dead_job_is_an_event_with_its_traceback_and_tags(tracker):
    job = Job.enqueue("permanent", queue="mail")
    run_burst(queues=["mail"])
    [event] = tracker.events(job)
    assert event.levelno == logging.ERROR and event.outcome == "dead"
    kind, exc, tb = event.exc_info
    assert kind.__name__ == "PermanentError" and str(exc) == "cannot ever work"
    # The traceback reaches into the handler that raised.
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames[-1] == "permanent"
    assert (event.job_id, event.job_type, event.job_queue, event.attempt) == (
        job.public_id, "permanent", "mail", 1)
    assert event.reason == "PermanentError: cannot ever work"
    assert event.next == "dead: the error is not retried"
    assert (event.event, event.outcome, event.name) == (
        "job_finished", "dead", "django_jobs.worker")
    assert event.worker_id and event.duration_ms >= 0


def test_retried_failures_are_breadcrumbs_and_the_last_one_an_event(tracker):
    job = Job.enqueue("always_fails")
    run_until_settled(job)
    crumbs = tracker.breadcrumbs(job)
    failed = [r for r in crumbs if getattr(r, "outcome", None) == "failed"]
    assert [r.attempt for r in failed] == [1, 2]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failed)
    [event] = tracker.events(job)
    assert (event.outcome, event.attempt) == ("dead", 3)
    assert str(event.exc_info[1]) == "boom"


def test_log_levels_are_a_setting_merged_over_the_defaults(tracker):
    with override_settings(DJANGO_JOBS={"LOG_LEVELS": {"failed": "INFO", "dead": 50}}):
        job = Job.enqueue("always_fails")
        run_until_settled(job)
    records = tracker.everything.about(job)
    levels = [(r.outcome, r.levelno) for r in records
              if getattr(r, "event", None) == "job_finished"]
    assert sorted(levels) == [("dead", logging.CRITICAL), ("failed", logging.INFO),
                              ("failed", logging.INFO)]


def test_an_outcome_the_database_refuses_is_an_event_with_the_databases_error(
    tracker, refusing_database  # noqa: F811
):
    job = Job.enqueue("refused_result")
    run_until_settled(job)
    refusals = [r for r in tracker.events(job) if r.event == "outcome_refused"]
    assert refusals and all(r.levelno == logging.ERROR for r in refusals)
    assert "refused by the test trigger" in str(refusals[0].exc_info[1])
    assert (refusals[0].job_type, refusals[0].job_queue) == ("refused_result", "default")
    [dead] = [r for r in tracker.events(job) if r.event == "job_finished"]
    assert dead.outcome == "dead" and "refused by the test trigger" in str(dead.exc_info[1])


@pytest.mark.parametrize("levels, message", [
    ("ERROR", "must be a dict"),
    ({"lost": "ERROR"}, "unknown outcome 'lost'"),
    ({"dead": "LOUD"}, "is 'LOUD', not a logging level"),
])
def test_wrong_log_levels_are_a_system_check_error(levels, message):
    with override_settings(DJANGO_JOBS={"LOG_LEVELS": levels}):
        errors = [e for e in run_checks() if e.id == "django_jobs.E006"]
    assert errors and message in errors[0].msg
